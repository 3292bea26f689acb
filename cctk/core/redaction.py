"""A URI as cctk shows it: with its secrets replaced by ``***``. The one form in which cctk writes or prints a
URI that may hold one: a tracking store's (tags, run_info.json, reports, lines, command lines) and a KR-Test
teacher endpoint's (its description in the run, its error lines)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

# Query parameters that carry a secret: psycopg2's and libpq's password=, MySQL's passwd=, a token=, a client
# secret, and an API key (api_key=, apikey=, access_key=, or key= alone, as Google's endpoints take it)
_SECRET_WORDS = ("pass", "pwd", "secret", "token", "api_key", "apikey", "access_key")


def redact(uri: str) -> str:
    """``uri`` with the password of its user (``postgresql://cctk:***@host/db``) and the value of every
    query parameter that holds a secret (``?password=***``, ``?api_key=***``) replaced; the rest is kept as
    written."""
    parts = urlsplit(uri)
    shown = uri  # spliced, not rebuilt: urlunsplit would drop the empty host of sqlite:///path
    if parts.password is not None:
        user, _, host = parts.netloc.rpartition("@")
        shown = shown.replace(f"//{parts.netloc}", f"//{user.split(':', 1)[0]}:***@{host}", 1)
    pieces = [piece.partition("=") for piece in parts.query.split("&")]
    query = "&".join(f"{key}=***" if mark and _secret_key(key) else key + mark + value for key, mark, value in pieces)
    if query != parts.query:
        head, _, tail = shown.partition("?")
        shown = f"{head}?{tail.replace(parts.query, query, 1)}"
    return shown


def _secret_key(key: str) -> bool:
    name = unquote(key).lower()
    return name == "key" or any(word in name for word in _SECRET_WORDS)


def has_password(uri: str) -> bool:
    """Whether ``uri`` holds a secret (a password in its user part, a secret in its query), as ``redact`` finds it."""
    return redact(uri) != uri
