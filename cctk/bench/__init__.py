"""Speed benchmarks, as ratios measured in one process (``python -m cctk.bench``; docs/speed.md).

``measure``: the plain loop against ``measure``; ``train``: ``fine_tune`` against a plain loop and the
compute limit; ``pipeline``: a whole ``cctk run`` against the compute limit of its training;
``absorb``: the Part A arms of a recipe per seed; ``figures``: a heatmap's save with the EPS font box kept
against matplotlib's own; ``gpu``: the first contact with a device. ``cli.bench`` is the click group of all six.
"""

from .cli import bench

__all__ = ["bench"]
