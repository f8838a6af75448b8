"""``python -m kernels_ext.storage``: the storage kernel's command line, under mpiexec (main)."""

import sys

from kernels_ext.storage import main

sys.exit(main())
