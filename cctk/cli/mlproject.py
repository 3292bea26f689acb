"""Entry of the MLproject: checks the device first, drops the empty parameters (meaning "keep the default"),
turns switch parameters (``-P curves=yes``, ``-P figures=no``) into the CLI's flags, and calls the CLI."""

from __future__ import annotations

import sys

from ..core.errors import CctkError
from ..manuals.configure import command_options
from ..store.tracking import note_refusal
from .main import MANUALS, cli, main

# switches of the CLI, given as -P name=yes|no: the flag for yes, and for no (None: nothing given); every manual's
# switches (2.0.0's --curves) and the pipeline's --figures
FLAGS = {
    **{o.flag_name: (o.flag_name, None) for m in MANUALS for o in command_options(m.spec) if o.flag},
    "--figures": ("--figures", "--no-figures"),
}
YES, NO = ("yes", "true", "1", "on"), ("no", "false", "0", "off")  # empty: the default, as every parameter


def strip_empty(argv: list[str]) -> list[str]:
    """``["--seed", "", "--epochs", "3", "--curves", "yes", "--figures", "no"]`` ->
    ``["--epochs", "3", "--curves", "--no-figures"]``."""
    out, i = [], 0
    while i < len(argv):
        value = argv[i + 1] if i + 1 < len(argv) else None
        if argv[i] in FLAGS and value:
            if value.lower() not in YES + NO:
                raise CctkError(f"-P {argv[i][2:]}={value}: a switch takes yes or no (or nothing: its default)")
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


def check_device_first(argv: list[str]) -> None:
    """With no ``-P device=...``: end in one line (exit 1) where this machine has an NVIDIA GPU that the
    environment's torch cannot use (``mlflow run`` builds it from conda.yaml, which ``make setup``'s check
    never saw), before anything else; the command itself would otherwise train on the CPU. A device given
    is checked by the command, as ``cctk`` checks it."""
    if "--device" in argv:
        return
    from ..core.lm.device import unusable_gpu

    lost = unusable_gpu()
    if lost:
        raise CctkError(lost)


def entry(argv: list[str]) -> None:
    """The MLproject's command line after ``python -m cctk.cli.mlproject``, run as ``cctk`` runs its own (SIGTERM
    ends the runs KILLED). A command that ends in one line before it opened ``mlflow run``'s run (a bad parameter)
    leaves that line on the run as tag ``cctk.error`` (``note_refusal``): MLflow ends it FAILED after."""
    try:
        args = strip_empty(argv)
        check_device_first(args)
    except CctkError as error:
        print(f"Error: {error}", file=sys.stderr)
        note_refusal(str(error))
        raise SystemExit(1) from None
    try:
        main(args)
    except SystemExit as end:
        if end.code not in (0, None) and cli.refusal:
            note_refusal(cli.refusal)
        raise


if __name__ == "__main__":
    entry(sys.argv[1:])
