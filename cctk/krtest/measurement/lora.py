"""LoRA on the attention or the FFN blocks of a decoder, at a budget of trainable parameters.

The blocks are found from the model's structure, not from its name: the decoder layers are the
``ModuleList`` with one entry per hidden layer; in each layer, the child whose name or class says
attention (``self_attn``, ``attention``, ...) holds the attention projections, the child that says
MLP / FFN holds the feed-forward ones. So Llama and Qwen2 give q, k, v, o_proj / gate, up,
down_proj; GPT-NeoX query_key_value, dense / dense_h_to_4h, dense_4h_to_h; Phi q, k, v_proj, dense /
fc1, fc2.

LoRA of rank r on a linear map of ``in -> out`` trains ``r * (in + out)`` parameters (A: r x in,
B: out x r), so a placement trains ``r * width`` with ``width`` the sum of ``in + out`` over its
modules, and the rank closest to the budget is found by rounding ``budget / width``; a placement planned
alone takes its rank in the pair below, so the two placements trained apart match as the study's arms do.

Two placements rarely reach one budget exactly (their widths differ: on Llama-3.2-1B the closest
ranks, 18 on attention and 8 on the FFN, train 3,833,856 and 3,932,160 parameters, 2.6% apart).
``plan_pair`` plans both; when their counts differ by more than ``MATCH`` (1%), it searches the
pairs of ranks whose counts both lie within ``NEAR`` (25%) of the budget for the smallest difference
(then the closest to the budget), and says so.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ...core.errors import CctkError
from ...core.facts import rng

if TYPE_CHECKING:
    from peft import PeftModel
    from torch import nn
    from transformers import PreTrainedModel

# LoRA trainable parameters aimed at by default: on SmolLM2-135M both placements reach it exactly
# (attention rank 33, FFN rank 20). torch is imported where a model is walked, so that the CLI shows this
# default without loading it.
DEFAULT_BUDGET = 3_801_600

PLACEMENTS = ("attention", "ffn")

WORDS = {"attention": ("attn", "attention"), "ffn": ("mlp", "ffn", "feed_forward", "feedforward")}


@dataclass(frozen=True)
class LoraPlan:
    modules: str  # "attention" or "ffn"
    targets: tuple[str, ...]  # full names of the linear modules that get an adapter
    width: int  # sum of (in + out) over the targets: trainable parameters per unit of rank
    budget: int
    rank: int

    @property
    def trainable(self) -> int:
        return self.rank * self.width

    def kinds(self) -> str:
        """The targets' short names, in layer order: ``q_proj,k_proj,v_proj,o_proj``."""
        return ",".join(dict.fromkeys(name.rsplit(".", 1)[-1] for name in self.targets))


def find_blocks(model: PreTrainedModel) -> dict[str, tuple[str, ...]]:
    """Full names of the linear modules of every decoder layer's attention and FFN blocks."""
    prefix, layers = decoder_layers(model)
    found: dict[str, list[str]] = {p: [] for p in PLACEMENTS}
    for i, layer in enumerate(layers):
        for child_name, child in layer.named_children():
            placement = _placement(child_name, child)
            if placement:
                found[placement] += [
                    f"{prefix}.{i}.{child_name}.{n}" for n, m in child.named_modules() if _is_linear(m)
                ]
    if not all(found.values()):
        children = ", ".join(n for n, _ in layers[0].named_children())
        raise CctkError(
            f"cannot tell the attention block from the FFN block in the layers of "
            f"{type(model).__name__} (children of a layer: {children})"
        )
    return {p: tuple(names) for p, names in found.items()}


def decoder_layers(model: PreTrainedModel) -> tuple[str, nn.ModuleList]:
    """The first ``ModuleList`` with one entry per hidden layer, each holding linear modules."""
    from torch import nn

    n_layers = getattr(model.config, "num_hidden_layers", None)
    for name, module in model.named_modules():
        if (
            isinstance(module, nn.ModuleList)
            and len(module) == n_layers
            and any(_is_linear(m) for m in module[0].modules())
        ):
            return name, module
    raise CctkError(
        f"cannot find the decoder layers of {type(model).__name__} "
        f"(no ModuleList of num_hidden_layers={n_layers} blocks)"
    )


def _placement(name: str, module: nn.Module) -> str | None:
    if not any(_is_linear(m) for m in module.modules()):
        return None
    words = f"{name} {type(module).__name__}".lower()
    hits = [p for p in PLACEMENTS if any(w in words for w in WORDS[p])]
    return hits[0] if len(hits) == 1 else None


def _is_linear(module: nn.Module) -> bool:
    from torch import nn

    return isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D"  # GPT-2 style Conv1D too


def _in_out(module: nn.Module) -> tuple[int, int]:
    import torch
    from torch import nn

    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    weight = module.weight
    assert isinstance(weight, torch.Tensor), type(weight)  # _is_linear: a Conv1D, whose weight is a Parameter
    return weight.shape[0], weight.shape[1]  # Conv1D stores (in, out)


def plan_lora(model: PreTrainedModel, modules: str | None, budget: int, rank: int | None = None) -> LoraPlan:
    """``rank`` on the placement's modules; None: the placement's rank in the pair at ``budget`` (``plan_pair``),
    so that an attention arm and an FFN arm trained apart (``cctk krtest train``, once each) train as many
    parameters as the study's two arms do. ``modules`` as a configuration holds it: None (no placement named)
    fails in one line as an unknown one."""
    if modules is None:
        raise CctkError(f"--method lora needs --modules, the LoRA placement: {' or '.join(PLACEMENTS)}")
    if modules not in PLACEMENTS:
        raise CctkError(f"unknown LoRA placement {modules!r}; choose one of: {', '.join(PLACEMENTS)}")
    check_budget(budget)
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        raise CctkError(f"LoRA rank={rank!r} is out of range: must be an integer >= 1")
    if rank is None:
        paired: LoraPlan = getattr(plan_pair(model, budget), modules)
        return paired
    return _plan(model, modules, budget, rank)


def _plan(model: PreTrainedModel, modules: str, budget: int, rank: int | None) -> LoraPlan:
    """``rank`` (None: the one closest to ``budget`` on its own) on the placement's modules."""
    targets = find_blocks(model)[modules]
    named = dict(model.named_modules())
    width = sum(sum(_in_out(named[t])) for t in targets)
    return LoraPlan(modules, targets, width, budget, rank or closest_rank(width, budget))


MATCH = 0.01  # counts of the two placements further apart than this: search for a closer pair
NEAR = 0.25  # the pairs searched: both counts within this share of the budget


@dataclass(frozen=True)
class PairPlan:
    """The two LoRA arms of the study at one budget, and how far apart their trainable counts are."""

    attention: LoraPlan
    ffn: LoraPlan
    closest: tuple[int, int]  # each placement's rank closest to the budget on its own
    searched: bool  # True when the closest ranks differed by more than MATCH and the pair was searched

    @property
    def difference(self) -> float:
        """|a - b| / min(a, b) of the two trainable counts."""
        return relative_difference(self.attention.trainable, self.ffn.trainable)

    def line(self) -> str:
        text = (
            f"LoRA at a budget of {self.attention.budget:,}: attention rank {self.attention.rank} trains "
            f"{self.attention.trainable:,}, FFN rank {self.ffn.rank} trains {self.ffn.trainable:,} parameters, "
            f"{100 * self.difference:.2f}% apart"
        )
        if self.searched:
            a, f = self.closest
            text += (
                f" (the ranks closest to the budget, {a} and {f}, were "
                f"{100 * relative_difference(a * self.attention.width, f * self.ffn.width):.2f}% apart, more than "
                f"{100 * MATCH:.0f}%: chose the closest pair within {100 * NEAR:.0f}% of the budget, "
                f"{self._from_budget()})"
            )
        return text

    def _from_budget(self) -> str:
        """How far the pair's counts lie from the budget: ``2.1% and 0.3% over it``."""
        budget = self.attention.budget
        parts = [
            f"{100 * abs(plan.trainable - budget) / budget:.1f}% {'over' if plan.trainable > budget else 'under'}"
            for plan in (self.attention, self.ffn)
        ]
        return f"{parts[0]} and {parts[1]} it"


def relative_difference(a: int, b: int) -> float:
    return abs(a - b) / min(a, b)


def plan_pair(model: PreTrainedModel, budget: int) -> PairPlan:
    """Both placements at ``budget``, their counts matched within ``MATCH`` where the ranks allow it."""
    check_budget(budget)
    attention, ffn = _plan(model, "attention", budget, None), _plan(model, "ffn", budget, None)
    closest = (attention.rank, ffn.rank)
    if relative_difference(attention.trainable, ffn.trainable) <= MATCH:
        return PairPlan(attention, ffn, closest, searched=False)
    ranks = matched_ranks(attention.width, ffn.width, budget)
    return PairPlan(replace(attention, rank=ranks[0]), replace(ffn, rank=ranks[1]), closest, searched=True)


def matched_ranks(width_a: int, width_b: int, budget: int) -> tuple[int, int]:
    """The ranks (a, b) whose counts ``a * width_a`` and ``b * width_b`` both lie within ``NEAR`` of ``budget``
    and differ least (relatively), then lie closest to it; the closest ranks when no pair lies that near."""

    def near(width: int) -> list[int]:
        found = [
            r
            for r in range(max(1, int(budget * (1 - NEAR) // width)), int(budget * (1 + NEAR) // width) + 2)
            if abs(r * width - budget) <= NEAR * budget
        ]
        return found or [closest_rank(width, budget)]

    pairs = [(a, b) for a in near(width_a) for b in near(width_b)]
    return min(
        pairs,
        key=lambda p: (
            relative_difference(p[0] * width_a, p[1] * width_b),
            abs(p[0] * width_a + p[1] * width_b - 2 * budget),
            p,
        ),
    )


def check_budget(budget: int) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise CctkError(f"budget={budget!r} is out of range: a number of trainable parameters >= 1")


def closest_rank(width: int, budget: int) -> int:
    """The integer r >= 1 minimising |r * width - budget|; the smaller rank on a tie."""
    low = max(1, budget // width)
    return min((low, low + 1), key=lambda r: (abs(r * width - budget), r))


def attach_lora(model: PreTrainedModel, plan: LoraPlan, seed: int) -> PeftModel:
    """``model`` with PEFT LoRA adapters on ``plan.targets`` (alpha = 2 * rank, no dropout), only they trainable.

    B starts at zero, so the adapted model computes what the model did; A is drawn from ``seed``.
    The trainable count is checked against PEFT's own.
    """
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(int(rng(seed, f"lora:{plan.modules}").integers(2**63)))
    config = LoraConfig(
        r=plan.rank,
        lora_alpha=2 * plan.rank,
        lora_dropout=0.0,
        bias="none",
        target_modules=list(plan.targets),
        task_type="CAUSAL_LM",
    )
    with warnings.catch_warnings():  # PEFT calls a Transformers method deprecated for v6
        warnings.simplefilter("ignore", FutureWarning)
        adapted = get_peft_model(model, config)
    trainable, _ = adapted.get_nb_trainable_parameters()
    if trainable != plan.trainable:
        raise RuntimeError(f"PEFT trains {trainable} parameters, the plan says {plan.trainable}")
    return adapted


def trainable_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
