"""``python -m hetero_cli ...``: the ``hetero`` command (where the console script is not on PATH)."""

from .cli.scripts import main

if __name__ == "__main__":
    main()
