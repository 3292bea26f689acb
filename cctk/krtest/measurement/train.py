"""Causal-LM fine-tuning on a corpus, with KR accuracy and validation perplexity every K steps.

The corpus is cut into its passages (blank lines), each passage one training row (longer ones in
chunks of ``max_tokens``), encoded as KR-Test encodes a context, the loss on every token. Training
is ``cctk.core.lm.finetune.fine_tune`` (AdamW in float32, seeded batch order, the recipe's schedule, a stop on
a non-finite loss), on the whole model or on LoRA adapters (``cctk.krtest.measurement.lora``). Every arm uses
the same batch order for one seed, so arms differ only in what they train.

The model is evaluated at step 0, every ``eval_every`` optimizer steps and at the last step; each
evaluation goes to ``on_eval`` as it happens (the caller logs it), and the last one's item table
is the result's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import pandas as pd
import torch
import torch.nn.functional as F

from ...core.config import Recipe, check_seeds
from ...core.errors import CctkError
from ...core.lm.corpus import IGNORE, Row, collate
from ...core.lm.finetune import fine_tune
from ...core.lm.record import TrainRecord
from ...core.lm.scoring import LOGIT_BUDGET, encode, evaluating, pad_id, vocab_size
from .items import Item, passages
from .lora import DEFAULT_BUDGET, LoraPlan, attach_lora, check_budget, plan_lora, trainable_count
from .scoring import Summary, score, summarize

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

METHODS = ("full", "lora")
RECIPES = {  # measured on the bundled model and the default data set (docs/krtest.md)
    "full": Recipe(repeats=1, epochs=6, learning_rate=6e-4, batch_size=4, schedule="linear", warmup=0.1),
    "lora": Recipe(repeats=1, epochs=6, learning_rate=3e-3, batch_size=4, schedule="linear", warmup=0.1),
}
CURVE_COLUMNS = ["step", "kr_accuracy", "kr_lo", "kr_hi", "kr_mean_margin", "val_perplexity", "train_loss"]


@dataclass(frozen=True)
class TrainConfig:
    method: str = "full"  # "full" or "lora"
    modules: str | None = None  # LoRA only: "attention" or "ffn"
    budget: int = DEFAULT_BUDGET  # LoRA only: trainable parameters aimed at
    rank: int | None = None  # LoRA only: this rank (the study's matched pair); None: the closest to the budget
    eval_every: int = 9  # optimizer steps between evaluations
    recipe: Recipe = RECIPES["full"]
    seed: int = 0
    max_tokens: int = 256  # longest training row; longer passages are cut

    def check(self) -> None:
        """Fail in one line on a value out of range, before any work starts."""
        if self.method not in METHODS:
            raise CctkError(f"unknown method {self.method!r}; choose one of: {', '.join(METHODS)}")
        if self.method == "lora" and self.modules not in ("attention", "ffn"):
            raise CctkError(
                "--method lora needs --modules, the LoRA placement: attention or ffn"
                if self.modules is None
                else f"LoRA needs --modules attention or ffn, got {self.modules!r}"
            )
        if self.method == "full" and self.modules is not None:
            raise CctkError("--modules is for --method lora; full fine-tuning trains every module")
        check_budget(self.budget)
        if self.eval_every < 1:
            raise CctkError(f"eval_every={self.eval_every} is out of range: must be >= 1")
        if self.max_tokens < 2:
            raise CctkError(f"max_tokens={self.max_tokens} is out of range: must be >= 2")
        check_seeds((self.seed,))
        self.recipe.check()

    def params(self) -> dict[str, Any]:
        """Flat values for MLflow (recipe values as ``recipe.<name>``, ``repeats`` left out: unused)."""
        values = {
            "method": self.method,
            "modules": self.modules or "all",
            "eval_every": self.eval_every,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
        }
        if self.method == "lora":
            values["budget"] = self.budget
            if self.rank is not None:
                values["rank"] = self.rank
        values.update({f"recipe.{k}": v for k, v in asdict(self.recipe).items() if k != "repeats"})
        return values


def make_train_config(method: str = "full", modules: str | None = None, seed: int = 0, **values: Any) -> TrainConfig:
    """A checked configuration: the method's recipe, with recipe values and the rest overridden (None = keep)."""
    recipe_names = set(asdict(Recipe())) - {"repeats"}
    overrides = {k: v for k, v in values.items() if v is not None}
    recipe = replace(RECIPES.get(method, RECIPES["full"]), **{k: v for k, v in overrides.items() if k in recipe_names})
    rest = {k: v for k, v in overrides.items() if k not in recipe_names}
    config = TrainConfig(method=method, modules=modules, recipe=recipe, seed=seed, **rest)
    config.check()
    return config


@dataclass(frozen=True)
class Evaluation:
    """One point of a curve: KR-Test and validation perplexity after ``step`` optimizer steps."""

    step: int
    summary: Summary
    val_perplexity: float
    train_loss: float  # of the step's batch; nan at step 0
    items: pd.DataFrame = field(repr=False, compare=False)

    def record(self) -> dict[str, float]:
        s = self.summary
        return {
            "step": self.step,
            "kr_accuracy": s.accuracy,
            "kr_lo": s.lo,
            "kr_hi": s.hi,
            "kr_mean_margin": s.mean_margin,
            "val_perplexity": self.val_perplexity,
            "train_loss": self.train_loss,
        }


@dataclass(frozen=True)
class Trained:
    config: TrainConfig
    plan: LoraPlan | None
    trainable: int  # parameters that trained
    evaluations: tuple[Evaluation, ...]
    result: TrainRecord
    eval_seconds: float

    @property
    def final(self) -> Evaluation:
        return self.evaluations[-1]

    def curve(self) -> pd.DataFrame:
        return pd.DataFrame([e.record() for e in self.evaluations], columns=CURVE_COLUMNS)

    @property
    def train_seconds(self) -> float:
        """Time in optimizer steps, evaluations taken out."""
        return self.result.train_seconds - self.eval_seconds


def corpus_rows(text: str, tokenizer: PreTrainedTokenizerBase, max_tokens: int) -> list[Row]:
    """(input_ids, labels) per passage chunk, labels = input_ids: the loss on every token."""
    rows = []
    for passage in passages(text):
        ids = encode(tokenizer, passage, special=True)
        rows += [
            (ids[i : i + max_tokens], ids[i : i + max_tokens])
            for i in range(0, len(ids), max_tokens)
            if len(ids[i : i + max_tokens]) > 1
        ]
    if not rows:
        raise CctkError("the corpus has no passage of two tokens or more")
    return rows


# Logit budgets ``perplexity`` holds at once: the logits, the flattened copy of their shifted view and its
# log-softmax (2.94x measured on the CPU: tests/krtest/measurement/test_kr_train.py); the memory plan's figure.
PERPLEXITY_LOGIT_COPIES = 3


@torch.inference_mode()
def perplexity(model: PreTrainedModel, rows: Sequence[Row], pad_id: int) -> float:
    """exp of the mean negative log-likelihood per predicted token of ``rows``.

    Rows go through in chunks whose logits fit ``LOGIT_BUDGET``, as ``measure`` sizes its passes (and
    ``cctk.core.lm.memory`` plans for), and the device is read once, at the end.
    """
    device = next(model.parameters()).device
    longest = max(len(ids) for ids, _ in rows)
    chunk = max(1, LOGIT_BUDGET // (longest * vocab_size(model)))
    sums, count = [], 0
    with evaluating(model):
        for i in range(0, len(rows), chunk):
            batch = collate(rows[i : i + chunk], pad_id)
            logits = model(
                input_ids=batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
                use_cache=False,
            ).logits  # (B, L, V)
            targets = batch["labels"][:, 1:]  # token t+1 is predicted at column t
            count += int((targets != IGNORE).sum())  # on the host, before the move
            loss = F.cross_entropy(
                logits[:, :-1].float().flatten(0, 1), targets.to(device).flatten(), ignore_index=IGNORE, reduction="sum"
            )
            sums.append(loss)
    return math.exp(sum(torch.stack(sums).cpu().double().tolist()) / count)


def read_losses(losses: Sequence[float | torch.Tensor]) -> list[float]:
    """Step losses as floats: the host step's as they are, the device step's tensors in one read."""
    if all(isinstance(loss, float) for loss in losses):
        return cast("list[float]", list(losses))
    # else the device step's (fine_tune gives one kind in a run): mypy narrows no sequence through all()
    return torch.stack(cast("list[torch.Tensor]", list(losses))).cpu().double().tolist()


def train(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    items: Sequence[Item],
    corpus: str,
    validation: str,
    config: TrainConfig,
    on_eval: Callable[[Evaluation], None] | None = None,
    on_loss: Callable[[int, float], None] | None = None,
    untouched: Evaluation | None = None,
    cut: tuple[list[Row], list[Row]] | None = None,
) -> Trained:
    """Fine-tune ``model`` in place (LoRA: adapters added to it) and evaluate it along the way.

    ``cut``: the corpus's and the validation text's rows where the caller has cut them already, as
    ``corpus_rows`` cuts them at ``config.max_tokens`` in ``tokenizer``'s tokens (its memory plan's, a study's
    for every arm): not cut again (a large corpus takes seconds); None: cut here.

    ``untouched``: step 0's point where the caller has already evaluated the untouched model on the same items
    and validation rows (a study's blind arm): it is step 0 as it is, not computed again. A LoRA arm's step 0
    is the untouched model's too: its adapters' B starts at zero (tests/krtest/measurement/test_kr_train.py).
    """
    if untouched is not None and untouched.step != 0:
        raise ValueError(f"the untouched model's evaluation is step 0, not step {untouched.step}")
    pad = pad_id(tokenizer)
    if cut is None:
        cut = corpus_rows(corpus, tokenizer, config.max_tokens), corpus_rows(validation, tokenizer, config.max_tokens)
    rows, val_rows = cut
    plan = plan_lora(model, config.modules, config.budget, config.rank) if config.method == "lora" else None
    # PEFT types its base model as a Module: it is ``model`` itself, its target modules adapted in place
    net = cast("PreTrainedModel", attach_lora(model, plan, config.seed).get_base_model()) if plan else model
    total = config.recipe.steps(len(rows))
    evaluations, eval_seconds = [], [0.0]

    def evaluate(step: int, loss: float) -> None:
        start = time.perf_counter()
        table = score(net, tokenizer, items)
        point = Evaluation(step, summarize(table), perplexity(net, val_rows, pad), loss, table)
        eval_seconds[0] += time.perf_counter() - start if step else 0.0  # step 0 is outside the training clock
        evaluations.append(point)
        if on_eval:
            on_eval(point)

    pending: list[tuple[int, float | torch.Tensor]] = []  # (step, loss) not handed to on_loss yet

    def on_step(epoch: int, step: int, loss: float | torch.Tensor) -> None:
        pending.append((step, loss))
        if step % config.eval_every == 0 or step == total:  # an evaluation waits for the device anyway
            losses = read_losses([loss for _, loss in pending])
            for (done, _), value in zip(pending, losses, strict=True):
                if on_loss:
                    on_loss(done, value)
            pending.clear()
            evaluate(step, losses[-1])

    if untouched is None:
        evaluate(0, math.nan)
    else:
        evaluations.append(untouched)
        if on_eval:
            on_eval(untouched)
    result = fine_tune(net, rows, config.recipe, config.seed, pad, name="krtest", on_step=on_step)
    return Trained(config, plan, trainable_count(net), tuple(evaluations), result, eval_seconds[0])
