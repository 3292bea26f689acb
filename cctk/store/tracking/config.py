"""Where runs go, and who writes them: a tracking configuration (``TrackingConfig``), its checks before any
work (a missing store, a server that does not answer, a database that refuses the connection, a retry budget
MLflow would refuse), ``redact`` and the login (``login``). Imports no MLflow at load.

Where runs go: ``MLFLOW_TRACKING_URI`` when set; else ``--tracking NAME|URI``, a NAME being a file
``mlruns_config/NAME.toml`` of the working folder or, failing that, the shipped one (the repository's
top-level ``mlruns_config/``, inside the wheel as ``cctk/store/mlruns_config/``); else the embedded default
(SQLite store and artifacts under ./mlruns/). A SQLite store named by its URI keeps the artifacts of the
experiments cctk creates in it beside its database (``beside_database``)."""

from __future__ import annotations

import json
import os
import re
import tomllib
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, TypeVar

from ...core.errors import CctkError, one_line
from ...core.redaction import has_password as has_password, raw_at_in_password, redact as redact

EXPERIMENT = "cctk"
DEFAULT_CONFIG = "embedded"
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
# checkout (this file is cctk/store/tracking/config.py of it)
CHECKOUT_CONFIGS = Path(__file__).resolve().parents[3] / "mlruns_config"


def shipped_configs() -> Traversable:
    """The configurations that come with cctk: the package's own (``cctk/store/mlruns_config/``, where the
    build puts the repository's top-level ``mlruns_config/``, so a wheel installed anywhere has them), or,
    in a checkout, which holds no copy, that top-level folder itself."""
    packaged = resources.files("cctk.store") / "mlruns_config"
    return packaged if packaged.is_dir() else CHECKOUT_CONFIGS


def config_folders() -> list[Traversable]:
    """Where a configuration NAME is looked up, the first holding ``NAME.toml`` winning: ``mlruns_config/``
    of the working folder (a researcher's own or changed configurations), then the shipped ones (once,
    where the working folder is the checkout's top)."""
    here, shipped = Path.cwd() / "mlruns_config", shipped_configs()
    return ([here] if here.is_dir() and here.resolve() != shipped else []) + [shipped]


def config_names() -> list[str]:
    files = (entry.name for folder in config_folders() for entry in folder.iterdir())
    return sorted({name.removesuffix(".toml") for name in files if name.endswith(".toml")})


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
        raise CctkError(f"{where} {key} = {_shown(value)} is not {_KINDS.get(kind, kind.__name__)}")
    return value


def config_names_list(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    """A list of strings (``allowed_hosts = ["a", "b"]``): one string alone is refused, not split into letters."""
    value = config_value(table, key, list, where, [])
    if not all(isinstance(item, str) for item in value):
        raise CctkError(f"{where} {key} = {_shown(value)} is not a list of strings")
    return tuple(value)


def _shown(value: Any) -> str:
    """A value as TOML writes it (strings quoted, ``true``), for a line that refuses it: every string in it
    redacted (a URI given as a list still holds its password)."""
    if isinstance(value, str):
        value = redact(value)
    elif isinstance(value, list):
        value = [redact(v) if isinstance(v, str) else v for v in value]
    elif isinstance(value, dict):
        value = {k: redact(v) if isinstance(v, str) else v for k, v in value.items()}
    return json.dumps(value, ensure_ascii=False, default=str)


def resolve(tracking: str | None = None) -> TrackingConfig:
    """The store runs go to (the order: the module docstring), its URI and artifact folder made absolute: a
    run records where it is, wherever it is read from later."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        uri = absolute_uri(_no_server_password(_known_store(env)))
        return TrackingConfig("MLFLOW_TRACKING_URI", uri, beside_database(uri))
    tracking = tracking or DEFAULT_CONFIG
    if "://" in tracking or tracking.startswith(("sqlite:", "file:")):
        uri = absolute_uri(_no_server_password(_known_store(tracking)))
        return TrackingConfig(redact(tracking), uri, beside_database(uri))
    raw, where = read_config(tracking), f"{config_file(tracking)}:"
    artifacts = config_value(raw, "artifact_location", str, where, "")
    uri = _known_store(config_value(raw, "tracking_uri", str, where))
    return TrackingConfig(
        tracking, absolute_uri(_no_server_password(uri)), str(Path(artifacts).absolute()) if artifacts else None
    )


# The tracking URIs MLflow opens as a store: a database (SQLAlchemy's dialects) or a server.
STORE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks")


def _known_store(uri: str) -> str:
    """``uri`` where MLflow opens it as a store; else one line, before any work (MLflow's own refusal of a
    filesystem store is a sixty-line traceback, an unknown scheme a KeyError)."""
    scheme = uri.partition(":")[0].partition("+")[0].lower()
    if ":" not in uri or re.match(r"[A-Za-z]:[\\/]", uri):  # a path (./mlruns, C:\runs): MLflow's file store too
        scheme = "file"
    if scheme == "file" and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("true", "1"):
        raise CctkError(
            f"the tracking URI {redact(uri)} is MLflow's filesystem store, which MLflow keeps in maintenance mode "
            "and refuses (unless MLFLOW_ALLOW_FILE_STORE=true): give a database, e.g. sqlite:///PATH/mlflow.db "
            "(mlflow migrate-filestore moves a folder's runs there)"
        )
    if scheme not in (*STORE_SCHEMES, "file"):
        raise CctkError(
            f"the tracking URI {redact(uri)} is no store MLflow opens: give a database (sqlite:///PATH/mlflow.db, "
            "postgresql://..., mysql://...), a server (http://HOST:PORT) or a name of mlruns_config/"
        )
    if scheme == "sqlite":
        _sqlite_file(uri)
    if scheme in ("postgresql", "mysql", "mssql"):  # read as its client will read it (a port not a number was a
        from sqlalchemy.engine import make_url  # traceback at the first connection); SQLAlchemy's words quote
        from sqlalchemy.exc import ArgumentError  # the URL, password and all: not shown

        try:
            make_url(uri)
        except (ArgumentError, ValueError):
            raise CctkError(
                f"the tracking URI {redact(uri)} is no database URL SQLAlchemy reads: "
                "dialect+driver://USER:PASSWORD@HOST:PORT/DATABASE, the port a number"
            ) from None
    return uri


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
    """``uri`` as it is, unless it is a tracking server's and carries an account or a secret
    (``http://alice:secret@host``, ``https://TOKEN@host``, ``?password=``): MLflow's client takes the account from
    the environment (or ~/.mlflow/credentials), and a sweep hands the URI to every worker. A database's URI may
    hold its password: its client needs it, and cctk shows it only redacted; one with a raw @ in it is refused,
    as its driver would read the password's tail as the host and print it."""
    if uri.startswith(ON_SERVER) and has_password(uri):  # a user alone on the web is a token: redact masks it
        raise CctkError(
            f"the tracking URI {redact(uri)} carries an account or a secret: give the server's address alone and the "
            "account in MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (MLflow's client reads them)"
        )
    if raw_at_in_password(uri):
        raise CctkError(
            f"the tracking URI {redact(uri)} has an @ in its password as it is: write it percent-encoded (%40), or "
            "its driver reads the password to that @ and the rest as the host"
        )
    return uri


def absolute_uri(uri: str) -> str:
    """``uri`` with a relative SQLite or ``file:`` path taken from the working folder."""
    path = sqlite_path(uri)
    if path is not None and str(path) != ":memory:":
        query = uri.partition("?")[2]
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


class Unreachable(CctkError):
    """The tracking server stopped answering (503s, refused or dropped connections) past MLflow's retries.
    ``left_running``: the runs that could not be ended there, so show RUNNING until resumed; ``leaving``: what
    was ending them (a ``KeyboardInterrupt`` when the command was stopped), where the outage came as they
    ended; ``then``: what ends them once the server answers (``after_outage``: the outermost run's resume)."""

    def __init__(
        self, why: str, left_running: tuple[str, ...] = (), leaving: BaseException | None = None, then: str = ""
    ):
        self.why, self.left_running, self.leaving = why, left_running, leaving
        then = then or "resume once the server answers (cctk run --resume RUN_ID for a pipeline)"
        several = len(left_running) > 1
        tail = (
            f"; run{'s' if several else ''} {', '.join(left_running)} could not be ended there and "
            f"stay{'' if several else 's'} RUNNING: {then}"
            if left_running
            else ""
        )
        super().__init__(why + tail)


class Locked(CctkError):
    """A SQLite store another process held locked longer than the wait for it (its URI's ``timeout``): sound,
    busy. A write refused so may be taken a moment later (``LiveRun.end`` tries it again)."""


def locked(path: Path, doing: str) -> Locked:
    """The line of a store at ``path`` that stayed locked (SQLite's "database is locked") while cctk was
    ``doing``."""
    return Locked(
        f"the tracking store {path} stayed locked by another process longer than the wait for it {doing}; try "
        "again once that process is done, or wait longer with ?timeout=SECONDS on its URI"
    )


def is_locked(error: BaseException) -> bool:
    """SQLite's "database is locked", however sqlalchemy and MLflow wrapped it."""
    return "database is locked" in str(error)


class NotEnded(CctkError):
    """The store refused to end run ``run_id`` ``status`` (both tries of ``LiveRun.end``; ``refused``: what it
    said), so the run shows RUNNING. ``leaving``: what ended the run's block (a ``KeyboardInterrupt`` when the
    command was stopped, an error when it failed, None when it finished). ``until``: what ends it later, in a few
    words (``resume_words``). ``inner``: a nested run's ``NotEnded`` that ended this run's block, its line first."""

    def __init__(
        self,
        run_id: str,
        status: str,
        refused: Exception,
        leaving: BaseException | None,
        until: str = "",
        inner: NotEnded | None = None,
    ):
        self.run_id, self.status, self.refused, self.leaving, self.inner = run_id, status, refused, leaving, inner
        self.until = until = until or resume_words("", run_id, status)
        line = (
            f"run {run_id} could not be ended {status}: the store refused the write twice ({one_line(refused)}); it "
            f"shows RUNNING until {until} or the store takes the write"
        )
        super().__init__(line if inner is None else f"{inner}; {line}")


def resume_command(kind: str, run_id: str, parent: str | None = None) -> str | None:
    """The command that ends a run of ``kind`` (``cctk.kind``) left RUNNING: a pipeline's or a sweep's own
    resume; a model's nested run, its pipeline's (which ends it KILLED); None for any other run."""
    if kind == "model" and parent is not None:
        return f"cctk run --resume {parent}"
    if kind in ("pipeline", "sweep"):
        return f"cctk {'run' if kind == 'pipeline' else 'sweep'} --resume {run_id}"
    return None


def resume_words(kind: str, run_id: str, status: str, parent: str | None = None) -> str:
    """What ends a run of ``kind`` that the store would not end ``status``, after "until" (``NotEnded``)."""
    command = resume_command(kind, run_id, parent)
    if command is None:
        return f"it is ended by hand ({_by_hand(run_id, status)})"
    if kind == "model":
        return f"its pipeline is resumed ({command}, which ends it KILLED)"
    return f"it is resumed ({command})"


def after_outage(kind: str, run_id: str, parent: str | None = None) -> str:
    """What ends the runs a server's outage left RUNNING, ``run_id`` (of ``kind``) the outermost, once it answers
    again (``Unreachable``); the generic words where the kind is not known."""
    command = resume_command(kind, run_id, parent)
    if command is not None:
        return f"resume once the server answers ({command})"
    if kind:
        return f"end it by hand once the server answers ({_by_hand(run_id, 'FAILED')})"
    return ""


def _by_hand(run_id: str, status: str) -> str:
    """The MLflow call that ends run ``run_id`` ``status`` where no cctk command does."""
    return f"mlflow.MlflowClient().set_terminated({run_id!r}, {status!r})"


def missing_store(config: TrackingConfig) -> str | None:
    """Why ``config``'s store cannot be read without creating it (None when it can): a SQLite file that is
    not there, or a server that does not answer."""
    path = sqlite_path(config.tracking_uri)
    if path is not None:
        if path.is_file():
            return None
        beside = mlflow_default_here(config)
        return f"there is no MLflow store at {path}" + (f" ({beside})" if beside else "")
    try:
        check_reachable(config)
    except CctkError as error:
        return str(error)
    return None


MLFLOW_DEFAULT = "mlflow.db"  # MLflow's own default store in the working folder (MLflow 3): where `mlflow run` logs


def mlflow_default_here(config: TrackingConfig) -> str | None:
    """Where ``config`` is cctk's default store and the working folder holds MLflow's own default one too (a
    command of MLflow's, ``mlflow run`` among them, logged there without MLFLOW_TRACKING_URI): which store that
    is and the option that reads it; None otherwise."""
    if config.name != DEFAULT_CONFIG or not Path(MLFLOW_DEFAULT).is_file():
        return None
    return (
        f"./{MLFLOW_DEFAULT} here is MLflow's own default store, which `mlflow run` logs to without "
        f"MLFLOW_TRACKING_URI: --tracking sqlite:///{MLFLOW_DEFAULT} reads it"
    )


def check_reachable(config: TrackingConfig, timeout: float = 5.0) -> None:
    """A server that does not answer, or a database that refuses the connection, fails here in one line,
    before any model is loaded (MLflow's client would retry a database for a minute, then a traceback)."""
    if is_database(config.tracking_uri):
        problem = database_problem(config.tracking_uri)
        if problem:
            raise CctkError(f"cannot reach the tracking store {config.shown}: {problem}")
        return
    if not config.tracking_uri.startswith(ON_SERVER):
        return
    url = config.tracking_uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            if reply.status == 200:
                return
    except OSError:
        pass
    raise CctkError(
        f"cannot reach the MLflow tracking server at {config.shown} "
        f"(start it with `cctk server`, or pick another --tracking)"
    )


def is_database(uri: str) -> bool:
    """Whether ``uri`` is a database server's that MLflow opens through SQLAlchemy (PostgreSQL, MySQL, SQL
    Server); SQLite's is a file."""
    from mlflow.store.db.db_types import DATABASE_ENGINES, SQLITE

    dialect = uri.split(":", 1)[0].split("+", 1)[0]
    return "://" in uri and dialect in DATABASE_ENGINES and dialect != SQLITE


# SQLAlchemy's database drivers by module, and the package that installs each
DRIVERS = {
    "psycopg2": "psycopg2-binary",
    "psycopg": "'psycopg[binary]'",
    "MySQLdb": "mysqlclient",
    "pymysql": "PyMySQL",
    "pyodbc": "pyodbc",
    "pymssql": "pymssql",
}


def database_problem(uri: str) -> str | None:
    """Why a database refuses a connection (its driver's words, one line, no password), or None."""
    import sqlalchemy

    timeout = {"connect_timeout": 10} if uri.startswith(("postgresql", "mysql")) else {}  # not the TCP timeout
    try:
        engine = sqlalchemy.create_engine(uri, connect_args=timeout, poolclass=sqlalchemy.pool.NullPool)
    except ImportError as error:  # the database's Python driver is not installed: say which and how
        package = DRIVERS.get(error.name or "", f"the package that provides {error.name or 'the driver'}")
        return f"its driver is not installed ({error}): pip install {package} into this environment"
    except sqlalchemy.exc.ArgumentError as error:  # a malformed URI
        return database_error(error)
    try:
        with engine.connect():
            return None
    except sqlalchemy.exc.SQLAlchemyError as error:
        return database_error(error)
    finally:
        engine.dispose()


def database_error(error: BaseException) -> str:
    """A database error in one line: the driver's words (SQLAlchemy wraps them with its SQL and a link, MLflow
    with its own exception), no password."""
    cause = getattr(error, "orig", None) or error
    text = str(cause).split("[SQL:")[0].split("(Background on this error at:")[0]
    return redact(" ".join(text.split()))[:300]


# The drivers' words for a database that does not answer (PostgreSQL's psycopg2, MySQL's clients)
_LOST = (
    "connection refused",
    "could not connect",
    "connection to server",
    "server closed the connection",
    "terminating connection",
    "connection already closed",
    "can't connect to mysql",
    "lost connection to mysql",
    "mysql server has gone away",
)


def lost_database(error: BaseException) -> bool:
    """Whether ``error`` (however SQLAlchemy and MLflow wrapped it) says the database stopped answering."""
    text = str(error).lower()
    return "operationalerror" in text and any(words in text for words in _LOST)


CREDENTIALS = "~/.mlflow/credentials"  # MLflow's own file of a login (its [mlflow] section)


@dataclass(frozen=True)
class Login:
    """Who this process is to a tracking server, her password, and where the password was found (the line of
    a refused login names it)."""

    user: str | None
    password: str | None = field(repr=False)  # never in a line, a log or a traceback's locals
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
        raise CctkError(
            f"{Path(CREDENTIALS).expanduser()}: MLflow cannot read it as its credentials file ({_unread(error)}); it "
            "holds a section [mlflow] with mlflow_tracking_username = ... and mlflow_tracking_password = ..."
        ) from None
    from_env = os.environ.get("MLFLOW_TRACKING_PASSWORD")
    source = "MLFLOW_TRACKING_PASSWORD" if from_env else CREDENTIALS if found.password else "no password"
    return Login(found.username or None, found.password or None, source)


def _unread(error: Exception) -> str:
    """Why a credentials file could not be read, by its line's number only: configparser's own words quote the
    line, which may hold the password."""
    import configparser

    if isinstance(error, configparser.MissingSectionHeaderError):
        return f"line {error.lineno} comes before any section header"
    if isinstance(error, configparser.ParsingError):
        return f"line {', '.join(str(n) for n, _ in error.errors)} is not name = value"
    if isinstance(error, configparser.DuplicateOptionError):
        return f"line {error.lineno} repeats a name"
    if isinstance(error, configparser.DuplicateSectionError):
        return f"line {error.lineno} repeats a section"
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8 text"
    return type(error).__name__


def user() -> str | None:
    """Who this process is to a tracking server, as MLflow's client says it (``login``)."""
    return login().user


def experiment_name() -> str:
    """The experiment runs go to: MLflow's own ``MLFLOW_EXPERIMENT_NAME`` where set (a researcher's own on a
    shared server), else ``cctk`` (unless ``experiment_id`` names one)."""
    return os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT


def experiment_id() -> str | None:
    """MLflow's own ``MLFLOW_EXPERIMENT_ID`` where ``MLFLOW_EXPERIMENT_NAME`` is unset (MLflow reads the name
    first): the experiment runs go to, by its id. ``mlflow run`` sets it for its command: the experiment of the
    run it created, which the runs nested under that run share."""
    return None if os.environ.get("MLFLOW_EXPERIMENT_NAME") else os.environ.get("MLFLOW_EXPERIMENT_ID") or None


EXPERIMENT_VARIABLES = ("MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID")  # MLflow's, in the order it reads them


def experiment_variables() -> dict[str, str]:
    """MLflow's variables of the experiment runs go to, as this process has them set (for processes on other
    machines: a Ray cluster's workers)."""
    return {name: os.environ[name] for name in EXPERIMENT_VARIABLES if os.environ.get(name)}


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


# seconds a SQLite writer waits for another's lock (MLflow's sessions wait 20 s, too short under load)
BUSY_TIMEOUT = 120


def waiting(uri: str) -> str:
    """``uri`` as a client connects to it: a SQLite store's writer waits up to ``BUSY_TIMEOUT`` s for another's
    lock (a sweep's cells, the system metrics' thread, a second ``cctk run``) before it fails, unless the URI
    sets its own ``timeout``. Any other URI as it is."""
    if uri.startswith("sqlite:") and "timeout=" not in uri:
        return uri + ("&" if "?" in uri else "?") + f"timeout={BUSY_TIMEOUT}"
    return uri


def _sqlite_file(uri: str) -> None:
    """A ``sqlite:`` URI that names a database file, else one line: a database in memory (SQLAlchemy's
    ``sqlite://``, ``sqlite:///:memory:``, a ``file:`` URI with ``mode=memory``), gone with the command and every
    run in it, or a URL SQLAlchemy does not read (``sqlite://mlflow.db``: a traceback at the first query)."""
    rest = uri.partition(":")[2]
    path, _, query = rest.removeprefix("///").partition("?")
    if rest in ("", "//") or (rest.startswith("///") and (path in ("", ":memory:") or "mode=memory" in query)):
        raise CctkError(
            f"the tracking URI {redact(uri)} is a SQLite database in memory, gone with the command and every run "
            "in it: give a file, e.g. sqlite:///PATH/mlflow.db"
        )
    if not rest.startswith("///"):
        raise CctkError(
            f"the tracking URI {redact(uri)} is no SQLite URL: give sqlite:///RELATIVE/PATH.db or "
            "sqlite:////ABSOLUTE/PATH.db (three slashes before the path)"
        )


def beside_database(uri: str) -> str | None:
    """The artifact folder of the experiments cctk creates in a SQLite store named by its URI: ``artifacts``
    beside the database file, as the embedded configuration keeps ``mlruns/artifacts`` beside
    ``mlruns/mlflow.db`` (MLflow's own default, ``./mlruns`` under the working folder of whichever command
    created the experiment, scatters one store's files over the folders it was run from); None for any other
    store (a server keeps its own, a remote database's clients share no folder)."""
    path = sqlite_path(uri)
    return str(path.parent / "artifacts") if path is not None else None


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (relative or absolute, query left out); None otherwise."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri.removeprefix("sqlite:///").split("?", 1)[0])
