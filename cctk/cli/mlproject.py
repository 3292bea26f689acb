"""Entry of the MLproject: drops the empty parameters (meaning "keep the default"), turns switch
parameters (``-P curves=yes``, ``-P figures=no``) into the CLI's flags, and calls the CLI."""

from __future__ import annotations

import sys

from .main import cli

# switches of the CLI, given as -P name=yes|no: the flag for yes, and for no (None: nothing given)
FLAGS = {"--curves": ("--curves", None), "--figures": ("--figures", "--no-figures")}
YES, NO = ("yes", "true", "1", "on"), ("no", "false", "0", "off", "")


def strip_empty(argv: list[str]) -> list[str]:
    """``["--seed", "", "--epochs", "3", "--curves", "yes", "--figures", "no"]`` ->
    ``["--epochs", "3", "--curves", "--no-figures"]``."""
    out, i = [], 0
    while i < len(argv):
        value = argv[i + 1] if i + 1 < len(argv) else None
        if argv[i] in FLAGS and value is not None and value.lower() in YES + NO:
            flag = FLAGS[argv[i]][0 if value.lower() in YES else 1]
            out += [flag] if flag else []
            i += 2
            continue
        if argv[i].startswith("--") and value == "":
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


if __name__ == "__main__":
    cli(args=strip_empty(sys.argv[1:]), prog_name="cctk")
