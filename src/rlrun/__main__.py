"""`python -m rlrun` runs the command line."""

from rlrun.cli import console

console()
