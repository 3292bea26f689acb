"""The one place that talks to MLflow: where runs are stored, and a narrow logging interface.

Where runs go: ``MLFLOW_TRACKING_URI`` when set; else ``--tracking NAME|URI``, a NAME being a file
``mlruns_config/NAME.toml`` of the working folder or, failing that, the shipped one (the repository's
top-level ``mlruns_config/``, inside the wheel as ``cctk/store/mlruns_config/``); else the embedded default
(SQLite store and artifacts under ./mlruns/).

On a shared server (MLflow's basic-auth app), the client is who ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD`` say, else MLflow's ``~/.mlflow/credentials`` (read as MLflow reads them; cctk never
takes a password as an argument), and runs go to the experiment ``MLFLOW_EXPERIMENT_NAME`` names (``cctk`` when
unset). A store's URI is shown (lines, tags, files, command lines) only through ``redact``: a database's password
reaches its client alone. A refusal (401, 403) is one line
naming who, which experiment and what permission is missing (``Refused``); a server that stops answering past
MLflow's own retries is one line too (``Unreachable``), and the runs it leaves open say so.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import time
import tomllib
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlsplit

from ..core.errors import CctkError, NoRun
from ..core.records import ui_link

if TYPE_CHECKING:  # MLflow itself is imported on first use: the light layers never load it
    import pandas as pd
    from mlflow import MlflowClient
    from mlflow.server.auth.client import AuthServiceClient
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    # ``Guarded`` hands out its client's attributes unchanged (only the errors of a call change): to mypy, it is
    # one, with MLflow's own signatures and records (Run, Experiment, ...); at run time it wraps one.
    _Client = MlflowClient
else:
    _Client = object

EXPERIMENT = "cctk"
DEFAULT_CONFIG = "embedded"
# cctk's tags: every reader and writer names them through these constants
KIND = "cctk.kind"  # pipeline, model, sweep, compare, measure, krtest, krtest-study, ...
SESSION = "cctk.session"  # the session folder's name
PROTOCOL = "cctk.protocol"  # v2 or v1
KEY = "cctk.key"  # internal key of a measured model
PARENT_KEY = "cctk.parent"  # internal key of the model it was trained from
SWEEP = "cctk.sweep"  # run id of the sweep a pipeline (or compare) belongs to
CELL = "cctk.cell"  # the sweep cell's key
ARM = "cctk.arm"  # KR-Test arm
VERSION = "cctk.version"
GIT_DIRTY = "cctk.git.dirty"  # "true" when the clone had uncommitted changes to tracked files
GIT_STATE = "cctk.git.state"  # clean, dirty, or none (no git repository holds the code: a wheel)
PARENT_RUN = "cctk.parent_run_id"  # an arm's pipeline run (also a param, parent_run_id)
ERROR = "cctk.error"  # why a run FAILED: the exception, one line
ENDED = "cctk.ended"  # why cctk ended KILLED a run that no process ran any more (a lost node, a stopped sweep)
TRAINED_AGAIN = "cctk.trained_again"  # a finished arm whose weights a resume trained again, and why
ATTEMPT = "cctk.attempt"  # a sweep cell's run: the attempt running it (2 and up: resumed after one was lost)
PACKAGE = "cctk.package."  # + a distribution's name: its version (a pipeline's parent run)
TRACKING_URI = "cctk.tracking_uri"  # the store's absolute URI, as the run recorded it
ARTIFACT_URI = "cctk.artifact_uri"  # the run's artifact location
STATUSES = ("FINISHED", "FAILED", "KILLED")
# A value a run logs as a parameter or a tag: MLflow keeps its text (``_text``)
Value = str | int | float | bool | None
# The MLflow UI opens an experiment of this kind on its runs table ("Model training"), not on GenAI traces.
EXPERIMENT_KIND = "custom_model_development"
T = TypeVar("T")  # what a call to the server answers (or a configuration holds)
ON_SERVER = ("http://", "https://")  # a tracking server's URIs; every other is a store its client opens itself


@dataclass(frozen=True)
class TrackingConfig:
    """A store: its name (a configuration's, or the URI as ``shown``), the URI its clients connect to (a
    database's may hold its password: nothing but a client gets it) and, for a store without a server, its
    artifact folder."""

    name: str
    tracking_uri: str
    artifact_location: str | None = None  # only for stores without a server

    @property
    def shown(self) -> str:
        """The URI as every line, file, tag and command line gives it: any password in it replaced."""
        return redact(self.tracking_uri)


# The repository's top-level mlruns_config/, the one source of the shipped configurations, seen from a
# checkout (this file is cctk/store/tracking.py of it)
CHECKOUT_CONFIGS = Path(__file__).resolve().parents[2] / "mlruns_config"


def shipped_configs() -> Traversable:
    """The configurations that come with cctk: the package's own (``cctk/store/mlruns_config/``, where the
    build puts the repository's top-level ``mlruns_config/``, so a wheel installed anywhere has them), or,
    in a checkout, which holds no copy, that top-level folder itself."""
    packaged = resources.files(__package__) / "mlruns_config"
    return packaged if packaged.is_dir() else CHECKOUT_CONFIGS


def config_folders() -> list[Traversable]:
    """Where a configuration NAME is looked up, the first holding ``NAME.toml`` winning: ``mlruns_config/``
    of the working folder (a researcher's own or changed configurations), then the shipped ones (once,
    where the working folder is the checkout's top)."""
    here, shipped = Path.cwd() / "mlruns_config", shipped_configs()
    return ([here] if here.is_dir() and here.resolve() != shipped else []) + [shipped]


def config_names() -> list[str]:
    return sorted(
        {
            entry.name.removesuffix(".toml")
            for folder in config_folders()
            for entry in folder.iterdir()
            if entry.name.endswith(".toml")
        }
    )


def config_file(name: str) -> Traversable:
    """The file of configuration ``name`` (the first folder of ``config_folders`` holding it), or one line."""
    for folder in config_folders():
        entry = folder / f"{name}.toml"
        if entry.is_file():
            return entry
    raise CctkError(
        f"unknown tracking configuration {name!r}; choose one of: {', '.join(config_names())}, or give a tracking URI"
    )


def read_config(name: str) -> dict[str, Any]:
    """Configuration ``name``, parsed; a file that is no TOML is one line naming it and where it goes wrong."""
    entry = config_file(name)
    try:
        return tomllib.loads(entry.read_text())
    except tomllib.TOMLDecodeError as error:
        raise CctkError(f"{entry}: not valid TOML: {error}") from None


# How a configuration's value of each kind is named in the line that refuses another
_KINDS: dict[type, str] = {str: "a string", int: "an integer", list: "a list", dict: "a table"}


def config_value(table: Mapping[str, Any], key: str, kind: type[T], where: str, default: T | None = None) -> T:
    """``table[key]`` (``default`` where it is left out), checked to be a ``kind``; a value missing or of
    another kind is one line naming the key and ``where`` it is (the file and its table)."""
    value = table.get(key, default)
    if value is None:
        raise CctkError(f"{where} {key} is missing")
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CctkError(f"{where} {key} = {_toml(value)} is not {_KINDS.get(kind, kind.__name__)}")
    return value


def config_names_list(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    """A list of strings (``allowed_hosts = ["a", "b"]``): one string alone is refused, not split into letters."""
    value = config_value(table, key, list, where, [])
    if not all(isinstance(item, str) for item in value):
        raise CctkError(f"{where} {key} = {_toml(value)} is not a list of strings")
    return tuple(value)


def _toml(value: Any) -> str:
    """A value as TOML writes it (strings quoted, ``true``), for a line that refuses it."""
    return json.dumps(value, ensure_ascii=False, default=str)


def resolve(tracking: str | None = None) -> TrackingConfig:
    """The store runs go to (see the module docstring for the order), its URI and artifact folder made
    absolute: a run records where it is, wherever it is read from later."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return TrackingConfig("MLFLOW_TRACKING_URI", absolute_uri(_no_server_password(env)))
    tracking = tracking or DEFAULT_CONFIG
    if "://" in tracking or tracking.startswith("sqlite:"):
        return TrackingConfig(redact(tracking), absolute_uri(_no_server_password(tracking)))
    raw, where = read_config(tracking), f"{config_file(tracking)}:"
    artifacts = config_value(raw, "artifact_location", str, where, "")
    uri = config_value(raw, "tracking_uri", str, where)
    return TrackingConfig(
        tracking, absolute_uri(_no_server_password(uri)), str(Path(artifacts).absolute()) if artifacts else None
    )


# Query parameters that carry a secret (psycopg2's and libpq's password=, MySQL's passwd=, a token=)
_SECRET_KEYS = ("pass", "pwd", "secret", "token")


def redact(uri: str) -> str:
    """``uri`` with the password of its user (``postgresql://cctk:***@host/db``) and the value of every
    query parameter that holds one (``?password=***``) replaced: the one form in which cctk writes or
    prints a URI (tags, run_info.json, reports, lines, command lines). The rest is kept as written."""
    parts = urlsplit(uri)
    shown = uri  # spliced, not rebuilt: urlunsplit would drop the empty host of sqlite:///path
    if parts.password is not None:
        user, _, host = parts.netloc.rpartition("@")
        shown = shown.replace(f"//{parts.netloc}", f"//{user.split(':', 1)[0]}:***@{host}", 1)
    query = "&".join(
        f"{piece.split('=', 1)[0]}=***" if "=" in piece and _secret_key(piece.split("=", 1)[0]) else piece
        for piece in parts.query.split("&")
    )
    if query != parts.query:
        head, _, tail = shown.partition("?")
        shown = f"{head}?{tail.replace(parts.query, query, 1)}"
    return shown


def _secret_key(key: str) -> bool:
    return any(word in unquote(key).lower() for word in _SECRET_KEYS)


def has_password(uri: str) -> bool:
    """Whether ``uri`` holds a password (in its user part or its query), as ``redact`` finds it."""
    return redact(uri) != uri


def password_problem(password: str) -> str | None:
    """Why MLflow's basic-auth app would refuse ``password`` for an account (its own rule, in its words), or None."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import _validate_password  # the rule create_user applies

    try:
        _validate_password(password)
    except MlflowException as error:
        return error.message
    return None


def _no_server_password(uri: str) -> str:
    """``uri`` as it is, unless it is a tracking server's and carries a password (``http://alice:secret@host``,
    ``?password=``): MLflow's client takes the account from the environment (or ~/.mlflow/credentials), and a
    sweep hands the URI to every worker. A database's URI may hold its password: its client needs it, and
    cctk shows it only redacted."""
    if uri.startswith(ON_SERVER) and has_password(uri):
        raise CctkError(
            f"the tracking URI {redact(uri)} carries a password: give the server's address alone and the account in "
            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (MLflow's client reads them)"
        )
    return uri


def absolute_uri(uri: str) -> str:
    """``uri`` with a relative SQLite path (``sqlite:///mlruns/mlflow.db``) or a relative ``file:`` path taken
    from the working folder; any other URI as it is."""
    path = sqlite_path(uri)
    if path is not None and str(path) != ":memory:":
        query = uri.split("?", 1)[1] if "?" in uri else ""
        return f"sqlite:///{path.absolute()}" + (f"?{query}" if query else "")
    if uri.startswith("file:") and not uri.startswith("file://"):
        return Path(uri.removeprefix("file:")).absolute().as_uri()
    return uri


HOW_TO_POINT = (
    "point at the store that holds it with MLFLOW_TRACKING_URI=URI, --tracking NAME|URI "
    "(a name of mlruns_config/ or a URI) or, from Python, tracking_name="
)


class NoStore(CctkError):
    """A read found no store at the configured place (a SQLite file that does not exist, a server that
    does not answer): nothing was created there."""


class Refused(CctkError):
    """The tracking server refused a request: it does not know the user (401) or the user lacks a permission
    on the experiment (403). One line: who, which experiment, what is missing, who can grant it."""


class Unreachable(CctkError):
    """The tracking server stopped answering (503s, refused or dropped connections) past MLflow's retries.
    ``left_running``: the runs that could not be ended there, so show RUNNING until resumed."""

    def __init__(self, why: str, left_running: tuple[str, ...] = ()):
        self.why, self.left_running = why, left_running
        tail = (
            f"; run{'s' if len(left_running) > 1 else ''} {', '.join(left_running)} could not be ended there and "
            "stay RUNNING: resume once the server answers (cctk run --resume RUN_ID for a pipeline)"
            if left_running
            else ""
        )
        super().__init__(why + tail)


def missing_store(config: TrackingConfig) -> str | None:
    """Why ``config``'s store cannot be read without creating it (None when it can): a SQLite file that is
    not there, or a server that does not answer."""
    path = sqlite_path(config.tracking_uri)
    if path is not None:
        return None if path.is_file() else f"there is no MLflow store at {path}"
    try:
        check_reachable(config)
    except CctkError as error:
        return str(error)
    return None


def check_reachable(config: TrackingConfig, timeout: float = 5.0) -> None:
    """A server that does not answer, or a database that refuses the connection, fails here in one line,
    before any model is loaded (MLflow's client would retry a database for a minute, then a traceback)."""
    if is_database(config.tracking_uri):
        problem = database_problem(config.tracking_uri)
        if problem:
            raise CctkError(f"cannot reach the tracking store {config.shown}: {problem}")
        return
    if not config.tracking_uri.startswith(("http://", "https://")):
        return
    url = config.tracking_uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            if reply.status == 200:
                return
    except OSError:
        pass
    raise CctkError(
        f"cannot reach the MLflow tracking server at {config.tracking_uri} "
        f"(start it with `cctk server`, or pick another --tracking)"
    )


def is_database(uri: str) -> bool:
    """Whether ``uri`` is a database server's that MLflow opens through SQLAlchemy (PostgreSQL, MySQL, SQL
    Server); SQLite's is a file."""
    from mlflow.store.db.db_types import DATABASE_ENGINES, SQLITE

    dialect = uri.split(":", 1)[0].split("+", 1)[0]
    return "://" in uri and dialect in DATABASE_ENGINES and dialect != SQLITE


def database_problem(uri: str) -> str | None:
    """Why a database refuses a connection (its driver's words, one line, no password), or None where it
    takes one."""
    import sqlalchemy

    timeout = {"connect_timeout": 10} if uri.startswith(("postgresql", "mysql")) else {}  # not the TCP timeout
    try:
        engine = sqlalchemy.create_engine(uri, connect_args=timeout, poolclass=sqlalchemy.pool.NullPool)
    except (sqlalchemy.exc.ArgumentError, ImportError) as error:  # a malformed URI, a driver not installed
        return database_error(error)
    try:
        with engine.connect():
            return None
    except sqlalchemy.exc.SQLAlchemyError as error:
        return database_error(error)
    finally:
        engine.dispose()


def database_error(error: BaseException) -> str:
    """A database error in one line: the driver's words (SQLAlchemy wraps them with its SQL), no password."""
    cause = getattr(error, "orig", None) or error
    return redact(" ".join(str(cause).split()))[:300]


# -- who may do what on a shared server: refusals and outages as one line ------------------------------------

# What a client call needs on the experiment it touches, in MLflow's basic-auth levels (READ < EDIT < MANAGE).
_READS = ("get_", "search_", "list_", "download_")
_MANAGES = ("delete_", "restore_")
_DOING = {"READ": "read", "EDIT": "write to", "MANAGE": "delete runs of"}
# The calls whose first argument is an experiment id (or a list of them); every other call's is a run id.
_BY_EXPERIMENT = {"create_run", "get_experiment", "set_experiment_tag", "delete_experiment", "search_runs"}


CREDENTIALS = "~/.mlflow/credentials"  # MLflow's own file of a login (its [mlflow] section)


@dataclass(frozen=True)
class Login:
    """Who this process is to a tracking server, her password, and where the password was found (the line of
    a refused login names it)."""

    user: str | None
    password: str | None
    source: str  # "MLFLOW_TRACKING_PASSWORD", "~/.mlflow/credentials", or "no password"


def login() -> Login:
    """The login MLflow's client sends, read as it reads it (``mlflow.utils.credentials.read_mlflow_creds``):
    each of ``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD``, else the file's
    ``mlflow_tracking_username`` and ``mlflow_tracking_password``. A file it cannot read is one line naming it
    (MLflow's client would fail every request with a traceback)."""
    import configparser

    from mlflow.utils.credentials import read_mlflow_creds

    try:
        found = read_mlflow_creds()
    except (configparser.Error, UnicodeDecodeError) as error:
        first = " ".join(str(error).split())[:200]
        raise CctkError(
            f"{Path(CREDENTIALS).expanduser()}: MLflow cannot read it as its credentials file ({first}); it holds "
            "a section [mlflow] with mlflow_tracking_username = ... and mlflow_tracking_password = ..."
        ) from None
    source = (
        "MLFLOW_TRACKING_PASSWORD"
        if os.environ.get("MLFLOW_TRACKING_PASSWORD")
        else CREDENTIALS
        if found.password
        else "no password"
    )
    return Login(found.username or None, found.password or None, source)


def user() -> str | None:
    """Who this process is to a tracking server, as MLflow's client says it (``login``)."""
    return login().user


def experiment_name() -> str:
    """The experiment runs go to: MLflow's own ``MLFLOW_EXPERIMENT_NAME`` where set (a researcher's own on a
    shared server), else ``cctk``."""
    return os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT


def needs(method: str) -> str:
    """The permission a client call needs on its experiment (a refusal names it)."""
    return "READ" if method.startswith(_READS) else "MANAGE" if method.startswith(_MANAGES) else "EDIT"


def http_status(error: BaseException) -> int | None:
    """The HTTP status a tracking server answered a failed call with (401, 403, 404, ...); None where no answer
    came (an outage) or the error is no answer of a server at all."""
    from mlflow.exceptions import MlflowException

    if outage(error) is not None:
        return None
    response = getattr(error, "response", None)  # requests' HTTPError: the artifact proxy's answer
    if response is not None and getattr(response, "status_code", None):
        return int(response.status_code)
    return error.get_http_status_code() if isinstance(error, MlflowException) else None


def outage(error: BaseException) -> str | None:
    """Why no answer came, where ``error`` (or what it wraps) is a connection refused or dropped, a timeout,
    or a server still answering 5xx after MLflow's retries; None otherwise. The words end with the retry
    budget the client spent (``retry_budget``)."""
    import requests

    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, requests.exceptions.RetryError | requests.exceptions.ConnectionError):
            text = str(seen)
            codes = re.search(r"too many (\d+) error responses", text)
            if codes:
                return f"it answered {codes.group(1)}, past {retry_budget()}"
            what = "the connection was refused" if "refused" in text.lower() else "the connection was dropped"
            return f"{what}, past {retry_budget()}"
        if isinstance(seen, requests.exceptions.Timeout | requests.exceptions.ChunkedEncodingError):
            return f"it stopped answering mid-request, past {retry_budget()}"
        seen = seen.__cause__ or seen.__context__
    return None


# urllib3's longest wait between two tries (Retry.DEFAULT_BACKOFF_MAX), which MLflow's retries keep
BACKOFF_MAX = 120.0


def check_retry_budget() -> None:
    """The retry budget MLflow's variables set is one its client takes (integers, within its limits: at most 10
    retries), or one line now; MLflow would refuse every request later, each with a traceback."""
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR, MLFLOW_HTTP_REQUEST_MAX_RETRIES
    from mlflow.exceptions import MlflowException
    from mlflow.utils.rest_utils import _validate_backoff_factor, _validate_max_retries  # the client's own checks

    variables = (MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR)
    try:
        _validate_max_retries(MLFLOW_HTTP_REQUEST_MAX_RETRIES.get())
        _validate_backoff_factor(MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get())
    except (ValueError, MlflowException) as error:
        given = ", ".join(f"{v.name}={os.environ[v.name]}" for v in variables if v.name in os.environ)
        why = error.message if isinstance(error, MlflowException) else "not an integer"
        raise CctkError(f"MLflow's client takes no retry budget of {given}: {why}") from None


def retry_budget() -> str:
    """The retries MLflow's client makes before it gives a call up, as its variables set them: each waits
    ``factor * 2 ** (k - 1)`` seconds (the first none; at most 2 minutes), so the defaults (7 retries, factor
    2) ride out about 4 minutes of a server that refuses or 503s; a longer restart needs more."""
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR, MLFLOW_HTTP_REQUEST_MAX_RETRIES

    retries, factor = MLFLOW_HTTP_REQUEST_MAX_RETRIES.get(), MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get()
    seconds = sum(min(BACKOFF_MAX, factor * 2 ** (k - 1)) for k in range(2, retries + 1))
    return (
        f"the client's {retries} retr{'y' if retries == 1 else 'ies'} ({seconds:.0f} s of back-off; "
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES and MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR set them)"
    )


def refusal(status: int, uri: str, method: str, experiment: str | None) -> Refused:
    """The one line of a 401 or 403: who, which experiment, what permission is missing and who grants it."""
    account = login()
    who = account.user
    if status == 401:
        if who is None:
            return Refused(
                f"the tracking server at {uri} asks who you are (401): set MLFLOW_TRACKING_USERNAME and "
                f"MLFLOW_TRACKING_PASSWORD (or {CREDENTIALS}) to your account on it (its admin makes one: "
                "cctk server users add)"
            )
        given = "no password was given" if account.password is None else f"the password in {account.source} is not hers"
        return Refused(f"the tracking server at {uri} does not accept user {who!r} (401): no such user, or {given}")
    if method == "create_experiment":
        return Refused(f"user {who!r} may not create experiments on {uri} (403): ask its admin for one")
    level = needs(method)
    where = f"experiment {experiment!r}" if experiment else "this experiment"
    grant = f"cctk server users grant {who} {experiment} {level}" if experiment else "cctk server users grant"
    return Refused(
        f"user {who!r} may not {_DOING[level]} {where} on {uri} (403): that needs {level} there; "
        f"the server's admin grants it ({grant})"
        + (f", or write to an experiment of your own (MLFLOW_EXPERIMENT_NAME={who})" if level == "EDIT" else "")
    )


class Guarded(_Client):
    """An MLflow client whose refusals and outages are one line each (``Refused``, ``Unreachable``); every
    other error goes on as MLflow raised it. Attributes (``tracking_uri``) are the client's."""

    def __init__(self, client: MlflowClient, uri: str):
        self._client, self._uri = client, uri

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._client, name)
        if not callable(found) or not self._uri.startswith(ON_SERVER):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return found(*args, **kwargs)
            except CctkError:
                raise
            except Exception as error:
                line = self.translated(error, name, args, kwargs)
                if line is None:
                    raise
                raise line from None

        return call

    def translated(
        self, error: Exception, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> CctkError | None:
        """``error`` as one line, or None where it is no refusal or outage."""
        why = outage(error)
        if why is not None:
            return Unreachable(
                f"the tracking server at {self._uri} stopped answering while cctk called {method}: {why}"
            )
        status = http_status(error)
        if status in (401, 403):
            return refusal(status, self._uri, method, self._experiment(method, args, kwargs) if status == 403 else None)
        return None

    def _experiment(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The name of the experiment the call touched (looked up for the line; None where it cannot be)."""
        first = args[0] if args else next(iter(kwargs.values()), None)
        if isinstance(first, list | tuple):  # search_runs' experiment ids
            first = first[0] if first else None
        if first is None:
            return None
        try:
            if method == "get_experiment_by_name":
                return str(first)
            experiment_id = (
                str(first) if method in _BY_EXPERIMENT else self._client.get_run(str(first)).info.experiment_id
            )
            return self._client.get_experiment(experiment_id).name
        except Exception:  # the user may not read it either: the line says what it can
            return None


def check_access(store: Store, writes: bool) -> None:
    """On a server, before any work: whether it knows the user (a 401 fails here) and, for a command that
    writes, whether she may write to the experiment its runs go to (READ only fails here, not after an hour
    of training). A server without MLflow's basic-auth app lets anyone write: nothing more is asked."""
    if not store.uri.startswith(ON_SERVER):
        return
    check_retry_budget()
    who = login().user  # first: a credentials file MLflow cannot read fails here in one line
    name = experiment_name()
    found = store.client.get_experiment_by_name(name)  # a login the server refuses: Refused, one line
    if not writes or found is None or who is None:
        return  # a new experiment is its creator's (MANAGE): any user may create one
    have = store.permission(found.experiment_id)
    if have is not None and have not in ("EDIT", "MANAGE"):
        raise Refused(
            f"user {who!r} has {have} on experiment {name!r} on {store.uri}: a run needs EDIT there; "
            f"the server's admin grants it (cctk server users grant {who} {name} EDIT), or write to an "
            f"experiment of your own (MLFLOW_EXPERIMENT_NAME={who})"
        )


def _left_running(run: LiveRun, gone: Unreachable) -> Unreachable:
    """``gone`` once ``run`` is ended FAILED (the server answers again), or naming ``run`` among the runs
    left RUNNING. One try, no retries: MLflow's client already waited minutes for the call that failed."""
    with no_retries():
        try:
            run.failed(gone)
            return gone
        except Unreachable:
            return Unreachable(gone.why, (*gone.left_running, run.run_id))


@contextmanager
def no_retries() -> Iterator[None]:
    """MLflow's client tries each request once in the block: after an outage, what is left to say to the
    server (ending the runs, the system metrics' last values) gets one try, not the whole budget again."""
    previous = os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES")
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"  # read by MLflow's client on every request
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("MLFLOW_HTTP_REQUEST_MAX_RETRIES", None)
        else:
            os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = previous


def finish_monitor(monitor: SystemMetricsMonitor, gone: bool) -> None:
    """Stop MLflow's system-metrics monitor. After an outage (``gone``) its last values get one try, and its
    error about them is not printed: the client spent its retries on the call that failed, and the command's one
    line says why."""
    if not gone:
        monitor.finish()
        return
    quiet = logging.getLogger("mlflow.system_metrics")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        with no_retries():
            monitor.finish()
    finally:
        quiet.setLevel(level)


@dataclass(frozen=True)
class TrackedRun:
    """What cctk reads back of an MLflow run: plain values, no MLflow objects."""

    run_id: str
    experiment_id: str
    status: str
    params: dict[str, str]
    tags: dict[str, str]


class LiveRun:
    """A run being logged to: a narrow logging interface over one MLflow run (params, metrics, tags, files).
    A run read back from the store is a ``TrackedRun``."""

    def __init__(self, run_id: str, client: MlflowClient):
        self.run_id = run_id
        self._client = client

    def params(self, values: Mapping[str, Value]) -> None:
        """Log ``values``; MLflow never changes a logged parameter, so where ``mlflow run`` already logged
        a key (an MLproject parameter as the user gave it, e.g. ``profile=auto``) and the value in force
        differs (``quick``), the value in force goes under ``<key>.resolved``."""
        from mlflow.entities import Param

        logged = self._client.get_run(self.run_id).data.params
        texts = {k: _text(v) for k, v in values.items()}
        items = [
            Param(k if logged.get(k, v) == v else f"{k}.resolved", v) for k, v in texts.items() if logged.get(k) != v
        ]
        for i in range(0, len(items), 100):
            self._client.log_batch(self.run_id, params=items[i : i + 100])

    def metrics(self, values: Mapping[str, float], step: int = 0) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in values.items()]
        self._client.log_batch(self.run_id, metrics=items)

    def tags(self, values: Mapping[str, Value]) -> None:
        for k, v in values.items():
            self._client.set_tag(self.run_id, k, _text(v))

    def files(self, local_path: Path, artifact_path: str | None = None) -> None:
        local_path = Path(local_path)
        if local_path.is_dir():
            self._client.log_artifacts(self.run_id, str(local_path), artifact_path)
        else:
            self._client.log_artifact(self.run_id, str(local_path), artifact_path)

    def note(self, text: str) -> None:
        """The run's one-line description (the UI's "Description")."""
        self._client.set_tag(self.run_id, "mlflow.note.content", text)

    def dataset(self, table: pd.DataFrame, name: str, source: str, context: str = "training") -> None:
        """``table`` (a DataFrame) as an MLflow dataset input of this run, with its context."""
        from mlflow.data.pandas_dataset import from_pandas  # what mlflow.data.from_pandas is, at run time
        from mlflow.entities import DatasetInput, InputTag
        from mlflow.exceptions import MlflowException

        with warnings.catch_warnings():  # two UserWarnings per arm that say nothing about cctk's data:
            # a local path matches MLflow's LocalArtifactDatasetSource twice (it picks it either way), and
            # the schema inferred from integer columns (a, b) could not hold missing values (there are none)
            warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted")
            warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer column")
            dataset = from_pandas(table, source=source, name=name)
            tag = InputTag(key="mlflow.data.context", value=context)
            inputs = [DatasetInput(dataset._to_mlflow_entity(), tags=[tag])]
        for attempt in range(3):
            try:
                self._client.log_inputs(self.run_id, datasets=inputs)
                return
            except MlflowException as error:
                # A dataset is one row per (experiment, name, digest), found or created by the store in
                # two steps: two pipelines logging the same corpus at once (two seeds share the correct
                # sums) race, and the loser gets a unique-key violation. Again, the row is found.
                if attempt == 2 or not _duplicate_key(error):
                    raise
                time.sleep(0.2 * (attempt + 1))

    def table(self, table: pd.DataFrame, artifact_file: str) -> None:
        """``table`` as an MLflow table artifact (shown as a table in the UI)."""
        self._client.log_table(self.run_id, data=table, artifact_file=artifact_file)

    def system_metrics(self, interval: float = 10.0) -> SystemMetricsMonitor | None:
        """Start logging CPU, memory, disk, network (and GPU where there is one) every ``interval`` s;
        returns the monitor (``finish()`` it), or None where MLflow cannot monitor this machine."""
        try:
            from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

            # it warns of each value it could not log (a server that stops answering is cctk's one line), and
            # says at its start and end what it does (the run's parameters say it: system metrics on)
            logging.getLogger("mlflow.system_metrics").setLevel(logging.ERROR)
            monitor = SystemMetricsMonitor(
                self.run_id, sampling_interval=interval, tracking_uri=self._client.tracking_uri
            )
            monitor.start()
            return monitor
        except Exception:  # psutil missing, an exotic platform: the run goes on without them
            return None

    @property
    def experiment_id(self) -> str:
        return self._client.get_run(self.run_id).info.experiment_id

    @property
    def artifact_uri(self) -> str:
        """Where the run's artifacts are stored (the store's own URI for them)."""
        # the store gives every run it creates one (RunInfo's ``str | None`` is for a record not stored yet)
        uri: str = self._client.get_run(self.run_id).info.artifact_uri
        return uri

    def end(self, status: str = "FINISHED") -> None:
        self._client.set_terminated(self.run_id, status=status)

    def failed(self, error: BaseException) -> None:
        """End the run FAILED, the error as one line in tag ``cctk.error``."""
        text = " ".join(f"{type(error).__name__}: {error}".split())
        try:
            self._client.set_tag(self.run_id, ERROR, text[:4000])
        finally:
            self.end("FAILED")


@contextmanager
def ending(run: LiveRun) -> Iterator[LiveRun]:
    """End ``run`` as the block ends: FINISHED, KILLED (``KeyboardInterrupt``, SIGTERM) or FAILED (any
    other exception, recorded as tag ``cctk.error``); the exception goes on. A server that stopped answering
    (``Unreachable``) gets one quick try; where it fails, the run is named as left RUNNING (resumable).
    ``Store.run`` opens every run inside it."""
    try:
        yield run
    except KeyboardInterrupt:
        run.end("KILLED")
        raise
    except Unreachable as gone:  # the server stopped answering: end it if it answers again, else say so
        raise _left_running(run, gone) from None
    except BaseException as error:
        run.failed(error)
        raise
    try:
        run.end("FINISHED")
    except Unreachable as gone:
        raise Unreachable(gone.why, (*gone.left_running, run.run_id)) from None


def active_run() -> LiveRun | None:
    """The run MLflow holds active in this process (``mlflow.start_run()``, or a Hugging Face Trainer's
    ``MLflowCallback``), through a client on MLflow's current tracking URI; None when there is none."""
    import mlflow
    from mlflow import MlflowClient

    found = mlflow.active_run()
    return None if found is None else LiveRun(found.info.run_id, MlflowClient(tracking_uri=mlflow.get_tracking_uri()))


def _duplicate_key(error: Exception) -> bool:
    """A store's unique-key violation (PostgreSQL, SQLite, MySQL), seen through MLflow's error text."""
    text = str(error).lower()
    return any(k in text for k in ("uniqueviolation", "unique constraint", "duplicate key", "duplicate entry"))


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (relative or absolute, query left out); None otherwise."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri.removeprefix("sqlite:///").split("?", 1)[0])


def _open_client(uri: str) -> MlflowClient:
    """An MLflow client on ``uri``. A SQLite store is opened under an exclusive lock on its folder: MLflow
    creates a new store's tables (alembic migrations) on first open, and two processes doing that at once
    leave it broken for good; the second opener waits and finds the tables made. A file that is no
    MLflow store fails in one line naming it."""
    from mlflow import MlflowClient

    path = sqlite_path(uri)
    if path is None:
        return MlflowClient(tracking_uri=uri)
    fd = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.parent, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the other opener is done
        return MlflowClient(tracking_uri=uri)
    except Exception as error:  # sqlalchemy's DatabaseError on a file of garbage, an alembic error, no folder
        cause = getattr(error, "orig", None) or error  # sqlalchemy wraps the driver's error with its SQL
        first = " ".join(str(cause).split())[:200]
        raise CctkError(
            f"the tracking store {path} cannot be opened as an MLflow SQLite store "
            f"({type(cause).__name__}: {first}); move it away or pick another --tracking"
        ) from None
    finally:
        if fd is not None:
            os.close(fd)


class Store:
    """One tracking store, through a client that carries its URI (MLflow's global URI is never set)."""

    def __init__(self, config: TrackingConfig):
        self.config = config
        self.uri = config.shown  # what runs record and lines say: a database's password is its client's alone
        self.client = Guarded(_open_client(config.tracking_uri), self.uri)
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bar per downloaded file
        # nor MLflow's two lines per ended run on a server, whose links open the GenAI view: cctk prints its own
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")

    def experiment(self, name: str | None = None) -> str:
        """The id of experiment ``name`` (``experiment_name()`` by default), created (with the configured
        artifact folder) if needed."""
        name = name or experiment_name()
        found = self.client.get_experiment_by_name(name)
        if found is None:
            location = None
            if self.config.artifact_location:
                location = Path(self.config.artifact_location).resolve().as_uri()
            try:
                self.client.create_experiment(name, artifact_location=location)
            except Exception:  # another process created it first: found below, else the error goes on
                if self.client.get_experiment_by_name(name) is None:
                    raise
            found = self.client.get_experiment_by_name(name)
            if found is None:  # deleted by another process the moment it was made
                raise CctkError(f"experiment {name!r} was deleted from {self.uri} as cctk created it")
        if found.tags.get("mlflow.experimentKind") is None:  # new, or made before cctk tagged its kind
            self._tag_kind(found.experiment_id)
        return found.experiment_id

    def _tag_kind(self, experiment_id: str) -> None:
        """Set the experiment's kind tag; another process setting it at the same moment makes the store
        refuse one insert (a unique-key violation), which is no error when the tag is there after."""
        try:
            self.client.set_experiment_tag(experiment_id, "mlflow.experimentKind", EXPERIMENT_KIND)
        except Exception:
            if self.client.get_experiment(experiment_id).tags.get("mlflow.experimentKind") is None:
                raise

    @contextmanager
    def run(
        self,
        kind: str,
        name: str,
        tags: Mapping[str, Value] | None = None,
        parent: LiveRun | str | None = None,
        experiment_id: str | None = None,
        attach: bool = False,
        reopen: str | None = None,
    ) -> Iterator[LiveRun]:
        """The one lifecycle of every cctk run: open it (tagged ``cctk.kind``), yield it, and end it
        FINISHED when the block completes, KILLED on Ctrl-C or SIGTERM (``KeyboardInterrupt``), FAILED
        on any other exception (the error, one line, as tag ``cctk.error``); the exception goes on.

        ``attach``: the run ``mlflow run`` created (``MLFLOW_RUN_ID``) becomes this run when there is one.
        ``reopen``: the id of an existing run this one continues (a resume): set RUNNING again, its tags
        kept; a fault while it is set RUNNING ends it as any other.
        """
        attached = os.environ.get("MLFLOW_RUN_ID") if attach else None
        continued = reopen or attached
        tags = {KIND: kind, **(tags or {})}
        if continued:
            run = LiveRun(continued, self.client)
        else:
            run = self.start(experiment_id or self.experiment(), name, tags, parent)
        with ending(run):  # set RUNNING again inside the lifecycle: a fault there ends it too
            if continued:
                self.reopen(continued)
            if attached:
                run.tags({**tags, "mlflow.runName": name, VERSION: source_tags()[VERSION]})
            yield run

    def runs_url(self, base: str, experiment_id: str, run_id: str | None = None) -> str:
        """The UI's runs table of an experiment (or one run's page), in the Model training view."""
        return ui_link(base, experiment_id, run_id)

    def start(
        self,
        experiment_id: str,
        name: str,
        tags: Mapping[str, Value] | None = None,
        parent: LiveRun | str | None = None,
    ) -> LiveRun:
        """Open a run (nested under ``parent``, a run or a run id, when given) without touching MLflow's
        active run; it carries the source tags (entry point, cctk version, git commit)."""
        tags = {**source_tags(), **{k: _text(v) for k, v in (tags or {}).items()}}  # the caller's win
        tags["mlflow.runName"] = name
        if parent is not None:
            tags["mlflow.parentRunId"] = parent if isinstance(parent, str) else parent.run_id
        created = self.client.create_run(experiment_id, tags=tags, run_name=name)
        return LiveRun(created.info.run_id, self.client)

    def search(self, experiment_ids: list[str], query: str) -> list[TrackedRun]:
        """Runs matching an MLflow search ``query`` (e.g. ``tags.`cctk.sweep` = 'ID'``), as plain values."""
        found = self.client.search_runs(experiment_ids, query, max_results=5000)
        return [
            TrackedRun(r.info.run_id, r.info.experiment_id, r.info.status, dict(r.data.params), dict(r.data.tags))
            for r in found
        ]

    def pipelines(self) -> list[TrackedRun]:
        """Every pipeline's parent run in the store, of any experiment, the newest first (creates nothing)."""
        ids = [e.experiment_id for e in self.client.search_experiments()]
        return self.search(ids, f"tags.`{KIND}` = 'pipeline'") if ids else []

    def reopen(self, run_id: str) -> LiveRun:
        """An existing run, set RUNNING again (attached by ``mlflow run``, or resumed)."""
        self.client.update_run(run_id, status="RUNNING")
        return LiveRun(run_id, self.client)

    def get(self, run_id: str) -> TrackedRun:
        """A run of this store, or a one-line error."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException as error:  # a refusal or an outage is a CctkError of its own, raised as it is
            if error.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                raise NoRun(f"no run {run_id!r} in the tracking store {self.uri}") from None
            first = " ".join(str(error).split())[:300]
            raise CctkError(f"the tracking store {self.uri} could not read run {run_id!r}: {first}") from None
        return TrackedRun(
            run.info.run_id, run.info.experiment_id, run.info.status, dict(run.data.params), dict(run.data.tags)
        )

    def permission(self, experiment_id: str) -> str | None:
        """What the user may do on an experiment (READ, EDIT, MANAGE, ...), as MLflow's basic-auth app resolves
        it for her own requests; None where the server has no such app (anyone may do anything)."""
        who = user()
        if who is None or not self.uri.startswith(ON_SERVER):
            return None
        try:
            return _auth_client(self.uri).get_user_permission(who, "experiment", experiment_id).permission
        except Exception as error:
            if http_status(error) == 404:  # no basic-auth app: the route is not served
                return None
            line = self.client.translated(error, "get_experiment", (experiment_id,), {})
            if line is None:
                raise
            raise line from None

    def pipeline(self, run_id: str) -> TrackedRun:
        """The parent run of a cctk pipeline, or a one-line error."""
        run = self.get(run_id)
        require_pipeline(run)
        return run

    def metrics(self, run_id: str, names: Collection[str] | None = None) -> dict[str, float]:
        """The latest value of each metric of a run (only ``names``, when given)."""
        found = self.client.get_run(run_id).data.metrics
        return {k: v for k, v in found.items() if names is None or k in names}

    def children(self, parent: TrackedRun) -> list[TrackedRun]:
        found = self.client.search_runs([parent.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.run_id}'")
        return [
            TrackedRun(r.info.run_id, r.info.experiment_id, r.info.status, dict(r.data.params), dict(r.data.tags))
            for r in found
        ]

    def finished_children(self, parent: TrackedRun) -> dict[str, str]:
        """``cctk.key`` -> run id of every FINISHED child; RUNNING ones (a killed process) become KILLED."""
        finished = {}
        for child in self.children(parent):
            if child.status == "RUNNING":
                self.client.set_tag(child.run_id, ENDED, "its process was gone when the pipeline was resumed")
                self.client.set_terminated(child.run_id, "KILLED")
            elif child.status == "FINISHED" and KEY in child.tags:
                finished[child.tags[KEY]] = child.run_id
        return finished

    def artifact_location(self, experiment_id: str) -> str:
        """Where an experiment's runs keep their artifacts (``mlflow-artifacts:/...`` when the server proxies
        them)."""
        return self.client.get_experiment(experiment_id).artifact_location

    def fetch(self, run_id: str, artifact: str, path: Path) -> bool:
        """One artifact file of a run, to ``path``; False where the run has no such file."""
        import tempfile

        from mlflow.exceptions import MlflowException

        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
            try:
                got = Path(self.client.download_artifacts(run_id, artifact, scratch))
            except (MlflowException, OSError):
                return False
            got.replace(path)  # whole or not at all
        return True

    def download(self, run_id: str, folder: Path, skip_suffix: str = ".zip") -> None:
        """Every top-level artifact of ``run_id`` (but those ending in ``skip_suffix``) into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        for item in self.client.list_artifacts(run_id):
            if not item.path.endswith(skip_suffix):
                self.client.download_artifacts(run_id, item.path, str(folder))


@lru_cache(maxsize=1)
def source_tags() -> dict[str, str]:
    """Which code made a run: cctk (callers name the command), its version and, in a git clone, the commit
    and whether the tree had changes (``cctk.git.dirty``); ``cctk.git.state`` always (``none`` outside one)."""
    from .. import __version__
    from ..core.provenance import git_state, git_words

    tags = {"mlflow.source.name": "cctk", "mlflow.source.type": "LOCAL", VERSION: __version__}
    git = git_state()
    tags[GIT_STATE] = git_words(git)  # "none" where no repository holds the code: said, not left out
    if git:
        tags.update({"mlflow.source.git.commit": git.commit, GIT_DIRTY: str(git.dirty).lower()})
    return tags


def connect(tracking: str | None = None, create: bool = True, writes: bool | None = None) -> Store:
    """The store runs go to (checked reachable), through a client of its own. ``create=False`` (a read:
    ``results.load``, ``cctk report``, ``cctk compare``): a store that is not there fails (``NoStore``)
    rather than being created empty. On a server, the user is checked known and, where the command
    ``writes`` (by default, where it may ``create``), allowed to write to the experiment (``check_access``)."""
    config = resolve(tracking)
    if not create:
        why = missing_store(config)
        if why:
            raise NoStore(f"{why}; {HOW_TO_POINT}")
    check_reachable(config)
    store = Store(config)
    check_access(store, create if writes is None else writes)
    return store


def nested_runs_hint(run_id: str) -> str:
    """How to see a parent's nested runs in the MLflow UI (its runs table folds them under the parent)."""
    return (
        "Its models are nested runs, folded under it in the runs table: the + beside its name (Expand child "
        f"runs) lists them, as does the search tags.mlflow.parentRunId = '{run_id}'; drag the Run Name "
        "column wider to read long names whole"
    )


def run_link(store: Store, experiment_id: str, run_id: str) -> str:
    """Where to see a run: its page in the UI of its server (the Model training view), or the command that
    opens the UI on an embedded store at it."""
    if store.uri.startswith(ON_SERVER):
        return f"MLflow UI: {store.runs_url(store.uri, experiment_id, run_id)}"
    name = store.config.name
    where = "" if name in (DEFAULT_CONFIG, "MLFLOW_TRACKING_URI") else f" --tracking {name}"
    return f"MLflow UI: cctk ui {run_id}{where}"


def provenance_tags(flat: dict[str, str], packages: dict[str, str | None]) -> dict[str, str]:
    """A run's provenance as tags: ``cctk.model.sha256``, ``cctk.git.commit``, ``cctk.reproduce``, ... (the
    record's ``flat`` names under ``cctk.``) and ``cctk.package.<name>`` for each package's version."""
    return {
        **{f"cctk.{k}": v for k, v in flat.items()},
        **{PACKAGE + name: version or "not installed" for name, version in packages.items()},
    }


def _text(value: Value) -> str:
    return value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)


def require_pipeline(run: TrackedRun) -> None:
    """A one-line error unless ``run`` is the parent run of a cctk pipeline."""
    kind = run.tags.get(KIND)
    if kind != "pipeline":
        raise CctkError(
            f"MLflow run {run.run_id} is not a cctk pipeline run (tag {KIND} is {kind!r}); "
            "give the parent run of a `cctk run`"
        )


# -- a shared server: its accounts (MLflow's basic-auth app) and its state -----------------------------------


@dataclass(frozen=True)
class Account:
    """A user of a server with MLflow's basic-auth app, and her grants: (experiment name, permission)."""

    name: str
    admin: bool
    grants: tuple[tuple[str, str], ...] = ()


Rows = list[dict[str, str]]  # the basic-auth app's grants of a user, as it lists them (a method is named list)


@dataclass(frozen=True)
class Grant:
    """A grant made: the experiment's id, and the other users granted on it (user, permission)."""

    experiment_id: str
    others: tuple[tuple[str, str], ...] = ()


class Accounts:
    """The users of a server and their permissions on experiments, through MLflow's own client of its
    basic-auth app (``AuthServiceClient``), as the admin ``MLFLOW_TRACKING_USERNAME`` names. Only what
    that client lacks (listing users and their grants) calls the app's routes directly."""

    def __init__(self, store: Store):
        if not store.uri.startswith(ON_SERVER):
            raise CctkError(
                f"{store.uri} is no tracking server: users are a server's (cctk server, with [server.auth])"
            )
        self.store, self._auth = store, _auth_client(store.uri)

    def add(self, name: str, password: str) -> None:
        self._call(lambda: self._auth.create_user(name, password), f"add user {name!r}")

    def remove(self, name: str) -> None:
        """Delete user ``name`` (her grants go with her; the runs she wrote stay)."""
        self._call(lambda: self._auth.delete_user(name), f"remove user {name!r}")

    def password(self, name: str, password: str) -> None:
        """Set ``name``'s password: the admin sets anyone's; a user changing her own gives her current one,
        which the app asks for (her login's)."""
        account = login()
        current = account.password if name == account.user else None
        self._call(
            lambda: self._auth.update_user_password(name, password, current_password=current),
            f"set the password of user {name!r}",
        )

    def grant(self, name: str, experiment: str, permission: str, shared: bool = False) -> Grant:
        """Give ``name`` ``permission`` on ``experiment`` (created, as the admin's, if it is new). An experiment
        another user holds MANAGE on (she made it: MLflow gives its creator MANAGE) is refused unless ``shared``
        says so: that user could delete the runs written there and grant others, which a grant of EDIT would hide."""
        found = self.store.client.get_experiment_by_name(experiment)
        others = () if found is None else tuple(h for h in self.holders(found.experiment_id) if h[0] != name)
        owners = [who for who, level in others if level == "MANAGE"]
        if owners and not shared:
            raise CctkError(
                f"experiment {experiment!r} on {self.store.uri} exists and user {owners[0]!r} holds MANAGE on it "
                f"(made it, or was granted it), so could delete {name!r}'s runs there and grant others. Pick another "
                f"name, revoke that grant first (cctk server users revoke {owners[0]} {experiment}), or share it "
                "as it is (--shared)"
            )
        experiment_id = self.store.experiment(experiment)
        self._call(
            lambda: self._auth.grant_user_permission(name, "experiment", experiment_id, permission),
            f"grant {permission} on experiment {experiment!r} to {name!r}",
        )
        return Grant(experiment_id, others)

    def revoke(self, name: str, experiment: str) -> str:
        """Take ``name``'s grant on ``experiment`` away (the default permission holds there again); its id."""
        found = self.store.client.get_experiment_by_name(experiment)
        if found is None:
            raise CctkError(f"there is no experiment {experiment!r} on {self.store.uri}")
        self._call(
            lambda: self._auth.revoke_user_permission(name, "experiment", found.experiment_id),
            f"revoke the grant of {name!r} on experiment {experiment!r}",
        )
        return str(found.experiment_id)

    def holders(self, experiment_id: str) -> tuple[tuple[str, str], ...]:
        """(user, permission) of every user but the admins granted on an experiment (its creator: MANAGE)."""
        from mlflow.server.auth.routes import LIST_USER_PERMISSIONS, LIST_USERS  # imported by _auth_client

        users: list[dict[str, Any]] = self._call(lambda: self._get(LIST_USERS, {})["users"], "list users")
        found = []
        for name in sorted(u["username"] for u in users if not u["is_admin"]):
            rows = self._rows(LIST_USER_PERMISSIONS, name)
            found += [(name, r["permission"]) for r in rows if r["resource_pattern"] == str(experiment_id)]
        return tuple(found)

    def list(self) -> list[Account]:
        from mlflow.server.auth.routes import LIST_USER_PERMISSIONS, LIST_USERS  # imported by _auth_client

        users: list[dict[str, Any]] = self._call(lambda: self._get(LIST_USERS, {})["users"], "list users")
        return [
            Account(u["username"], bool(u["is_admin"]), self._grants(LIST_USER_PERMISSIONS, u["username"]))
            for u in sorted(users, key=lambda u: u["username"])
        ]

    def _grants(self, route: str, name: str) -> tuple[tuple[str, str], ...]:
        rows = self._rows(route, name)
        names: dict[str, str] = {}  # experiment id (or "*") -> its name
        for row in rows:
            if row["resource_pattern"] not in names:
                pattern = row["resource_pattern"]
                names[pattern] = "*" if pattern == "*" else self.store.client.get_experiment(pattern).name
        return tuple(sorted((names[r["resource_pattern"]], r["permission"]) for r in rows))

    def _rows(self, route: str, name: str) -> Rows:
        """The grants of user ``name`` on experiments, as the app lists them (resource_pattern, permission)."""
        rows: Rows = self._call(lambda: self._get(route, {"username": name})["permissions"], "list the users' grants")
        return [row for row in rows if row["resource_type"] == "experiment"]

    def _get(self, route: str, params: dict[str, str]) -> dict[str, Any]:
        from mlflow.utils.credentials import get_default_host_creds
        from mlflow.utils.rest_utils import http_request, verify_rest_response

        reply = http_request(get_default_host_creds(self.store.uri), route, "GET", params=params)
        found: dict[str, Any] = verify_rest_response(reply, route).json()  # the app's JSON object
        return found

    def _call(self, call: Callable[[], T], what: str) -> T:
        """``call()``; a refusal or an error is one line naming what was asked."""
        try:
            return call()
        except Exception as error:
            status = http_status(error)
            if status == 403:
                line: CctkError | None = Refused(
                    f"user {user()!r} may not {what} on {self.store.uri} (403): only its admin may"
                )
            elif status is not None and status != 401:
                line = CctkError(f"cannot {what} on {self.store.uri}: {_message(error)}")
            else:  # a refused login, no answer, or no error of the server's
                line = self.store.client.translated(error, "get_experiment", (), {})
            if line is None:
                raise
            raise line from None


def _auth_client(uri: str) -> AuthServiceClient:
    """MLflow's client of the basic-auth app at ``uri``."""
    with warnings.catch_warnings():  # the server's modules, imported for their routes, warn of their own
        warnings.simplefilter("ignore")  # deprecations (starlette's WSGI middleware): not a user's concern
        from mlflow.server.auth.client import AuthServiceClient

    return AuthServiceClient(uri)


def _message(error: BaseException) -> str:
    """MLflow's own words of a refused request, one line."""
    text = getattr(error, "message", None) or str(error)
    return " ".join(str(text).split())[:300]


@dataclass(frozen=True)
class ServerState:
    """What ``cctk server status`` prints: whether the server answers, whether it asks who one is, whether it
    serves Prometheus metrics (and to whom), and its runs by status, of the experiments the user may read."""

    url: str
    answers: bool
    seconds: float | None = None
    auth: bool | None = None
    metrics: str | None = None  # "on", "on (its admin reads them)", "off"
    experiments: int = 0
    runs: dict[str, int] | None = None


def server_state(uri: str) -> ServerState:
    """The state of the server at ``uri`` (see ``ServerState``), asked as the user the environment names."""
    started = time.monotonic()
    try:
        check_reachable(TrackingConfig("status", uri), timeout=5)
    except CctkError:
        return ServerState(uri, False)
    seconds = time.monotonic() - started
    auth = _answer(uri + "/api/2.0/mlflow/experiments/search?max_results=1", signed=False) == 401
    metrics = {200: "on", 401: "on (its admin reads them)", 403: "on (its admin reads them)"}.get(
        _answer(uri + "/metrics", signed=True) or 0, "off"
    )
    store = Store(TrackingConfig("status", uri))
    ids = [e.experiment_id for e in store.client.search_experiments(max_results=1000)]
    runs = {
        status: len(store.client.search_runs(ids, f"attributes.status = '{status}'", max_results=50000)) if ids else 0
        for status in ("RUNNING", *STATUSES)
    }
    return ServerState(uri, True, seconds, auth, metrics, len(ids), runs)


def _answer(url: str, signed: bool) -> int | None:
    """The HTTP status ``url`` answers with, anonymously or ``signed`` with this process's login."""
    import base64

    request = urllib.request.Request(url)
    account = login() if signed else None
    if account is not None and account.user and account.password:
        token = base64.b64encode(f"{account.user}:{account.password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            status: int = reply.status  # an HTTPResponse's (typeshed leaves urlopen's reply untyped)
            return status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None
