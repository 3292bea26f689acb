"""The pipeline (the floor under the command lines): ``cctk run`` under either manual, ``--resume``, a
sweep's cells and ``cctk measure``. ``run``, ``resume`` and ``sweep_cell`` are the library's entry points:
``cctk.pipeline.run(config, Where(...), Options(...))``."""

from .stages import Options, Outcome, Where, resume, run, sweep_cell

__all__ = ["Options", "Outcome", "Where", "resume", "run", "sweep_cell"]
