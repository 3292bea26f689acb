"""``python -m cctk.bench measure | train | pipeline | absorb | gpu``."""

from .cli import bench

bench()
