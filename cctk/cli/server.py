"""``cctk server`` and ``cctk ui``: MLflow's own tracking server and UI on a configured store, stopped with cctk.

``cctk.store.server`` builds the server's command line, which holds no secret, and its environment, which carries
them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from ..core.errors import CctkError
from ..core.redaction import variable_name
from ..store.server import LOOPBACK, PERMISSIONS, quiet_server, store_environment
from .options import SERVER_TRACKING, TRACKING

if TYPE_CHECKING:
    from ..store.tracking import Accounts, TrackingConfig


@click.group(invoke_without_command=True, short_help="Start an MLflow tracking server; its status; its users.")
@click.option(
    "--config",
    "config_name",
    default="server",
    show_default=True,
    help="A configuration of mlruns_config/ with a [server] table (server, postgres).",
)
@click.option("--host", default=None, help="Address to bind (default: the configuration's, 127.0.0.1).")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port (default: the configuration's).")
@click.option(
    "--no-auth",
    is_flag=True,
    help="Start without authentication even off loopback, where a server without [server.auth] is refused.",
)
@click.pass_context
def server(ctx: click.Context, config_name: str, host: str | None, port: int | None, no_auth: bool) -> None:
    """Start an MLflow tracking server on a configured backend (loopback unless told otherwise); `status`
    asks one how it is, `users` manages its accounts."""
    if ctx.invoked_subcommand is not None:
        return
    from ..store.server import check_before_start, launch, read_settings

    settings = read_settings(config_name)
    check_before_start(settings, None if no_auth else settings.auth)
    started = launch(settings, host, port, no_auth)
    click.echo("starting: " + " ".join(started.command))  # no secret in it: those are in its environment
    auth = started.settings.auth
    if auth is not None and not no_auth:
        click.echo(
            f"authentication on: admin {auth.admin!r}, default permission {auth.default_permission}; "
            "accounts with `cctk server users add`"
        )
    elif no_auth:
        click.echo("authentication OFF (--no-auth): anyone who reaches the port may read, write and delete runs")
    for note in started.notes:
        click.echo(note, err=True)

    def ready(seconds: float) -> None:
        answers = f"tracking server at {started.url} answers ({seconds:.0f} s)"
        click.echo(f"{answers}: clients use --tracking {started.clients}")

    raise SystemExit(launch_process(started.command, started.env, started.url, ready, umask=started.umask))


@server.command("status", short_help="Whether the server answers, its store, its authentication.")
@SERVER_TRACKING
def status(tracking: str) -> None:
    """Whether the server answers, its store, authentication on or off, its metrics, its runs by status."""
    from ..store import tracking as tracking_module

    config = tracking_module.resolve(tracking)
    uri = config.tracking_uri
    if not uri.startswith(("http://", "https://")):
        raise CctkError(f"{config.name!r} is no server ({config.shown}): `cctk server status` asks a tracking server")
    state = tracking_module.server_state(uri)
    if not state.answers:
        raise CctkError(f"the tracking server at {config.shown} does not answer (start it with `cctk server`)")
    who = tracking_module.user()
    click.echo(f"server   {config.shown} answers ({state.seconds:.2f} s)")
    click.echo(f"store    {_store_of(tracking)}")
    click.echo(
        "auth     " + ("on (MLflow basic-auth)" + (f", you are {who!r}" if who else "") if state.auth else "off")
    )
    click.echo(f"metrics  {state.metrics}" + (f": {uri}/metrics (Prometheus)" if state.metrics != "off" else ""))
    counts = ", ".join(f"{k} {v}" for k, v in (state.runs or {}).items())
    click.echo(f"runs     {counts} in {state.experiments} experiments" + (f" {who!r} may read" if who else ""))


def _store_of(tracking: str) -> str:
    """The backend store a configuration names (no password: the file holds none), or where to ask."""
    from ..store.server import read_settings
    from ..store.tracking import redact

    try:
        settings = read_settings(tracking)
    except CctkError:
        return "known to its admin (give --tracking with the configuration's name)"
    store = redact(settings.backend_store_uri)
    return f"{store}, artifacts {settings.artifacts_destination} ({settings.config}.toml)"


@server.group("users", short_help="A server's accounts, as its admin.")
def users() -> None:
    """A server's accounts (MLflow's basic-auth app), as its admin: MLFLOW_TRACKING_USERNAME and
    MLFLOW_TRACKING_PASSWORD name the admin's account."""


PASSWORD_ENV = click.option(
    "--password-env",
    default=None,
    metavar="VAR",
    help="Take the password from this environment variable (default: asked for, hidden). Never an argument: the "
    "process list shows arguments to every user of the host.",
)


def _new_password(name: str, password_env: str | None) -> str:
    """A user's new password: from ``password_env``, else asked for twice, hidden."""
    if password_env:
        password = os.environ.get(variable_name(password_env, "--password-env"))
        if not password:
            raise CctkError(f"--password-env {password_env}: the variable is not set")
        return password
    typed: str = click.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True)
    return typed


@users.command("add", short_help="Add user NAME, a researcher or a viewer.")
@click.argument("name")
@PASSWORD_ENV
@SERVER_TRACKING
def users_add(name: str, password_env: str | None, tracking: str) -> None:
    """Add user NAME (a researcher or a viewer: what she may do is granted per experiment)."""
    password = _new_password(name, password_env)
    accounts = _accounts(tracking)
    accounts.add(name, password)
    click.echo(
        f"user {name!r} added on {accounts.store.uri}: the default permission holds on every experiment until "
        f"a grant (an experiment to write to: cctk server users grant {name} EXPERIMENT EDIT)"
    )


@users.command("remove", short_help="Remove user NAME's login and grants.")
@click.argument("name")
@SERVER_TRACKING
def users_remove(name: str, tracking: str) -> None:
    """Remove user NAME: her login and her grants go; the runs she wrote stay."""
    accounts = _accounts(tracking)
    accounts.remove(name)
    click.echo(f"user {name!r} removed from {accounts.store.uri} with her grants; the runs she wrote stay")


@users.command("password", short_help="Set user NAME's password.")
@click.argument("name")
@PASSWORD_ENV
@SERVER_TRACKING
def users_password(name: str, password_env: str | None, tracking: str) -> None:
    """Set user NAME's password: the admin sets anyone's; a user changes her own (her current one is her login's,
    MLFLOW_TRACKING_PASSWORD or ~/.mlflow/credentials)."""
    password = _new_password(name, password_env)
    accounts = _accounts(tracking)
    accounts.password(name, password)
    click.echo(f"the password of user {name!r} on {accounts.store.uri} is changed")


@users.command("grant", short_help="Give user NAME PERMISSION on EXPERIMENT.")
@click.argument("name")
@click.argument("experiment")
@click.argument("permission", type=click.Choice(PERMISSIONS))
@click.option(
    "--shared",
    is_flag=True,
    help="Grant on an experiment another user holds MANAGE on (made it), knowing that user keeps it.",
)
@SERVER_TRACKING
def users_grant(name: str, experiment: str, permission: str, shared: bool, tracking: str) -> None:
    """Give user NAME PERMISSION on EXPERIMENT (created if new): READ reads it, EDIT also writes runs to it,
    MANAGE also deletes them and grants others. An experiment another user made (MANAGE) is refused unless
    --shared."""
    accounts = _accounts(tracking)
    granted = accounts.grant(name, experiment, permission, shared)
    others = ", ".join(f"{who} ({level})" for who, level in granted.others)
    click.echo(
        f"{name!r} has {permission} on experiment {experiment!r} (id {granted.experiment_id}) of {accounts.store.uri}"
        + (f"; also granted there: {others}" if others else "")
    )


@users.command("revoke", short_help="Take user NAME's grant on EXPERIMENT away.")
@click.argument("name")
@click.argument("experiment")
@SERVER_TRACKING
def users_revoke(name: str, experiment: str, tracking: str) -> None:
    """Take user NAME's grant on EXPERIMENT away: the default permission holds there again."""
    accounts = _accounts(tracking)
    experiment_id = accounts.revoke(name, experiment)
    click.echo(
        f"{name!r} has no grant on experiment {experiment!r} (id {experiment_id}) of {accounts.store.uri} any more: "
        "the default permission holds there"
    )


@users.command("list", short_help="Every user and her grants on experiments.")
@SERVER_TRACKING
def users_list(tracking: str) -> None:
    """Every user, admin or not, and her grants on experiments (the default permission holds elsewhere)."""
    for account in _accounts(tracking).list():
        grants = ", ".join(f"{permission} on {experiment!r}" for experiment, permission in account.grants)
        click.echo(f"{account.name}{' (admin)' if account.admin else ''}: {grants or 'no grant'}")


def _accounts(tracking: str) -> Accounts:
    from ..store import tracking as tracking_module

    return tracking_module.Accounts(tracking_module.connect(tracking, create=False, writes=False))


@click.command(short_help="Open the MLflow UI on a store runs were written to.")
@click.argument("run", required=False)
@TRACKING
@click.option("--config", "former", default=None, hidden=True)  # the option's former name
@click.option("--port", type=click.IntRange(1, 65535), default=5000, show_default=True)
def ui(run: str | None, tracking: str | None, former: str | None, port: int) -> None:
    """Open the MLflow UI on a store runs were written to (at RUN, a run id, when given); it creates none."""
    from ..store import tracking as tracking_module

    config = tracking_module.resolve(tracking or former)
    if config.tracking_uri.startswith(("http://", "https://")):  # its server is its UI
        tracking_module.check_reachable(config)
        click.echo(f"the runs of {config.shown} are served by its server: {_link(config, run)}")
        return
    why = tracking_module.missing_store(config)
    if why:
        raise CctkError(
            f"{why}: `cctk ui` opens a store runs were written to and creates none; run it in the folder "
            "that holds mlruns/, or give --tracking NAME|URI"
        )
    link = _link(config, run, f"http://{LOOPBACK}:{port}")
    click.echo(f"starting the MLflow UI on {config.shown} (Ctrl-C to stop) ...")
    beside = tracking_module.mlflow_default_here(config)
    if beside:  # the runs of `mlflow run .` are not in this store
        click.echo(f"({beside})")

    def ready(seconds: float) -> None:
        click.echo(f"MLflow UI at http://{LOOPBACK}:{port} answers ({seconds:.0f} s); cctk's runs: {link}")

    command, env = ui_command(config, port)
    raise SystemExit(launch_process(command, env, f"http://{LOOPBACK}:{port}", ready))


def _link(config: TrackingConfig, run: str | None, base: str | None = None) -> str:
    """The UI's page of ``run``, else of the runs of the experiment runs go to, else its experiments."""
    from ..store import tracking as tracking_module

    store = tracking_module.Store(config)
    base = base or config.tracking_uri
    if run:
        found = store.get(run)  # no such run: one line
        return store.runs_url(base, found.experiment_id, found.run_id)
    try:
        experiment = store.target()
    except CctkError:  # deleted, or an id that names none: the UI's list of experiments to read from
        experiment = None
    if experiment is None:
        return f"{base}/#/experiments?workflowType=machine_learning"
    return store.runs_url(base, experiment.experiment_id)


# A UI for one reader: no job runner beside it (MLflow's server jobs start two task consumers and a
# scheduler, about 0.8 GB, that reading runs never uses)
UI_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def ui_command(config: TrackingConfig, port: int = 5000) -> tuple[list[str], dict[str, str]]:
    """``mlflow ui`` on an embedded store that exists, on loopback, one worker (MLflow's default is four, for a
    UI one person reads): its command line and what its environment adds. The store's URI goes in the
    environment (``store_environment``), never on the command line."""
    command = [sys.executable, "-m", "mlflow", "ui", "--host", LOOPBACK, "--port", str(port), "--workers", "1"]
    if config.artifact_location:
        command += ["--default-artifact-root", Path(config.artifact_location).resolve().as_uri()]
    return command, {**UI_ENV, **store_environment(config.tracking_uri), **quiet_server()}


def launch_process(
    command: list[str],
    env: dict[str, str],
    ready_url: str | None = None,
    on_ready: Callable[[float], None] | None = None,
    umask: int = -1,
) -> int:
    """Run ``command`` (its environment added ``env``, its file mode mask ``umask`` where given) in a process
    group of its own until it exits; once ``ready_url`` answers, ``on_ready(seconds)``. Ctrl-C or SIGTERM to
    cctk stops the whole group (MLflow's server, uvicorn and their workers) with SIGTERM, their own clean
    stop (uvicorn re-raises a SIGINT it handled as a KeyboardInterrupt: forty lines of traceback), and cctk
    waits for it, so nothing it started outlives it (what is still there after 10 seconds is killed). Its
    exit status: the command's own, or 128 + the signal's number where a signal stopped cctk (130 for
    Ctrl-C, 143 for SIGTERM), as every cctk command stopped so exits."""
    started = time.monotonic()
    child = subprocess.Popen(command, env={**os.environ, **env}, start_new_session=True, umask=umask)
    stopped_by: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        stopped_by.append(signum)
        _signal_group(child.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if ready_url and _wait_ready(child, ready_url) and on_ready:
            on_ready(time.monotonic() - started)
        code = child.wait()
        return 128 + stopped_by[0] if stopped_by else code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop_group(child)


@contextlib.contextmanager
def running(command: list[str], env: dict[str, str], url: str, log: Path) -> Iterator[float]:
    """``command`` started in a process group of its own (its output into ``log``), until ``url`` answers
    (yields the seconds that took); stopped, the whole group, as the block ends."""
    started = time.monotonic()
    with log.open("w") as out:
        child = subprocess.Popen(
            command, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        if not _wait_ready(child, url):
            raise CctkError(f"the server did not start: {log.read_text()[-2000:]}")
        yield time.monotonic() - started
    finally:
        _stop_group(child)


def _wait_ready(child: subprocess.Popen[bytes], url: str) -> bool:
    """Whether ``url`` answered (its page: the UI itself, not only /health, which answers seconds before the
    first page does; a 401 of a server that asks who one is is an answer) before ``child`` exited."""
    while child.poll() is None:
        try:
            with urllib.request.urlopen(url + "/", timeout=5) as reply:
                status: int = reply.status  # urlopen's reply is untyped (an HTTPResponse here)
                return status == 200
        except urllib.error.HTTPError:
            return True
        except OSError:
            time.sleep(0.25)
    return False


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


def _stop_group(child: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """The leader has exited or cctk is leaving: end what is left of its group, SIGTERM then SIGKILL."""
    _signal_group(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(child.pid):
        if child.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=0.2)
        else:
            time.sleep(0.2)
    _signal_group(child.pid, signal.SIGKILL)
    child.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
