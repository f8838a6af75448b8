"""``python -m kernels_ext.triad``: the STREAM kernel's command line (see main)."""

import sys
import warnings

from kernels_ext.triad import main

with warnings.catch_warnings():
    warnings.simplefilter("default")  # our own warnings show once, on stderr
    sys.exit(main())
