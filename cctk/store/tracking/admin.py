"""A tracking server's administration: its accounts (``Accounts``: MLflow's basic-auth app, users, passwords
and grants per experiment, a grant on an experiment another user made refused unless shared) and its state
(``server_state``: whether it answers, and whether it asks for a login)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ...core.errors import CctkError
from .config import ON_SERVER, TrackingConfig, check_reachable, login, user
from .runs import STATUSES, Refused, Store, auth_client, http_status

T = TypeVar("T")  # what a call to the server answers


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
        self.store, self._auth = store, auth_client(store.uri)

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

    # above the method ``list``: below it, mypy reads ``list`` in an annotation as that method
    def _users(self) -> list[dict[str, Any]]:
        from mlflow.server.auth.routes import LIST_USERS  # imported by auth_client

        users: list[dict[str, Any]] = self._call(lambda: self._get(LIST_USERS, {})["users"], "list users")
        return users

    def holders(self, experiment_id: str) -> tuple[tuple[str, str], ...]:
        """(user, permission) of every user but the admins granted on an experiment (its creator: MANAGE)."""
        names = sorted(u["username"] for u in self._users() if not u["is_admin"])
        rows = [(name, row) for name in names for row in self._rows(name)]
        return tuple((name, r["permission"]) for name, r in rows if r["resource_pattern"] == str(experiment_id))

    def list(self) -> list[Account]:
        users = sorted(self._users(), key=lambda u: u["username"])
        return [Account(u["username"], bool(u["is_admin"]), self._grants(u["username"])) for u in users]

    def _grants(self, name: str) -> tuple[tuple[str, str], ...]:
        rows = self._rows(name)
        patterns = dict.fromkeys(row["resource_pattern"] for row in rows)  # experiment id (or "*"), once each
        names = {p: "*" if p == "*" else self.store.client.get_experiment(p).name for p in patterns}
        return tuple(sorted((names[r["resource_pattern"]], r["permission"]) for r in rows))

    def _rows(self, name: str) -> Rows:
        """The grants of user ``name`` on experiments, as the app lists them (resource_pattern, permission)."""
        from mlflow.server.auth.routes import LIST_USER_PERMISSIONS  # imported by auth_client

        found = self._call(lambda: self._get(LIST_USER_PERMISSIONS, {"username": name}), "list the users' grants")
        rows: Rows = found["permissions"]
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


def _message(error: BaseException) -> str:
    """MLflow's own words of a refused request, one line."""
    text = getattr(error, "message", None) or str(error)  # a database's words quote the SQL and its parameters:
    return " ".join(str(text).split("[SQL:")[0].split())[:300]  # a new password's salted hash among them


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
    ids = store.experiment_ids()
    runs = {
        status: len(store.search(ids, f"attributes.status = '{status}'")) if ids else 0
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
