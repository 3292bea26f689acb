"""The one exception a user sees: a one-line message, printed without a traceback by the CLI."""


class CctkError(Exception):
    """Bad input or an unusable environment, found before any work starts."""
