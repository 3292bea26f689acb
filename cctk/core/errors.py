"""The exceptions a user sees: a one-line message (printed without a traceback by the CLI), and a stop."""

from __future__ import annotations

import signal


class CctkError(Exception):
    """Bad input or an unusable environment, found before any work starts."""


class OutOfMemory(CctkError):
    """A device or the host ran out of memory during a run: one line with the estimate and what fits."""


class Terminated(KeyboardInterrupt):
    """SIGTERM: the command stops as it does on Ctrl-C (its MLflow runs end KILLED)."""


def stop_on_sigterm() -> None:
    """From now on SIGTERM raises ``Terminated`` in the main thread, so ``finally`` blocks and the run
    lifecycle (``cctk.store.tracking.Store.run``) run before the process exits."""

    def raise_terminated(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        raise Terminated(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, raise_terminated)
