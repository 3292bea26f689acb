"""``KRTestCallback``: KR-Test as a monitor inside anyone's Hugging Face ``Trainer.train()``.

    from cctk.krtest import KRTestCallback
    trainer = Trainer(model, args, train_dataset=..., processing_class=tokenizer,
                      callbacks=[KRTestCallback("questions.jsonl", every=50)])
    with mlflow.start_run():          # or TrainingArguments(report_to="mlflow")
        trainer.train()

It scores the questions on the model being trained before the first step, every ``every`` optimizer
steps and after the last one, and logs ``kr_accuracy``, ``kr_lo``, ``kr_hi`` (the exact 95%
interval) and ``kr_mean_margin`` to the active MLflow run (step = the Trainer's global step), through
``cctk.tracking``; the question file goes in as a dataset input of that run. ``history`` keeps every
point. With no active run it fails at the start of training, in one line, rather than log nowhere.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from transformers import TrainerCallback

from .. import tracking
from ..errors import CctkError
from .items import Item, read_items
from .scoring import Summary, score, summarize

METRICS = ("kr_accuracy", "kr_lo", "kr_hi", "kr_mean_margin")


class KRTestCallback(TrainerCallback):
    """Score KR-Test every ``every`` optimizer steps of a ``transformers.Trainer`` and log it to MLflow."""

    def __init__(self, questions: str | Path | list[Item], every: int = 50, tokenizer=None):
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise CctkError(f"every={every!r} is out of range: a number of optimizer steps >= 1")
        self.source = str(questions) if isinstance(questions, (str, Path)) else "items"
        self.items = read_items(Path(questions)) if isinstance(questions, (str, Path)) else list(questions)
        if not self.items:
            raise CctkError("KRTestCallback needs at least one item")
        self.every, self.tokenizer = every, tokenizer
        self.history: list[tuple[int, Summary]] = []
        self._run = None

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        self._run = tracking.active_run()
        if self._run is None:
            raise CctkError("KRTestCallback logs to the active MLflow run, and there is none: train inside "
                            "`with mlflow.start_run():` or with TrainingArguments(report_to='mlflow')")
        self.tokenizer = self.tokenizer or processing_class or kwargs.get("tokenizer")
        if self.tokenizer is None:
            raise CctkError("KRTestCallback needs the tokenizer: give it (tokenizer=...) or the Trainer's "
                            "processing_class")
        questions = pd.DataFrame([{"context": i.context, "sentence_true": i.sentence_true,
                                   "sentence_false": i.sentence_false, "location": i.location} for i in self.items])
        self._run.dataset(questions, f"kr questions {Path(self.source).stem}", self.source, context="evaluation")
        self._score(model, state.global_step)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every == 0:
            self._score(model, state.global_step)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if not self.history or self.history[-1][0] != state.global_step:
            self._score(model, state.global_step)

    def _score(self, model, step: int) -> None:
        summary = summarize(score(model, self.tokenizer, self.items))  # eval mode inside, training mode restored
        self.history.append((step, summary))
        self._run.metrics(dict(zip(METRICS, (summary.accuracy, summary.lo, summary.hi, summary.mean_margin))),
                          step=step)
