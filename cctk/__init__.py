"""cctk: what a small causal language model takes from the text it is fine-tuned on.

``load_model`` and ``measure`` are imported on first use, so that the torch-free layers
(statistics, manuals, figures, outputs, results) never load torch.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

    from .core.lm.models import Loaded, load_model as load_model
    from .core.lm.scoring import measure as measure

__version__ = "0.1.0"

# torchao (the 8-bit AdamW's moments; Transformers imports it too, wherever it is installed) logs a warning at
# import for each of its CUDA kernel libraries it cannot load, and torch one for each of torchao's enums it
# registers: cctk uses none of them, and the lines would open every command's output.
for _name in ("torchao", "torch.utils._pytree"):
    logging.getLogger(_name).setLevel(logging.ERROR)
__all__ = ["__version__", "load_model", "measure"]


def __getattr__(name: str) -> Callable[..., Loaded] | Callable[..., pd.DataFrame]:
    if name == "load_model":
        from .core.lm.models import load_model

        return load_model
    if name == "measure":
        from .core.lm.scoring import measure

        return measure
    raise AttributeError(f"module 'cctk' has no attribute {name!r}")
