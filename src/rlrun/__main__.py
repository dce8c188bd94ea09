"""`python -m rlrun` runs the command line."""

import sys

from rlrun.cli import main

sys.exit(main())
