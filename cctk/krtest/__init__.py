"""KR-Test: a corpus-grounded knowledge-retention test (seed 003, "Beyond Perplexity"; SPEC section 6).

Three folders, one module per stage: ``generation/`` (items made: ``generate``, a seeded fictional corpus and its
questions; ``corpora``, a user's file, folder or JSONL as documents and passages; ``teacher``, ``validate``,
``journal`` and ``from_corpus``, items from the user's corpus written by a teacher LLM, checked and journaled;
``oracle``, the paper's Golden Standard check, and ``gate``, that check as the second gate of a generation),
``measurement/`` (``items``, the JSONL question files; ``passages``, a corpus cut into passages, locations as
character offsets or line indices; ``scoring``, the likelihood rule, through ``cctk.core.lm.scoring.score_forest``;
``lora``, adapters at a parameter budget, the two placements matched; ``train``, fine-tuning with periodic KR and
perplexity evaluations; ``callback``, ``KRTestCallback`` for any HF ``Trainer``; ``report``, files, figure and
table) and ``commands/`` (``jobs``, ``study`` and ``seeds``, the commands tracked in MLflow; ``compare``, KR-Test
runs compared: ``cctk compare --runs``). Its command line is ``cctk.cli.krtest``.
"""

# tag cctk.kind of KR-Test runs: one that scores items (an eval, a train, a study's arm), a study, a seed sweep
RUN, STUDY_RUN, SWEEP_RUN = "krtest", "krtest-study", "krtest-sweep"

ARMS: dict[str, str] = {  # the study's arms: internal key -> the plain name every file, figure, table and run shows
    "blind": "blind baseline",
    "open_book": "open-book baseline",
    "full": "full fine-tuning",
    "lora_attention": "LoRA on attention",
    "lora_ffn": "LoRA on FFN",
}


def __getattr__(name: str):
    # ``cctk.krtest.KRTestCallback`` without loading transformers when the package is only imported (the CLI)
    if name == "KRTestCallback":
        from .measurement.callback import KRTestCallback

        return KRTestCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
