"""``KRTestCallback``: KR-Test as a monitor inside anyone's Hugging Face ``Trainer.train()``.

    from .. import KRTestCallback
    trainer = Trainer(model, args, train_dataset=..., processing_class=tokenizer,
                      callbacks=[KRTestCallback("questions.jsonl", every=50)])
    trainer.train()                   # kr_* metrics in trainer.state.log_history and every report_to

It scores the questions on the model being trained before the first step, then (``on``) every
``every`` optimizer steps (``"steps"``), after each evaluation of the Trainer (``"evaluate"``) or
both, and after the last step; ``kr_accuracy``, ``kr_lo``, ``kr_hi`` (the exact 95% interval) and
``kr_mean_margin`` go into the Trainer's own logs (``Trainer.log``: ``state.log_history`` and every
``report_to`` integration see them). Where MLflow holds an active run that the Trainer does not
report to itself, they are logged to it as well (step = the Trainer's global step), through
``cctk.store.tracking``, with the question file as a dataset input. Only the main process scores (under
DDP the other ranks return at once: they hold the same weights). ``history`` keeps every point.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import Trainer, TrainerCallback

from ...core.errors import CctkError
from ...store import tracking
from .items import Item, log_questions, read_items
from .scoring import Summary, score, summarize

if TYPE_CHECKING:
    from transformers import (
        PreTrainedModel,
        PreTrainedTokenizerBase,
        TrainerControl,
        TrainerState,
        TrainingArguments,
    )

METRICS = ("kr_accuracy", "kr_lo", "kr_hi", "kr_mean_margin")
WHEN = ("steps", "evaluate", "both")


class KRTestCallback(TrainerCallback):
    """Score KR-Test during a ``transformers.Trainer`` run and add it to the Trainer's logs."""

    def __init__(
        self,
        questions: str | Path | list[Item],
        every: int = 50,
        tokenizer: PreTrainedTokenizerBase | None = None,
        on: str = "steps",
    ) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise CctkError(f"every={every!r} is out of range: a number of optimizer steps >= 1")
        if on not in WHEN:
            raise CctkError(f"on={on!r}: choose one of {', '.join(WHEN)}")
        self.source = str(questions) if isinstance(questions, (str, Path)) else "items"
        self.items = read_items(Path(questions)) if isinstance(questions, (str, Path)) else list(questions)
        if not self.items:
            raise CctkError("KRTestCallback needs at least one item")
        self.every, self.tokenizer, self.on = every, tokenizer, on
        self.history: list[tuple[int, Summary]] = []
        self.trainer: Trainer | None = None
        self._run: tracking.LiveRun | None = None

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: PreTrainedModel | None = None,
        processing_class: PreTrainedTokenizerBase | None = None,
        **kwargs: Any,  # the Trainer's other objects (optimizer, dataloaders, ...): whatever it holds
    ) -> None:
        if not state.is_world_process_zero:
            return
        self.tokenizer = self.tokenizer or processing_class or kwargs.get("tokenizer")
        if self.tokenizer is None:
            raise CctkError(
                "KRTestCallback needs the tokenizer: give it (tokenizer=...) or the Trainer's processing_class"
            )
        self.trainer = self.trainer or _calling_trainer()
        self._run = None if _reports_to_mlflow(self.trainer) else tracking.active_run()
        if self._run is not None:
            log_questions(self._run, self.items, self.source)
        self._score(model, state)

    def on_step_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: PreTrainedModel | None = None,
        **kwargs: Any,
    ) -> None:
        if self.on != "evaluate" and state.global_step % self.every == 0:
            self._score(model, state)

    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: PreTrainedModel | None = None,
        **kwargs: Any,
    ) -> None:
        if self.on != "steps":
            self._score(model, state)

    def on_train_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: PreTrainedModel | None = None,
        **kwargs: Any,
    ) -> None:
        self._score(model, state)

    def _score(self, model: PreTrainedModel | None, state: TrainerState) -> None:
        """Score once per step, on the main process only; into the Trainer's logs (and MLflow's run)."""
        if not state.is_world_process_zero or (self.history and self.history[-1][0] == state.global_step):
            return
        # on the main process the Trainer passes its model to every event, and on_train_begin set the tokenizer
        assert model is not None and self.tokenizer is not None, "the Trainer's model and tokenizer"
        summary = summarize(score(model, self.tokenizer, self.items))  # eval mode inside, training mode restored
        self.history.append((state.global_step, summary))
        values = dict(zip(METRICS, (summary.accuracy, summary.lo, summary.hi, summary.mean_margin), strict=True))
        if self.trainer is not None:
            pending = self.trainer.control.should_log  # the Trainer's own log of this step (its loss), still to come
            self.trainer.log(dict(values))
            self.trainer.control.should_log = pending  # Trainer.log's on_log clears it: that log would be lost
        if self._run is not None:
            self._run.metrics(values, step=state.global_step)


def _calling_trainer() -> Trainer | None:
    """The Trainer whose event called us: Hugging Face passes callbacks no reference to it, and only
    ``Trainer.log`` reaches both ``state.log_history`` and every reporting integration."""
    frame = inspect.currentframe()
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Trainer):
            return candidate
        frame = frame.f_back
    return None


def _reports_to_mlflow(trainer: Trainer | None) -> bool:
    """The Trainer's own MLflow integration logs what ``Trainer.log`` gets: no second copy from us."""
    if trainer is None:
        return False
    return any(type(c).__name__ == "MLflowCallback" for c in trainer.callback_handler.callbacks)
