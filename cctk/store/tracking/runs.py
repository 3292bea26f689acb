"""Runs in a store: the client (``Guarded``: a refusal or an outage one line, ``Refused``, ``Unreachable``), the
store (``Store``: experiments, runs opened and ended with a status that tells the truth, searches, artifacts), a
run logged to (``LiveRun``: the narrow logging interface) or read back (``TrackedRun``), and the names cctk gives
MLflow's fields (its tags)."""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shlex
import time
import warnings
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit
from urllib.request import url2pathname

from ...core.errors import CctkError, NoRun, stops_held
from ...core.records import ui_link

if TYPE_CHECKING:  # MLflow itself is imported on first use: the light layers never load it
    import pandas as pd
    from mlflow import MlflowClient
    from mlflow.entities import Experiment, Run
    from mlflow.server.auth.client import AuthServiceClient
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor
    from sqlalchemy.engine import Connection

    # ``Guarded`` hands out its client's attributes unchanged (only the errors of a call change): to mypy, it is
    # one, with MLflow's own signatures and records (Run, Experiment, ...); at run time it wraps one.
    _Client = MlflowClient
else:
    _Client = object
from .config import (
    CREDENTIALS,
    DEFAULT_CONFIG,
    HOW_TO_POINT,
    ON_SERVER,
    Locked,
    NoStore,
    NotEnded,
    TrackingConfig,
    Unreachable,
    after_outage,
    check_reachable,
    check_retry_budget,
    database_error,
    experiment_id,
    experiment_name,
    is_database,
    is_locked,
    locked,
    login,
    lost_database,
    missing_store,
    redact,
    resolve,
    resume_words,
    retry_budget,
    sqlite_path,
    user,
    waiting,
)

END_PAUSE = 1.0  # seconds before a run's refused status write is tried again (``LiveRun.end``)

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
# an `mlflow run` parent stopped by Ctrl-C or SIGTERM: cctk ends it KILLED, then MLflow's own command sets FAILED
STOPPED = "stopped by Ctrl-C or SIGTERM: cctk ended it KILLED, mlflow run then FAILED (a pipeline: cctk run --resume)"
TRAINED_AGAIN = "cctk.trained_again"  # a finished arm whose weights a resume trained again, and why
ATTEMPT = "cctk.attempt"  # a sweep cell's run: the attempt running it (2 and up: resumed after one was lost)
PACKAGE = "cctk.package."  # + a distribution's name: its version (a pipeline's parent run)
TRACKING_URI = "cctk.tracking_uri"  # the store's absolute URI, as the run recorded it
ARTIFACT_URI = "cctk.artifact_uri"  # the run's artifact location
PARAMS_FOLDER = "params"  # artifacts holding parameter values too long for MLflow's parameters
STATUSES = ("FINISHED", "FAILED", "KILLED")
PAGE = 5000  # runs a search reads a request; it reads pages until the store has no more
# A value a run logs as a parameter or a tag: MLflow keeps its text (``_text``)
Value = str | int | float | bool | None
# The MLflow UI opens an experiment of this kind on its runs table ("Model training"), not on GenAI traces.
EXPERIMENT_KIND = "custom_model_development"


class Refused(CctkError):
    """The tracking server refused a request: it does not know the user (401) or the user lacks a permission
    on the experiment (403). One line: who, which experiment, what is missing, who can grant it."""


# -- who may do what on a shared server: refusals and outages as one line ------------------------------------

# What a client call needs on the experiment it touches, in MLflow's basic-auth levels (READ < EDIT < MANAGE).
_READS = ("get_", "search_", "list_", "download_")
_MANAGES = ("delete_", "restore_")
_DOING = {"READ": "read", "EDIT": "write to", "MANAGE": "delete runs of"}
# The calls whose first argument is an experiment id (or a list of them); every other call's is a run id.
_BY_EXPERIMENT = {"create_run", "get_experiment", "set_experiment_tag", "delete_experiment", "search_runs"}


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
    """An MLflow client whose refusals, outages and locks past the wait are one line each (``Refused``,
    ``Unreachable``, ``Locked``); every other error goes on as MLflow raised it. Attributes (``tracking_uri``)
    are the client's."""

    def __init__(self, client: MlflowClient, uri: str):
        self._client, self._uri = client, uri
        self._sqlite = sqlite_path(uri)  # a SQLite store's file: a lock past the wait is one line too (``Locked``)
        self._database = self._sqlite is None and is_database(uri)  # PostgreSQL, MySQL: an outage is one line

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._client, name)
        if not callable(found) or not (self._sqlite or self._database or self._uri.startswith(ON_SERVER)):
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
        """``error`` as one line, or None where it is no refusal, outage or lock."""
        if self._sqlite is not None:
            return locked(self._sqlite, f"while cctk called {method}") if is_locked(error) else None
        if self._database:
            if not lost_database(error):
                return None
            return Unreachable(
                f"the tracking database at {self._uri} stopped answering while cctk called {method}: "
                f"{database_error(error)}"
            )
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
    of training). A server without MLflow's basic-auth app lets anyone write: nothing more is asked. On any store,
    a command that writes finds the experiment its runs go to deleted, or named by an id that names none, here
    (``Store.target``), not when it logs."""
    if not store.uri.startswith(ON_SERVER):
        if writes:
            store.target()
        return
    check_retry_budget()
    who = login().user  # first: a credentials file MLflow cannot read fails here in one line
    found = store.target()  # a login the server refuses: Refused, one line
    if not writes or found is None or who is None:
        return  # a new experiment is its creator's (MANAGE): any user may create one
    name, have = found.name, store.permission(found.experiment_id)
    if have is not None and have not in ("EDIT", "MANAGE"):
        raise Refused(
            f"user {who!r} has {have} on experiment {name!r} on {store.uri}: a run needs EDIT there; "
            f"the server's admin grants it (cctk server users grant {who} {name} EDIT), or write to an "
            f"experiment of your own (MLFLOW_EXPERIMENT_NAME={who})"
        )


def _left_running(run: LiveRun, gone: Unreachable, kind: str = "", parent: str | None = None) -> Unreachable:
    """``gone`` once ``run`` (of ``kind``, nested under run ``parent``) is ended FAILED, or KILLED where the
    command was being stopped (the server answers again), or naming ``run`` among the runs left RUNNING, with
    what ends them then. One try, no retries: MLflow's client already waited minutes for the call that failed."""
    with no_retries():
        try:
            if isinstance(gone.leaving, KeyboardInterrupt):
                run.end("KILLED")
            else:
                run.failed(gone)
            return gone
        except Unreachable:
            then = after_outage(kind, run.run_id, parent)
            return Unreachable(gone.why, (*gone.left_running, run.run_id), gone.leaving, then)


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


def elsewhere(key: str, text: str) -> str:
    """What parameter ``key`` holds where its value ``text`` is too long for MLflow: where the value is."""
    return f"{len(text):,} characters, whole in the artifact {PARAMS_FOLDER}/{key}.txt"


def is_elsewhere(key: str, value: str) -> bool:
    """Whether parameter ``key``'s logged ``value`` is ``elsewhere``'s: its value is in the artifact."""
    return (
        re.fullmatch(rf"[\d,]+ characters, whole in the artifact {PARAMS_FOLDER}/{re.escape(key)}\.txt", value)
        is not None
    )


def _tracked(run: Run) -> TrackedRun:
    return TrackedRun(
        run.info.run_id, run.info.experiment_id, run.info.status, dict(run.data.params), dict(run.data.tags)
    )


class LiveRun:
    """A run being logged to: a narrow logging interface over one MLflow run (params, metrics, tags, files).
    A run read back from the store is a ``TrackedRun``."""

    def __init__(self, run_id: str, client: MlflowClient):
        self.run_id = run_id
        self._client = client

    def params(self, values: Mapping[str, Value]) -> None:
        """Log ``values``; MLflow never changes a logged parameter, so where ``mlflow run`` already logged
        a key (an MLproject parameter as the user gave it, e.g. ``profile=auto``) and the value in force
        differs (``quick``), the value in force goes under ``<key>.resolved``. A value past MLflow's length limit
        (6,000 characters; MLflow would cut it, saying so in a log line: a compare of 200 runs' ids) goes whole
        into the artifact ``params/<key>.txt``, and the parameter says where."""
        from mlflow.entities import Param
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

        logged = self._client.get_run(self.run_id).data.params
        texts = {k: _text(v) for k, v in values.items()}
        for key, text in texts.items():
            if len(text) > MAX_PARAM_VAL_LENGTH:
                self._client.log_text(self.run_id, text, f"{PARAMS_FOLDER}/{key}.txt")
                texts[key] = elsewhere(key, text)
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
        log = self._client.log_artifacts if local_path.is_dir() else self._client.log_artifact
        log(self.run_id, str(local_path), artifact_path)

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
            warnings.filterwarnings("ignore", message=TWO_SOURCES)
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
        """End the run ``status``. The write is tried again once a second later where the store refused it
        (a database's lock or connection, not a refusal or an outage, which are one line each): a run left
        RUNNING when its command has ended would say what is not true."""
        try:
            self._client.set_terminated(self.run_id, status=status)
        except Exception as error:
            if _at_once(error):
                raise
            time.sleep(END_PAUSE)
            self._client.set_terminated(self.run_id, status=status)

    def failed(self, error: BaseException) -> None:
        """End the run FAILED, the error as one line in tag ``cctk.error``. A busy store that did not take the
        tag may take the status (``end`` tries it twice): the status is what must be true, the error's line is
        what the command says."""
        text = " ".join(f"{type(error).__name__}: {error}".split())[:4000]
        tagged = True
        try:
            self._client.set_tag(self.run_id, ERROR, text)
        except Exception as refused:
            if _at_once(refused):  # a refusal, an outage: one line, once the status has been tried
                self.end("FAILED")
                raise
            tagged = False  # a database's lock: the status still is written, then the tag once more
        self.end("FAILED")
        if not tagged:
            with suppress(Exception):
                self._client.set_tag(self.run_id, ERROR, text)


@contextmanager
def ending(run: LiveRun, kind: str = "", parent: str | None = None) -> Iterator[LiveRun]:
    """End ``run`` (of ``kind``, nested under run ``parent`` if given) as the block ends: FINISHED, KILLED
    (``KeyboardInterrupt``, SIGTERM) or FAILED (any other exception, recorded as tag ``cctk.error``); the
    exception goes on. A server that stopped answering (``Unreachable``) gets one quick try; where it fails, the
    run is named as left RUNNING (resumable). A nested run the store would not end (``NotEnded``) ends this one
    as the command is leaving (KILLED when stopped, else FAILED with what failed). ``Store.run`` opens every run
    inside it."""
    try:
        yield run
    except KeyboardInterrupt as stop:
        _end(run, "KILLED", stop, kind, parent)
        raise
    except Unreachable as gone:  # the server stopped answering: end it if it answers again, else say so
        raise _left_running(run, gone, kind, parent) from None
    except NotEnded as inner:  # a nested run left RUNNING: this one ends as the command leaves, its line first
        stopped = isinstance(inner.leaving, KeyboardInterrupt)
        cause = inner if inner.leaving is None else inner.leaving
        try:
            _end(run, "KILLED" if stopped else "FAILED", cause, kind, parent)
        except NotEnded as also:
            raise NotEnded(also.run_id, also.status, also.refused, inner.leaving, also.until, inner) from None
        raise
    except BaseException as error:
        _end(run, "FAILED", error, kind, parent)
        raise
    _end(run, "FINISHED", None, kind, parent)


def _end(run: LiveRun, status: str, leaving: BaseException | None, kind: str, parent: str | None) -> None:
    """End ``run`` ``status`` as ``leaving`` (None: the block finished) leaves its block; a store that refused
    the write twice is ``NotEnded``, one line naming the run left RUNNING and what ends it later (not the
    store's traceback), as is a server that stopped answering then (``Unreachable``, the run among those it left
    RUNNING)."""
    try:
        with stops_held():  # a Ctrl-C in the store's write would leave the run RUNNING: raised once it is written
            if status == "FAILED" and leaving is not None:
                run.failed(leaving)
            else:
                run.end(status)
    except Unreachable as gone:
        then = after_outage(kind, run.run_id, parent)
        raise Unreachable(gone.why, (*gone.left_running, run.run_id), leaving, then) from None
    except Exception as refused:
        if _at_once(refused):
            raise
        until = resume_words(kind, run.run_id, status, parent)
        raise NotEnded(run.run_id, status, refused, leaving, until) from refused


def _at_once(error: Exception) -> bool:
    """A refusal or an outage (a ``CctkError`` other than ``Locked``): one line at once, no second try; a busy
    store's error (a lock, a dropped database connection) may pass a moment later."""
    return isinstance(error, CctkError) and not isinstance(error, Locked)


def active_run() -> LiveRun | None:
    """The run MLflow holds active in this process (``mlflow.start_run()``, or a Hugging Face Trainer's
    ``MLflowCallback``), through a client on MLflow's current tracking URI that waits for a busy SQLite store
    and says a lock past the wait or an outage in one line, as every client of cctk does; None when there is
    none."""
    import mlflow
    from mlflow import MlflowClient

    found = mlflow.active_run()
    if found is None:
        return None
    _database_sessions()
    uri = mlflow.get_tracking_uri()  # a lock past the wait, an outage: one line, as on cctk's own runs
    return LiveRun(found.info.run_id, Guarded(MlflowClient(tracking_uri=waiting(uri)), redact(uri)))


def _duplicate_key(error: Exception) -> bool:
    """A store's unique-key violation (PostgreSQL, SQLite, MySQL), seen through MLflow's error text."""
    text = str(error).lower()
    return any(k in text for k in ("uniqueviolation", "unique constraint", "duplicate key", "duplicate entry"))


def _database_sessions() -> None:
    """MLflow's sessions on a database store as cctk needs them. MLflow begins every session on a SQLite store
    with ``PRAGMA busy_timeout = 20000``, over the wait the URI's ``timeout`` asked for (``waiting``:
    ``BUSY_TIMEOUT``, 120 s): on every engine whose URL names a ``timeout``, that PRAGMA waits as long as it
    says. MLflow's database module logs nothing: its INFO lines on a new store's first open ("Creating initial
    MLflow database tables...") are routine, and its traceback of each error it raises anyway is said in one
    line (``Locked``, ``Unreachable``)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    if not event.contains(Engine, "before_cursor_execute", _busy_timeout):
        event.listen(Engine, "before_cursor_execute", _busy_timeout, retval=True)


def _busy_timeout(
    conn: Connection, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> tuple[str, Any]:
    if statement.startswith("PRAGMA busy_timeout") and conn.engine.url.get_backend_name() == "sqlite":
        wait = conn.engine.url.query.get("timeout")
        if isinstance(wait, str):
            statement = f"PRAGMA busy_timeout = {round(float(wait) * 1000)};"
    return statement, parameters


def _open_client(uri: str) -> MlflowClient:
    """An MLflow client on ``uri``. A SQLite store is opened under an exclusive lock on its folder: MLflow
    creates a new store's tables (alembic migrations) on first open, and two processes doing that at once
    leave it broken for good; the second opener waits and finds the tables made. A file that is no
    MLflow store fails in one line naming it."""
    from mlflow import MlflowClient

    path = sqlite_path(uri)
    if path is not None or is_database(uri):
        _database_sessions()
    if path is None:
        return MlflowClient(tracking_uri=uri)
    fd = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.parent, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the other opener is done
        return MlflowClient(tracking_uri=waiting(uri))
    except Exception as error:  # sqlalchemy's DatabaseError on a file of garbage, an alembic error, no folder
        cause = getattr(error, "orig", None) or error  # sqlalchemy wraps the driver's error with its SQL
        first = " ".join(str(cause).split())[:200]
        if is_locked(cause):  # a sound store another process held past the wait: not to be moved
            raise locked(path, "as cctk opened it") from None
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

    def target(self) -> Experiment | None:
        """The experiment runs go to, where it exists: the one ``MLFLOW_EXPERIMENT_ID`` names (``experiment_id``;
        one that does not exist, or was deleted, is one line: cctk creates experiments by name only), else the one
        named ``experiment_name()``."""
        from mlflow.exceptions import MlflowException

        given = experiment_id()
        if given is None:
            named = self.client.get_experiment_by_name(experiment_name())
            if named is not None and named.lifecycle_stage != "active":  # MLflow would refuse its runs, and its name
                raise CctkError(
                    f"experiment {named.name!r} of {self.uri} is deleted: restore it (the MLflow UI, or `mlflow "
                    f"experiments restore --experiment-id {named.experiment_id}`) or name another "
                    "(MLFLOW_EXPERIMENT_NAME=NAME)"
                )
            return named
        try:
            found: Experiment | None = self.client.get_experiment(given)
        except MlflowException as error:  # a refusal or an outage is a CctkError of its own, raised as it is
            if error.error_code not in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                raise
            found = None
        if found is None or found.lifecycle_stage != "active":
            raise CctkError(
                f"MLFLOW_EXPERIMENT_ID={given} names no {'live ' if found else ''}experiment of {self.uri}: give "
                "the id of one, or unset it (runs go to MLFLOW_EXPERIMENT_NAME's experiment, else cctk's, "
                "created where missing)"
            )
        return found

    def experiment(self, name: str | None = None) -> str:
        """The id of experiment ``name`` (by default the one runs go to, ``target``), created (with the configured
        artifact folder) if needed; an experiment given by its id is never created."""
        found = self.target() if name is None else self.client.get_experiment_by_name(name)
        name = name or experiment_name()
        if found is None:
            folder = self.config.artifact_location
            location = Path(folder).resolve().as_uri() if folder else None
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
        """The one lifecycle of every cctk run: open it (tagged ``cctk.kind``), yield it, end it (``ending``).
        ``attach``: the run ``mlflow run`` created (``MLFLOW_RUN_ID``) becomes this run when there is one.
        ``reopen``: the id of an existing run this one continues (a resume): set RUNNING again, its tags kept.
        A new run goes to ``experiment_id``, else, nested, to its parent's experiment (the UI nests runs within
        one; a sweep's cell on a machine whose environment names another, a resume under another
        MLFLOW_EXPERIMENT_NAME), else to the experiment runs go to (``experiment``)."""
        attached = os.environ.get("MLFLOW_RUN_ID") if attach else None
        continued = reopen or attached
        tags = {KIND: kind, **(tags or {})}
        above = parent.run_id if isinstance(parent, LiveRun) else parent
        if continued:
            run = LiveRun(continued, self.client)
        else:
            home = experiment_id or (self.client.get_run(above).info.experiment_id if above else self.experiment())
            run = self.start(home, name, tags, parent)
        with ending(run, kind, above):  # set RUNNING again inside the lifecycle: a fault there ends it too
            if continued:
                self.reopen(continued)
            if attached:  # named as cctk names it, unless the user named it (`mlflow run --run-name`)
                info = self.client.get_run(attached).info
                named = {} if info.run_name and not made_up(info.run_name) else {"mlflow.runName": name}
                run.tags({**tags, **named, VERSION: source_tags()[VERSION]})
                self._tag_kind(info.experiment_id)  # mlflow run's experiment
            try:
                yield run
            except KeyboardInterrupt:
                if attached:  # `mlflow run` ends its run again once this process is gone: FAILED on an exit of 1
                    with suppress(Exception):
                        run.tags({ENDED: STOPPED})
                raise

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
        """Every run matching an MLflow search ``query`` (e.g. ``tags.`cctk.sweep` = 'ID'``), as plain values,
        the newest first, read a page at a time."""
        found, token = [], None
        while True:
            page = self.client.search_runs(experiment_ids, query, max_results=PAGE, page_token=token)
            found += [self._whole(_tracked(r)) for r in page]
            if not (token := page.token):
                return found

    def cells(self, sweep: TrackedRun) -> list[TrackedRun]:
        """The pipeline run of every cell ``sweep`` started, of every attempt, the newest first."""
        found = self.search([sweep.experiment_id], f"tags.`{SWEEP}` = '{sweep.run_id}'")
        return [run for run in found if run.tags.get(KIND) == "pipeline" and CELL in run.tags]

    def pipelines(self) -> list[TrackedRun]:
        """Every pipeline's parent run in the store, of any experiment, the newest first (creates nothing)."""
        ids = self.experiment_ids()
        return self.search(ids, f"tags.`{KIND}` = 'pipeline'") if ids else []

    def experiment_ids(self) -> list[str]:
        """The id of every active experiment in the store, read a page at a time."""
        ids, token = [], None
        while True:
            page = self.client.search_experiments(max_results=PAGE, page_token=token)
            ids += [e.experiment_id for e in page]
            if not (token := page.token):
                return ids

    def reopen(self, run_id: str) -> LiveRun:
        """An existing run, set RUNNING again (attached by ``mlflow run``, or resumed)."""
        self.client.update_run(run_id, status="RUNNING")
        return LiveRun(run_id, self.client)

    def link(self, run_id: str) -> str:
        """Where to see one of this store's runs (``run_link``): the last line of a command that logged it. A
        server's page names the run's experiment, read from the server; where it does not answer now, the work
        done, the line names the run on it (``cctk ui`` on an embedded store needs no read). On a database
        server's store, a second line where the run's artifacts stayed on this machine (``unshared_artifacts``)."""
        if not self.uri.startswith(ON_SERVER):
            shown = run_link(self, "", run_id)
            if not is_database(self.config.tracking_uri):
                return shown
            try:
                unshared = self.unshared_artifacts(self.client.get_run(run_id).info.artifact_uri)
            except Exception:  # an outage after the run ended: the work is done, the line names the run
                return shown
            return shown if unshared is None else f"{shown}\n{unshared}"
        try:
            experiment = self.get(run_id).experiment_id
        except Exception:  # an outage after the run ended (MLflow's or the connection's error): the work is done
            return f"MLflow UI: run {run_id} on {self.uri}"
        return run_link(self, experiment, run_id)

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
        return self._whole(_tracked(run))

    def _whole(self, run: TrackedRun) -> TrackedRun:
        """``run`` with every parameter too long for MLflow read back whole from its artifact (``LiveRun.params``:
        a sweep's seeds, resumed from its parameters)."""
        import tempfile

        kept = [key for key, value in run.params.items() if is_elsewhere(key, value)]
        if not kept:
            return run
        whole = dict(run.params)
        with tempfile.TemporaryDirectory() as scratch:
            for key in kept:
                path = self.client.download_artifacts(run.run_id, f"{PARAMS_FOLDER}/{key}.txt", scratch)
                whole[key] = Path(path).read_text(encoding="utf-8")
        return replace(run, params=whole)

    def permission(self, experiment_id: str) -> str | None:
        """What the user may do on an experiment (READ, EDIT, MANAGE, ...), as MLflow's basic-auth app resolves
        it for her own requests; None where the server has no such app (anyone may do anything)."""
        who = user()
        if who is None or not self.uri.startswith(ON_SERVER):
            return None
        try:
            return auth_client(self.uri).get_user_permission(who, "experiment", experiment_id).permission
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

    def sweep(self, run_id: str) -> TrackedRun:
        """The run of a cctk sweep, or a one-line error (naming the sweep a cell's run belongs to)."""
        run = self.get(run_id)
        kind = run.tags.get(KIND)
        if kind != "sweep":
            above = run.tags.get(SWEEP)
            hint = f": it is a run of sweep {above}, give that" if above else ""
            raise CctkError(f"MLflow run {run_id} is not a cctk sweep (tag {KIND} is {kind!r}){hint}")
        return run

    def metrics(self, run_id: str, names: Collection[str] | None = None) -> dict[str, float]:
        """The latest value of each metric of a run (only ``names``, when given)."""
        found = self.client.get_run(run_id).data.metrics
        return {k: v for k, v in found.items() if names is None or k in names}

    def children(self, parent: TrackedRun) -> list[TrackedRun]:
        """Every run nested under ``parent``."""
        return self.search([parent.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.run_id}'")

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

    def unshared_artifacts(self, artifact_uri: str) -> str | None:
        """The line for a run of a database server's store (PostgreSQL, MySQL: not SQLite, not a tracking server)
        whose artifacts go to a folder of this machine, MLflow's default for such a store: the runs are shared,
        their files are not (None for any other)."""
        there = local_folder(artifact_uri)
        if there is None or not is_database(self.config.tracking_uri):
            return None
        return (
            f"artifacts in {there} of this machine: the database holds the runs, not their files, which other "
            "machines cannot read (a tracking server shares them: docs/mlflow.md#stores)"
        )

    def name_of(self, experiment_id: str) -> str:
        """An experiment's name, by its id."""
        return self.client.get_experiment(experiment_id).name

    def artifact_location(self, experiment_id: str) -> str:
        """``mlflow-artifacts:/...`` where the server proxies them."""
        return self.client.get_experiment(experiment_id).artifact_location

    def artifact_address(self, run: LiveRun, path: str) -> str | None:
        """``artifact_address`` of ``run``'s artifact ``path`` in this store, where MLflow's dataset sources read
        it (a store of a scheme none reads, one a plugin adds: None)."""
        address = artifact_address(self.uri, run.artifact_uri, run.run_id, path)
        return address if address is not None and dataset_source_reads(address) else None

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
        """Every top-level artifact of ``run_id`` (but those ending in ``skip_suffix``) into ``folder``. A finished
        run whose artifacts were written to a folder this machine does not have (another machine's, or one moved
        since) fails in one line that says where they are: MLflow lists such a folder as empty."""
        run = self.client.get_run(run_id)
        there = local_folder(run.info.artifact_uri)
        if there is not None and run.info.status == "FINISHED" and not there.is_dir():
            raise CctkError(
                f"MLflow run {run_id} keeps its artifacts in {there}, a folder this machine does not have (the run "
                f"was made on another machine, or the folder moved): {self.uri} holds the runs, not their files; "
                "read them where that folder is (a session folder loads as a run id does), or serve the store to "
                "share them (docs/mlflow.md#stores)"
            )
        folder.mkdir(parents=True, exist_ok=True)
        for item in self.client.list_artifacts(run_id):
            if not item.path.endswith(skip_suffix):
                self.client.download_artifacts(run_id, item.path, str(folder))


# Artifact URIs that MLflow's dataset sources cannot read (mlflow-artifacts: is the server's; runs:, models: point
# into a store): an artifact there is reached through the tracking server's own /get-artifact, or not at all.
UNREADABLE_SOURCES = ("mlflow-artifacts", "runs", "models")
# What MLflow warns when two of its dataset sources read one address (a local path): it picks one either way.
TWO_SOURCES = "The specified dataset source can be interpreted"


def made_up(run_name: str) -> bool:
    """Whether ``run_name`` is one MLflow made up for a run created without a name (``persistent-bird-941``: a
    word of each of its two lists and a number), as `mlflow run` without ``--run-name`` creates its run."""
    from mlflow.utils import name_utils  # MLflow's own word lists (a private module: where they move, the shape)

    if run_name.count("-") != 2:
        return False
    predicate, noun, number = run_name.split("-")
    if not number.isdigit():
        return False
    predicates = getattr(name_utils, "_GENERATOR_PREDICATES", None)
    nouns = getattr(name_utils, "_GENERATOR_NOUNS", None)
    if predicates is None or nouns is None:
        return predicate.isalpha() and noun.isalpha()
    return predicate in predicates and noun in nouns


def local_folder(artifact_uri: str) -> Path | None:
    """The folder of this machine that an artifact URI names (``file:///...`` or a plain path); None for any
    other scheme (``s3://``, ``mlflow-artifacts:``, ...)."""
    parts = urlsplit(artifact_uri)
    if parts.scheme == "file":
        return Path(url2pathname(parts.path))
    return Path(artifact_uri) if parts.scheme == "" else None


def artifact_address(tracking_uri: str, artifact_uri: str, run_id: str, path: str) -> str | None:
    """Where anyone who can reach the store reads artifact ``path`` of run ``run_id`` (a dataset's source): on a
    tracking server (http, https), its ``/get-artifact`` address, whatever store the server keeps artifacts in (the
    URI's user part, query and fragment dropped: no credential goes into a run); elsewhere the artifact itself
    (a local folder, s3://, gs://, ...); None where neither is readable (``mlflow-artifacts:`` without a server)."""
    parts = urlsplit(tracking_uri)
    if parts.scheme in ("http", "https"):
        host = parts.netloc.rpartition("@")[2]
        query = urlencode({"path": path, "run_id": run_id})
        return f"{parts.scheme}://{host}{parts.path.rstrip('/')}/get-artifact?{query}"
    if urlsplit(artifact_uri).scheme in UNREADABLE_SOURCES:
        return None
    return f"{artifact_uri.rstrip('/')}/{path}"


def dataset_source_reads(address: str) -> bool:
    """Whether one of MLflow's dataset sources reads ``address`` (what ``from_pandas`` refuses to log otherwise)."""
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.exceptions import MlflowException

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TWO_SOURCES)
        try:
            resolve_dataset_source(address)
        except MlflowException:
            return False
    return True


@lru_cache(maxsize=1)
def source_tags() -> dict[str, str]:
    """Which code made a run: cctk (callers name the command), its version and, in a git clone, the commit
    and whether the tree had changes (``cctk.git.dirty``); ``cctk.git.state`` always (``none`` outside one)."""
    from ... import __version__
    from ...core.provenance import git_state, git_words

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


def note_refusal(message: str) -> None:
    """``mlflow run``'s run (``MLFLOW_RUN_ID``) where the command ended in one line before any lifecycle of cctk
    opened it (a bad parameter): the line as its tag ``cctk.error``, so the FAILED run MLflow records after it says
    why. A run a lifecycle ended keeps its own tag; a store that cannot be reached is let be (the line was printed)."""
    attached = os.environ.get("MLFLOW_RUN_ID")
    if not attached:
        return
    with suppress(Exception):
        config = resolve(None)
        check_reachable(config)
        client = Store(config).client
        if ERROR not in client.get_run(attached).data.tags:
            client.set_tag(attached, ERROR, message)


def nested_runs_hint(run_id: str) -> str:
    """How to see a parent's nested runs in the MLflow UI (its runs table folds them under the parent)."""
    return (
        "Its models are nested runs, folded under it in the runs table: the + beside its name lists them, as "
        f"does the search tags.mlflow.parentRunId = '{run_id}'; drag the Run Name column wider to read long names "
        "whole"
    )


def run_link(store: Store, experiment_id: str, run_id: str) -> str:
    """Where to see a run: its page in the UI of its server (the Model training view), or the command that
    opens the UI on an embedded store at it."""
    if store.uri.startswith(ON_SERVER):
        return f"MLflow UI: {store.runs_url(store.uri, experiment_id, run_id)}"
    return f"MLflow UI: {on_store(store, f'cctk ui {run_id}')}"


def on_store(store: Store, command: str) -> str:
    """``command`` (a cctk command line) pointed at ``store`` as the user named it: ``--tracking NAME`` unless
    it is the default store or ``MLFLOW_TRACKING_URI``'s (which the next command finds the same way). Under
    ``mlflow run`` (``MLFLOW_RUN_ID`` set), MLFLOW_TRACKING_URI is what it handed its command, not the user's
    shell's (without one, MLflow's own default, ./mlflow.db): the store is spelled out."""
    name, from_env = store.config.name, store.config.name == "MLFLOW_TRACKING_URI"
    if name == DEFAULT_CONFIG or (from_env and not os.environ.get("MLFLOW_RUN_ID")):
        return command
    given = store.config.shown if from_env else name
    # quoted for a shell (a URI's `&`, a redacted `***`); a URI given with its password goes in the environment,
    # not the command line (which `ps` shows every user of the machine), and the line says what *** stands for
    if given == store.config.shown != store.config.tracking_uri:
        return f"MLFLOW_TRACKING_URI={shlex.quote(given)} {command} (*** is the password)"
    return f"{command} --tracking {shlex.quote(given)}"


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
    parent = run.tags.get("mlflow.parentRunId")
    if kind == "model" and parent:  # an arm's run id, copied from the UI: its pipeline is the run above it
        raise CctkError(
            f"MLflow run {run.run_id} is a model's nested run (tag {KIND} is 'model'), not a pipeline's: give "
            f"its pipeline's run, {parent}"
        )
    if kind != "pipeline":
        sweep = (  # the commands that take a sweep's run
            f" (a sweep's: cctk sweep --resume {run.run_id}, cctk compare --sweep {run.run_id})"
            if kind == "sweep"
            else ""
        )
        raise CctkError(
            f"MLflow run {run.run_id} is not a cctk pipeline run (tag {KIND} is {kind!r}); "
            f"give the parent run of a `cctk run`{sweep}"
        )


def auth_client(uri: str) -> AuthServiceClient:
    """MLflow's client of the basic-auth app at ``uri``."""
    with warnings.catch_warnings():  # the server's modules, imported for their routes, warn of their own
        warnings.simplefilter("ignore")  # deprecations (starlette's WSGI middleware): not a user's concern
        from mlflow.server.auth.client import AuthServiceClient

    return AuthServiceClient(uri)
