"""cctk: what a small causal language model takes from the text it is fine-tuned on.

``load_model`` and ``measure`` are imported on first use, so that the torch-free layers
(statistics, experiments, figures, outputs, results) never load torch.
"""

__version__ = "0.1.0"
__all__ = ["__version__", "load_model", "measure"]


def __getattr__(name: str):
    if name == "load_model":
        from .core.lm.models import load_model

        return load_model
    if name == "measure":
        from .core.lm.scoring import measure

        return measure
    raise AttributeError(f"module 'cctk' has no attribute {name!r}")
