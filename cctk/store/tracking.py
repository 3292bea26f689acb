"""The one place that talks to MLflow: where runs are stored, and a narrow logging interface.

Where runs go: ``MLFLOW_TRACKING_URI`` when set; else ``--tracking NAME|URI``, a NAME being a file
``mlruns_config/NAME.toml`` of the working folder or, failing that, of the package (``cctk/store/mlruns_config/``,
shipped in the wheel); else the embedded default (SQLite store and artifacts under ./mlruns/).
"""

from __future__ import annotations

import fcntl
import os
import time
import tomllib
import urllib.request
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ..core.errors import CctkError

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
PARENT_RUN = "cctk.parent_run_id"  # an arm's pipeline run (also a param, parent_run_id)
ERROR = "cctk.error"  # why a run FAILED: the exception, one line
ENDED = "cctk.ended"  # why cctk ended KILLED a run that no process ran any more (a lost node, a stopped sweep)
TRAINED_AGAIN = "cctk.trained_again"  # a finished arm whose weights a resume trained again, and why
ATTEMPT = "cctk.attempt"  # a sweep cell's run: the attempt running it (2 and up: resumed after one was lost)
PACKAGE = "cctk.package."  # + a distribution's name: its version (a pipeline's parent run)
TRACKING_URI = "cctk.tracking_uri"  # the store's absolute URI, as the run recorded it
ARTIFACT_URI = "cctk.artifact_uri"  # the run's artifact location
STATUSES = ("FINISHED", "FAILED", "KILLED")
# The MLflow UI opens an experiment of this kind on its runs table ("Model training"), not on GenAI traces.
EXPERIMENT_KIND = "custom_model_development"


@dataclass(frozen=True)
class TrackingConfig:
    name: str
    tracking_uri: str
    artifact_location: str | None = None  # only for stores without a server


def config_folders() -> list[Traversable]:
    """Where a configuration NAME is looked up, the first holding ``NAME.toml`` winning: ``mlruns_config/``
    of the working folder (a researcher's own or changed configurations), then the package's own, which a
    wheel installed anywhere carries as package data."""
    here = Path.cwd() / "mlruns_config"
    return ([here] if here.is_dir() else []) + [resources.files(__package__) / "mlruns_config"]


def config_names() -> list[str]:
    return sorted(
        {
            entry.name.removesuffix(".toml")
            for folder in config_folders()
            for entry in folder.iterdir()
            if entry.name.endswith(".toml")
        }
    )


def read_config(name: str) -> dict:
    for folder in config_folders():
        entry = folder / f"{name}.toml"
        if entry.is_file():
            return tomllib.loads(entry.read_text())
    raise CctkError(
        f"unknown tracking configuration {name!r}; choose one of: {', '.join(config_names())}, or give a tracking URI"
    )


def resolve(tracking: str | None = None) -> TrackingConfig:
    """The store runs go to (see the module docstring for the order), its URI and artifact folder made
    absolute: a run records where it is, wherever it is read from later."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return TrackingConfig("MLFLOW_TRACKING_URI", absolute_uri(env))
    tracking = tracking or DEFAULT_CONFIG
    if "://" in tracking or tracking.startswith("sqlite:"):
        return TrackingConfig(tracking, absolute_uri(tracking))
    raw = read_config(tracking)
    artifacts = raw.get("artifact_location")
    return TrackingConfig(
        tracking, absolute_uri(raw["tracking_uri"]), str(Path(artifacts).absolute()) if artifacts else None
    )


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
    """A server that does not answer fails here, before any model is loaded."""
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


@dataclass(frozen=True)
class TrackedRun:
    """What cctk reads back of an MLflow run: plain values, no MLflow objects."""

    run_id: str
    experiment_id: str
    status: str
    params: dict
    tags: dict


class LiveRun:
    """A run being logged to: a narrow logging interface over one MLflow run (params, metrics, tags, files).
    A run read back from the store is a ``TrackedRun``."""

    def __init__(self, run_id: str, client):
        self.run_id = run_id
        self._client = client

    def params(self, values: dict) -> None:
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

    def metrics(self, values: dict, step: int = 0) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in values.items()]
        self._client.log_batch(self.run_id, metrics=items)

    def tags(self, values: dict) -> None:
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

    def dataset(self, table, name: str, source: str, context: str = "training") -> None:
        """``table`` (a DataFrame) as an MLflow dataset input of this run, with its context."""
        from mlflow.data import from_pandas
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

    def table(self, table, artifact_file: str) -> None:
        """``table`` as an MLflow table artifact (shown as a table in the UI)."""
        self._client.log_table(self.run_id, data=table, artifact_file=artifact_file)

    def system_metrics(self, interval: float = 10.0):
        """Start logging CPU, memory, disk, network (and GPU where there is one) every ``interval`` s;
        returns the monitor (``stop()`` it), or None where MLflow cannot monitor this machine."""
        try:
            from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

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
        return self._client.get_run(self.run_id).info.artifact_uri

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
    other exception, recorded as tag ``cctk.error``); the exception goes on. ``Store.run`` opens every
    run inside it."""
    try:
        yield run
    except KeyboardInterrupt:
        run.end("KILLED")
        raise
    except BaseException as error:
        run.failed(error)
        raise
    run.end("FINISHED")


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


def _open_client(uri: str):
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
        self.uri = config.tracking_uri
        self.client = _open_client(self.uri)
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bar per downloaded file

    def experiment(self, name: str = EXPERIMENT) -> str:
        """The id of experiment ``name``, created (with the configured artifact folder) if needed."""
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
        tags: dict | None = None,
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
        experiment_id = None if continued else experiment_id or self.experiment()
        tags = {KIND: kind, **(tags or {})}
        run = LiveRun(continued, self.client) if continued else self.start(experiment_id, name, tags, parent)
        with ending(run):  # set RUNNING again inside the lifecycle: a fault there ends it too
            if continued:
                self.reopen(continued)
            if attached:
                run.tags({**tags, "mlflow.runName": name, VERSION: source_tags()[VERSION]})
            yield run

    def runs_url(self, base: str, experiment_id: str) -> str:
        """The UI's runs table of an experiment, in the Model training view."""
        return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"

    def start(
        self, experiment_id: str, name: str, tags: dict | None = None, parent: LiveRun | str | None = None
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

    def reopen(self, run_id: str) -> LiveRun:
        """An existing run, set RUNNING again (attached by ``mlflow run``, or resumed)."""
        self.client.update_run(run_id, status="RUNNING")
        return LiveRun(run_id, self.client)

    def get(self, run_id: str) -> TrackedRun:
        """A run of this store, or a one-line error."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException:
            raise CctkError(f"no run {run_id!r} in the tracking store {self.uri}") from None
        return TrackedRun(
            run.info.run_id, run.info.experiment_id, run.info.status, dict(run.data.params), dict(run.data.tags)
        )

    def pipeline(self, run_id: str) -> TrackedRun:
        """The parent run of a cctk pipeline, or a one-line error."""
        run = self.get(run_id)
        require_pipeline(run)
        return run

    def metrics(self, run_id: str, names=None) -> dict[str, float]:
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
    and whether the tree had changes (``cctk.git.dirty``)."""
    from .. import __version__
    from ..core.provenance import git_state

    tags = {"mlflow.source.name": "cctk", "mlflow.source.type": "LOCAL", VERSION: __version__}
    git = git_state()
    if git:
        tags.update({"mlflow.source.git.commit": git.commit, GIT_DIRTY: str(git.dirty).lower()})
    return tags


def connect(tracking: str | None = None, create: bool = True) -> Store:
    """The store runs go to (checked reachable), through a client of its own. ``create=False`` (a read:
    ``results.load``, ``cctk report``, ``cctk compare``): a store that is not there fails (``NoStore``)
    rather than being created empty."""
    config = resolve(tracking)
    if not create:
        why = missing_store(config)
        if why:
            raise NoStore(f"{why}; {HOW_TO_POINT}")
    check_reachable(config)
    return Store(config)


def provenance_tags(flat: dict[str, str], packages: dict[str, str | None]) -> dict[str, str]:
    """A run's provenance as tags: ``cctk.model.sha256``, ``cctk.git.commit``, ``cctk.reproduce``, ... (the
    record's ``flat`` names under ``cctk.``) and ``cctk.package.<name>`` for each package's version."""
    return {
        **{f"cctk.{k}": v for k, v in flat.items()},
        **{PACKAGE + name: version or "not installed" for name, version in packages.items()},
    }


def _text(value) -> str:
    return value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)


def require_pipeline(run: TrackedRun) -> None:
    """A one-line error unless ``run`` is the parent run of a cctk pipeline."""
    kind = run.tags.get(KIND)
    if kind != "pipeline":
        raise CctkError(
            f"MLflow run {run.run_id} is not a cctk pipeline run (tag {KIND} is {kind!r}); "
            "give the parent run of a `cctk run`"
        )
