"""Speed benchmarks, as ratios measured in one process (``python -m cctk.bench``; docs/speed.md): a module per
command, ``cli.bench`` the click group of them all.
"""

from .cli import bench

__all__ = ["bench"]
