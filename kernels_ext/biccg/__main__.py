"""``python -m kernels_ext.biccg``: the BICCG solver's command line, under mpiexec (main)."""

import sys

from kernels_ext.biccg import main

sys.exit(main())
