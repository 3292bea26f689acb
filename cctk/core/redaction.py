"""A URI as cctk shows it: with its secrets replaced by ``***``. The one form in which cctk writes or prints a
URI that may hold one: a tracking store's (tags, run_info.json, reports, lines, command lines) and a KR-Test
teacher endpoint's (its description in the run, its error lines)."""

from __future__ import annotations

import re
from urllib.parse import unquote

from .errors import CctkError

# Query parameters that carry a secret: psycopg2's and libpq's password=, MySQL's passwd=, a token=, a client
# secret, an API key (api_key=, api-key=, x-api-key=, apikey=, access_key=, subscription-key=, private_key=, or
# key= alone, as Google's endpoints take it), a signature (sig=, Azure's SAS) and a credential or auth value
_SECRET_WORDS = (
    "pass", "pwd", "secret", "token", "api_key", "apikey", "access_key", "subscription_key", "private_key",
    "sig", "credential", "auth",
)  # fmt: skip

# The user part of a URI, read as the widest of its readings: a password runs to the *last* @ (a password with a
# raw @, / or # in it: urlsplit ends the host at the first /?#, SQLAlchemy the password at the first @; a driver
# that reads the rest as a host would print it). A user alone is a secret on the web (https://TOKEN@host).
_USER_PART = re.compile(r"^(?P<head>[A-Za-z][\w+.-]*://)(?P<user>[^:/?#@\[\]]*)(?::(?P<password>.*)@|@)", re.S)
_WEB = ("http://", "https://")


def redact(uri: str) -> str:
    """``uri`` with the password of its user (``postgresql://cctk:***@host/db``), a web address's user alone
    (``https://***@host``, a token) and the value of every query parameter that holds a secret
    (``?password=***``, ``?api_key=***``) replaced; the rest is kept as written."""
    shown = uri
    found = _USER_PART.match(uri)
    if found and found["password"] is not None:
        shown = f"{found['head']}{found['user']}:***@{uri[found.end() :]}"
    elif found and found["head"].lower() in _WEB and found["user"]:
        shown = f"{found['head']}***@{uri[found.end() :]}"
    head, mark, rest = shown.partition("?")  # the user part masked, the first ? starts the query
    query, hash_mark, fragment = rest.partition("#")
    pieces = [piece.partition("=") for piece in query.split("&")]
    masked = "&".join(f"{key}=***" if sep and _secret_key(key) else key + sep + value for key, sep, value in pieces)
    return f"{head}{mark}{masked}{hash_mark}{fragment}"


def _secret_key(key: str) -> bool:
    name = unquote(key).lower().replace("-", "_")
    return name == "key" or any(word in name for word in _SECRET_WORDS)


def has_password(uri: str) -> bool:
    """Whether ``uri`` holds a secret (a password in its user part, a secret in its query), as ``redact`` finds it."""
    return redact(uri) != uri


def raw_at_in_password(uri: str) -> bool:
    """Whether the password of ``uri``'s user holds an @ as it is, not percent-encoded (%40): a database driver
    reads the password to its first @ and the rest as the host, which its error then prints."""
    found = _USER_PART.match(uri)
    return bool(found and found["password"] is not None and "@" in found["password"])


_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def variable_name(value: str, where: str) -> str:
    """``value``, the name of the environment variable that holds a secret; anything else (the secret itself,
    typed there by mistake) refused in one line that does not show it."""
    if not _VARIABLE.fullmatch(value):
        raise CctkError(
            f"{where} takes the name of an environment variable (letters, digits and _), and what it was given is "
            "none (not shown, in case it is the secret itself): put the secret in a variable and name that"
        )
    return value
