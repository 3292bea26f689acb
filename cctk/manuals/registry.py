"""The one list of manuals: cctk's own (``BUILT_IN``) and those other packages register.

A manual outside cctk registers as a plugin does, with nothing of cctk edited: an entry point
``NAME = "module:value"`` (a ``Manual``) in group ``cctk.manuals`` of its distribution's metadata (in its
pyproject.toml: ``[project.entry-points."cctk.manuals"]``). cctk's own are listed here, one line each, so that a
checkout runs them whatever metadata is installed. A manual's module is imported only when its name is resolved,
so no arrow points from here to a manual. ``get`` is the one resolver of a name, called only at the edges where a
name comes in (the library's entry, run_info.json's reader, a resume's MLflow tags). ``DEFAULT`` is what
``cctk run`` runs without ``--protocol``; ``LEGACY`` what a session or run from before protocols ran (neither
names its protocol).

Torch-free and matplotlib-free at import.
"""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points

from ..core.errors import CctkError
from .manual import AnyManual, Manual

GROUP = "cctk.manuals"  # the entry points of the manuals other packages register
BUILT_IN = {"v2": "cctk.manuals.v2.manual:V2", "v1": "cctk.manuals.v1.manual:V1"}  # cctk's own, by name
DEFAULT = "v2"  # what ``cctk run`` (and ``cctk sweep``) runs without --protocol
LEGACY = "v2"  # what a session or MLflow run from before protocols ran (it names none)


@functools.cache
def _entries() -> dict[str, str]:
    """Every manual's ``module:value`` by name: cctk's own, then the registered ones by name (read once a process;
    ``refresh`` reads them again). A registered name that is taken is one line naming both."""
    found = dict(BUILT_IN)
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        if found.setdefault(entry.name, entry.value) != entry.value:
            raise CctkError(
                f"manual {entry.name!r} is registered twice ({found[entry.name]} and {entry.value}, entry points "
                f"of group {GROUP}): uninstall one, or register it under another name"
            )
    return found


def refresh() -> None:
    """Read the entry points again (a distribution installed since the first read)."""
    _entries.cache_clear()
    _load.cache_clear()


def names() -> tuple[str, ...]:
    """Every manual's name (``cctk run --protocol``'s choices)."""
    return tuple(_entries())


def get(name: str | None) -> AnyManual:
    """The manual of a name; the legacy one for None (a session from before protocols). The one resolver: called
    only where a name comes in (tests/manuals/test_manual_value.py names the edges)."""
    name = name or LEGACY
    if name not in _entries():
        choices = ", ".join(f"{known} ({get(known).spec.label})" for known in _entries())
        raise CctkError(f"unknown protocol {name!r}; choose one of: {choices}")
    return _load(name)


@functools.cache
def _load(name: str) -> AnyManual:
    home = _entries()[name]
    try:
        manual = EntryPoint(name, home, GROUP).load()
    except Exception as error:  # a plugin's import error, in one line
        raise CctkError(f"manual {name!r} ({home}) cannot be imported: {type(error).__name__}: {error}") from None
    if not isinstance(manual, Manual) or manual.spec.name != name:
        raise CctkError(f"manual {name!r} ({home}) is not a cctk Manual whose spec is named {name!r}")
    return manual


def default() -> AnyManual:
    """The manual ``cctk run`` runs without --protocol (and the benchmarks run)."""
    return get(DEFAULT)


def every() -> tuple[AnyManual, ...]:
    """Every manual, in ``names`` order: the command line reads their options and profiles."""
    return tuple(get(name) for name in _entries())


__all__ = ["BUILT_IN", "DEFAULT", "GROUP", "LEGACY", "default", "every", "get", "names", "refresh"]
