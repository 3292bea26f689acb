"""The exceptions a user sees: a one-line message (printed without a traceback by the CLI), and a stop."""

from __future__ import annotations

import difflib
import signal
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import FrameType


class CctkError(Exception):
    """Bad input or an unusable environment, found before any work starts."""


def one_line(error: BaseException) -> str:
    """A failure as the line users read: a ``CctkError``'s own words, else the exception's type and words
    (whitespace folded)."""
    text = str(error) if isinstance(error, CctkError) else f"{type(error).__name__}: {error}"
    return " ".join(text.split())


class OutOfMemory(CctkError):
    """A device or the host ran out of memory during a run: one line with the estimate and what fits."""


class NoRun(CctkError):
    """The tracking store answered and holds no run of that id (not: the store could not be read)."""


class UnknownKey(CctkError, KeyError):
    """A lookup by a key that is not there: one line naming the closest key and every valid one. A
    ``KeyError`` too, so that code written for a dict (``except KeyError``) keeps working."""

    def __str__(self) -> str:  # KeyError's own would print the message quoted
        return str(self.args[0]) if self.args else ""


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known key nearest ``name`` (the same but for case, else the most alike by difflib), or None."""
    known = list(known)
    by_case = {k.lower(): k for k in known}
    if name.lower() in by_case:
        return by_case[name.lower()]
    near = difflib.get_close_matches(name.lower(), list(by_case), n=1, cutoff=0.6)
    return by_case[near[0]] if near else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'table09'?)"`` where a known key is near ``name``, else nothing."""
    near = closest(name, known)
    return f" (did you mean {near!r}?)" if near is not None and near != name else ""


def unknown_key(kind: str, name: str, known: Iterable[str], where: str = "") -> UnknownKey:
    """The error of a lookup of ``name`` among ``known`` keys of a ``kind`` (``table``, ``model``, ...):
    ``no table 'table9' in this run (did you mean 'table09'?); choose one of: table01, table02, ...``."""
    known = [str(k) for k in known]
    listed = f"choose one of: {', '.join(known)}" if known else f"it has no {kind}s"
    return UnknownKey(f"no {kind} {name!r}{where}{did_you_mean(str(name), known)}; {listed}")


class Terminated(KeyboardInterrupt):
    """SIGTERM: the command stops as it does on Ctrl-C (its MLflow runs end KILLED)."""


def stop_on_sigterm() -> None:
    """From now on SIGTERM raises ``Terminated`` in the main thread, so ``finally`` blocks and the run
    lifecycle (``cctk.store.tracking.Store.run``) run before the process exits."""

    def raise_terminated(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        raise Terminated(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, raise_terminated)


@contextmanager
def stops_held() -> Iterator[None]:
    """Ctrl-C (and SIGTERM where ``stop_on_sigterm`` made it a stop) held off while the block runs, and raised as it
    ends: for a write that must not be cut in two, such as a run's status (a stop inside the store's write left the
    run RUNNING after its command had gone). Where the block raises, its error goes on and the held stop with it
    (the command is leaving either way). A second stop while the first is held is raised at once (a store that
    hangs is not waited for against the user's will), as a second SIGTERM still ends the process; off the main
    thread, where no signal arrives, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[KeyboardInterrupt] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        stop = KeyboardInterrupt() if signum == signal.SIGINT else Terminated(f"stopped by signal {signum}")
        if held:  # a second stop while the first waits: the user insists (a store that hangs), so at once
            raise stop
        held.append(stop)

    # the handlers Python runs (the one that raises KeyboardInterrupt, stop_on_sigterm's): not an ignored signal,
    # nor the default that ends the process at once (a second SIGTERM's)
    mine = [sig for sig in (signal.SIGINT, signal.SIGTERM) if callable(signal.getsignal(sig))]
    previous = {sig: signal.signal(sig, hold) for sig in mine}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if held:
        raise held[0]
