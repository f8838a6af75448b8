"""``python -m kernels_ext.pingpong``: the ping-pong's command line, under mpiexec (main)."""

import sys

from kernels_ext.pingpong import main

sys.exit(main())
