"""`python -m cli ...`: the same as `chess-pipeline ...`."""

from cli.app import main

main()
