"""``python -m burstbench``: the command line (burstbench.cli)."""

import sys

from burstbench.cli import main

sys.exit(main())
