"""Options and click parameter types shared by the ``cctk``, ``cctk krtest``, ``cctk server`` and benchmark command
lines: each declared once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import click
from click.decorators import FC

from ..core.errors import CctkError
from ..core.lm.device import DEVICE_HELP
from ..core.lm.models import BUNDLED


class OneLineGroup(click.Group):
    """A command group whose usage errors (an unknown option or command, a value of the wrong type) are one line,
    as every other error of the command line is, with the help to read: Click's own are four. ``refusal``: the
    last such line, without its ``Error:`` (``mlflow run``'s entry records it on its run)."""

    refusal: str | None = None

    def main(  # type: ignore[override]  # click's overloads: standalone, it always exits
        self, args: list[str] | None = None, prog_name: str | None = None, **extra: Any
    ) -> Any:
        if not extra.pop("standalone_mode", True):  # a caller that handles Click's exceptions itself
            return super().main(args, prog_name, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, standalone_mode=False, **extra)
        except click.UsageError as error:
            if isinstance(error, click.exceptions.NoArgsIsHelpError):  # a group alone: its help, as Click shows it
                error.show()
                raise SystemExit(error.exit_code) from None
            message = error.format_message()
            message += "" if message.endswith((".", "?", ")")) else "."
            where = f" See '{error.ctx.command_path} --help'." if error.ctx is not None else ""
            self.refusal = f"{message}{where}"
            click.echo(f"Error: {self.refusal}", err=True)
            raise SystemExit(error.exit_code) from None
        except click.ClickException as error:
            self.refusal = error.format_message()
            error.show()
            raise SystemExit(error.exit_code) from None
        except CctkError as error:  # a command of a group that does not turn it into Click's one line itself
            self.refusal = str(error)
            click.echo(f"Error: {error}", err=True)
            raise SystemExit(1) from None
        except click.Abort:
            click.echo("Aborted!", err=True)
            raise SystemExit(1) from None
        raise SystemExit(code if isinstance(code, int) else 0)  # --help and --version exit 0 as Click's own


class Given(click.ParamType[str]):
    """Text that must say something: an empty value (``--tracking ''``, a shell variable that came out empty) is
    refused in one line, not read as the option left out (which would quietly run with its default)."""

    name = "text"

    def __init__(self, what: str) -> None:
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if not str(value).strip():
            self.fail(f"is empty: give {self.what}, or leave the option out for its default", param, ctx)
        return str(value)


def tracking_option(help: str, default: str | None = None, dest: str = "tracking") -> Callable[[FC], FC]:
    """``--tracking``, declared once for every command that reads or writes runs: a tracking configuration's
    name (``mlruns_config/``) or a URI, MLFLOW_TRACKING_URI winning over both; ``help`` says what it names."""
    kind = Given("a tracking configuration's name or a URI")
    return click.option("--tracking", dest, type=kind, default=default, show_default=default is not None, help=help)


WHERE = "a tracking configuration's name or a URI (default: embedded, ./mlruns/; MLFLOW_TRACKING_URI wins)"
TRACKING = tracking_option(f"The store: {WHERE}.")
RUN_TRACKING = tracking_option(f"The store that holds a run given by its id: {WHERE}.")
SERVER_TRACKING = tracking_option("The server: a configuration name or its URL.", default="server")
DEVICE = click.option("--device", type=Given("a device (cpu, cuda, cuda:1)"), default=None, help=DEVICE_HELP)
MODEL = click.option("--model", default=BUNDLED, show_default=True, help="Roster key, Hub id or local directory.")


def out_option(help: str, **default: Any) -> Callable[[FC], FC]:
    """``--out``, a folder checked as it is read (``OutFolder``): required unless given a ``default``."""
    return click.option("--out", type=OutFolder(), required=not default, help=help, **default)


class Folder(click.Path):
    """A folder to write in, by its name: an empty one (``--out ''``, a variable that came out empty) is refused,
    not read as the working folder. Nothing is made here."""

    def __init__(self) -> None:
        super().__init__(file_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        if not str(value).strip():
            self.fail("is empty: give a folder, or . for the working one", param, ctx)
        return cast(Path, super().convert(value, param, ctx))  # path_type=Path: click returns a Path


class OutFolder(Folder):
    """An ``--out`` folder: it can be made and take files (``session.check_out``), else one line as the
    options are read, before any store, model or run is touched. Nothing is made here."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        from ..store.session import check_out

        folder = super().convert(value, param, ctx)
        check_out(folder)
        return folder


class RunIds(click.ParamType[list[str]]):
    """``--runs ID1,ID2,...``: the run ids in order, each once: a run given twice would count twice in every
    pooled number, so it is refused in one line naming it, before any store is opened."""

    name = "ID1,ID2,..."

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> list[str]:
        ids = [r.strip() for r in str(value).split(",") if r.strip()]
        repeated = sorted({r for r in ids if ids.count(r) > 1})
        if repeated:
            raise CctkError(f"--runs names {', '.join(repeated)} more than once; give each run once")
        return ids
