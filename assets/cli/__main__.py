"""`python -m assets.cli ...`: the same as `chess-pipeline ...`."""

from assets.cli.app import main

main()
