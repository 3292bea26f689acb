"""Manual 2.0.0's own chart types (its section 7), DataFrames in, figures out: the probability profile, the deviation
chart, the synthesis chart, learning curves, and across runs the cross-model, recipe and implausibility charts and
the forest plot. The chart types both manuals draw (heatmap, before/after bars, loss) are cctk's (``cctk.figures``)."""

from .curves import learning_curves
from .deviation import deviation_chart
from .profile import probability_profile
from .synthesis import synthesis_chart

__all__ = ["deviation_chart", "learning_curves", "probability_profile", "synthesis_chart"]
