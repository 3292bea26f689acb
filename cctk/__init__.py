"""cctk: what a small causal language model takes from the text it is fine-tuned on."""
from .models import load_model
from .scoring import measure

__version__ = "0.1.0"
__all__ = ["load_model", "measure", "__version__"]
