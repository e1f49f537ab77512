"""Builders of runtimes for the measuring method's worker tests (RuntimeSpec.builder, tests/ on sys.path)."""

from __future__ import annotations

import os


def noisy(feeds):
    """A runtime that prints, to Python's stdout and to file descriptor 1 (as an execution provider's C++
    code does), when built and at every run."""
    del feeds
    print("built")
    os.write(1, b"from C\n")

    def run():
        print("ran")
        os.write(1, b"ran in C\n")

    return run
