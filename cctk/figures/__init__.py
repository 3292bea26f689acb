"""Charts: DataFrames in, figures out (manual 2.0.0, section 7); save_figure writes them."""

from .bars import before_after_bars
from .common import save_figure
from .curves import learning_curves
from .deviation import deviation_chart
from .heatmap import target_heatmap
from .loss import loss_chart
from .profile import probability_profile
from .synthesis import synthesis_chart

__all__ = [
    "before_after_bars",
    "deviation_chart",
    "learning_curves",
    "loss_chart",
    "probability_profile",
    "save_figure",
    "synthesis_chart",
    "target_heatmap",
]
