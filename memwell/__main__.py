"""`python -m memwell`: the same command as `memwell`."""

from memwell.local.cli import main

main()
