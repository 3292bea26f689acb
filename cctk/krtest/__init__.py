"""KR-Test: a corpus-grounded knowledge-retention test (seed 003, "Beyond Perplexity"; SPEC section 6).

Three folders, one module per stage, each folder's docstring naming its modules: ``generation/`` (items made: the
seeded fictional set, or items from the user's corpus by a teacher LLM, checked and journaled, and the paper's
oracle), ``measurement/`` (items read and scored, adapters at a budget, fine-tuning, ``KRTestCallback``, the files)
and ``commands/`` (the commands tracked in MLflow, and ``cctk compare --runs`` on KR-Test runs). Its command line is
``cctk.cli.krtest``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .measurement.callback import KRTestCallback

# tag cctk.kind of KR-Test runs: one that scores items (an eval, a train, a study's arm), a study, a seed sweep
RUN, STUDY_RUN, SWEEP_RUN = "krtest", "krtest-study", "krtest-sweep"

ARMS: dict[str, str] = {  # the study's arms: internal key -> the plain name every file, figure, table and run shows
    "blind": "blind baseline",
    "open_book": "open-book baseline",
    "full": "full fine-tuning",
    "lora_attention": "LoRA on attention",
    "lora_ffn": "LoRA on FFN",
}


def __getattr__(name: str) -> type[KRTestCallback]:
    # ``cctk.krtest.KRTestCallback`` without loading transformers when the package is only imported (the CLI)
    if name == "KRTestCallback":
        from .measurement.callback import KRTestCallback

        return KRTestCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
