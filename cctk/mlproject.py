"""Entry of the MLproject: drops the empty parameters (meaning "keep the default") and calls the CLI."""
from __future__ import annotations

import sys

from .cli import cli


def strip_empty(argv: list[str]) -> list[str]:
    """``["--seed", "", "--epochs", "3"]`` -> ``["--epochs", "3"]``."""
    out, i = [], 0
    while i < len(argv):
        if argv[i].startswith("--") and i + 1 < len(argv) and argv[i + 1] == "":
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


if __name__ == "__main__":
    cli(args=strip_empty(sys.argv[1:]), prog_name="cctk")
