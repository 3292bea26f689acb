"""The one place that talks to MLflow, in three modules: ``config`` (where runs are stored and who writes them),
``runs`` (the store, the runs and a narrow logging interface) and ``admin`` (a server's accounts and state); every
name of theirs is here too (``tracking.connect``, ``tracking.LiveRun``). Where runs go: ``config``'s docstring.

On a shared server (MLflow's basic-auth app), the client is who ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD`` say, else MLflow's ``~/.mlflow/credentials`` (read as MLflow reads them; cctk never
takes a password as an argument), and runs go to the experiment ``MLFLOW_EXPERIMENT_NAME`` names, else the one
``MLFLOW_EXPERIMENT_ID`` names, else ``cctk``. A store's URI is shown (lines, tags, files, command lines) only
through ``redact``: a database's password reaches its client alone. A refusal (401, 403) is one line naming who,
which experiment and what permission is missing (``Refused``); a server that stops answering past MLflow's own
retries is one line too (``Unreachable``), and the runs it leaves open say so.
"""

from __future__ import annotations

from ...core.errors import NoRun as NoRun
from .admin import (
    Accounts as Accounts,
    server_state as server_state,
)
from .config import (
    BUSY_TIMEOUT as BUSY_TIMEOUT,
    EXPERIMENT as EXPERIMENT,
    EXPERIMENT_VARIABLES as EXPERIMENT_VARIABLES,
    HOW_TO_POINT as HOW_TO_POINT,
    Locked as Locked,
    Login as Login,
    NoStore as NoStore,
    NotEnded as NotEnded,
    TrackingConfig as TrackingConfig,
    Unreachable as Unreachable,
    absolute_uri as absolute_uri,
    beside_database as beside_database,
    check_reachable as check_reachable,
    check_retry_budget as check_retry_budget,
    config_file as config_file,
    config_folders as config_folders,
    config_names as config_names,
    config_names_list as config_names_list,
    config_value as config_value,
    database_error as database_error,
    database_problem as database_problem,
    experiment_id as experiment_id,
    experiment_name as experiment_name,
    experiment_variables as experiment_variables,
    has_password as has_password,
    is_database as is_database,
    login as login,
    missing_store as missing_store,
    mlflow_default_here as mlflow_default_here,
    password_problem as password_problem,
    read_config as read_config,
    redact as redact,
    resolve as resolve,
    retry_budget as retry_budget,
    sqlite_path as sqlite_path,
    user as user,
    waiting as waiting,
)
from .runs import (
    ARM as ARM,
    ARTIFACT_URI as ARTIFACT_URI,
    ATTEMPT as ATTEMPT,
    CELL as CELL,
    ENDED as ENDED,
    ERROR as ERROR,
    EXPERIMENT_KIND as EXPERIMENT_KIND,
    KEY as KEY,
    KIND as KIND,
    PARENT_KEY as PARENT_KEY,
    PARENT_RUN as PARENT_RUN,
    PROTOCOL as PROTOCOL,
    SESSION as SESSION,
    SWEEP as SWEEP,
    TRACKING_URI as TRACKING_URI,
    TRAINED_AGAIN as TRAINED_AGAIN,
    LiveRun as LiveRun,
    Refused as Refused,
    Store as Store,
    TrackedRun as TrackedRun,
    active_run as active_run,
    artifact_address as artifact_address,
    connect as connect,
    dataset_source_reads as dataset_source_reads,
    ending as ending,
    finish_monitor as finish_monitor,
    needs as needs,
    nested_runs_hint as nested_runs_hint,
    note_refusal as note_refusal,
    on_store as on_store,
    provenance_tags as provenance_tags,
    refusal as refusal,
    require_pipeline as require_pipeline,
    run_link as run_link,
)
