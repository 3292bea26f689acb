"""The chart types every manual draws, DataFrames in, figures out: the target heatmap (``cctk measure``'s too), the
before/after bars of manual 1.0.0's style, the training-loss chart; their two styles (report, paper) and
save_figure. A manual's own chart types are in its folder (2.0.0's: its ``charts`` package)."""

from .bars import before_after_bars
from .common import save_figure, warm_up
from .heatmap import target_heatmap
from .loss import loss_chart

__all__ = ["before_after_bars", "loss_chart", "save_figure", "target_heatmap", "warm_up"]
