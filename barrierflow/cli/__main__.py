"""`python -m barrierflow.cli ...`: the `barrierflow` command without its console script."""

from barrierflow.cli.commands import main

main()
