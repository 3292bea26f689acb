"""Speed benchmarks, as ratios measured in one process (``python -m cctk.bench``; docs/speed.md).

``measure``: the plain loop against ``measure``; ``train``: ``fine_tune`` against a plain loop and the
compute limit; ``pipeline``: a whole ``cctk run`` against the compute limit of its training;
``absorb``: the Part A arms of a recipe per seed; ``gpu``: the first contact with a device.
``cli.bench`` is the click group of all five.
"""
from .cli import bench

__all__ = ["bench"]
