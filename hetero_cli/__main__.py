"""``python -m hetero_cli ...``: the ``hetero`` command (where the console script is not on PATH)."""

from .entry import hetero

if __name__ == "__main__":
    hetero()
