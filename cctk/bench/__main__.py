"""``python -m cctk.bench measure | train | pipeline | absorb | figures | gpu | server``."""

from .cli import bench

bench()
