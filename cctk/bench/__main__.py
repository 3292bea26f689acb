"""``python -m cctk.bench measure | train | pipeline | absorb | figures | exit | paper | gpu | server``."""

from .cli import bench

bench()
