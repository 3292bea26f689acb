"""LoRA on the attention or the FFN blocks of a decoder, at a budget of trainable parameters.

The blocks are found from the model's structure, not from its name: the decoder layers are the
``ModuleList`` with one entry per hidden layer; in each layer, the child whose name or class says
attention (``self_attn``, ``attention``, ...) holds the attention projections, the child that says
MLP / FFN holds the feed-forward ones. So Llama and Qwen2 give q, k, v, o_proj / gate, up,
down_proj; GPT-NeoX query_key_value, dense / dense_h_to_4h, dense_4h_to_h; Phi q, k, v_proj, dense /
fc1, fc2.

LoRA of rank r on a linear map of ``in -> out`` trains ``r * (in + out)`` parameters (A: r x in,
B: out x r), so a placement trains ``r * width`` with ``width`` the sum of ``in + out`` over its
modules, and the rank closest to the budget is found by rounding ``budget / width``.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn

from ..errors import CctkError
from ..facts import rng

PLACEMENTS = ("attention", "ffn")
from . import DEFAULT_BUDGET  # noqa: F401 (re-exported)
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


def find_blocks(model) -> dict[str, tuple[str, ...]]:
    """Full names of the linear modules of every decoder layer's attention and FFN blocks."""
    prefix, layers = decoder_layers(model)
    found: dict[str, list[str]] = {p: [] for p in PLACEMENTS}
    for i, layer in enumerate(layers):
        for child_name, child in layer.named_children():
            placement = _placement(child_name, child)
            if placement:
                found[placement] += [f"{prefix}.{i}.{child_name}.{n}" for n, m in child.named_modules()
                                     if _is_linear(m)]
    if not all(found.values()):
        children = ", ".join(n for n, _ in layers[0].named_children())
        raise CctkError(f"cannot tell the attention block from the FFN block in the layers of "
                        f"{type(model).__name__} (children of a layer: {children})")
    return {p: tuple(names) for p, names in found.items()}


def decoder_layers(model) -> tuple[str, nn.ModuleList]:
    """The first ``ModuleList`` with one entry per hidden layer, each holding linear modules."""
    n_layers = getattr(model.config, "num_hidden_layers", None)
    for name, module in model.named_modules():
        if (isinstance(module, nn.ModuleList) and len(module) == n_layers
                and any(_is_linear(m) for m in module[0].modules())):
            return name, module
    raise CctkError(f"cannot find the decoder layers of {type(model).__name__} "
                    f"(no ModuleList of num_hidden_layers={n_layers} blocks)")


def _placement(name: str, module: nn.Module) -> str | None:
    if not any(_is_linear(m) for m in module.modules()):
        return None
    words = f"{name} {type(module).__name__}".lower()
    hits = [p for p in PLACEMENTS if any(w in words for w in WORDS[p])]
    return hits[0] if len(hits) == 1 else None


def _is_linear(module: nn.Module) -> bool:
    return isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D"  # GPT-2 style Conv1D too


def _in_out(module: nn.Module) -> tuple[int, int]:
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    return module.weight.shape[0], module.weight.shape[1]  # Conv1D stores (in, out)


def plan_lora(model, modules: str, budget: int) -> LoraPlan:
    """The rank whose trainable count ``rank * width`` is closest to ``budget`` (rank >= 1)."""
    if modules not in PLACEMENTS:
        raise CctkError(f"unknown LoRA placement {modules!r}; choose one of: {', '.join(PLACEMENTS)}")
    check_budget(budget)
    targets = find_blocks(model)[modules]
    named = dict(model.named_modules())
    width = sum(sum(_in_out(named[t])) for t in targets)
    return LoraPlan(modules, targets, width, budget, closest_rank(width, budget))


def check_budget(budget: int) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise CctkError(f"budget={budget!r} is out of range: a number of trainable parameters >= 1")


def closest_rank(width: int, budget: int) -> int:
    """The integer r >= 1 minimising |r * width - budget|; the smaller rank on a tie."""
    low = max(1, budget // width)
    return min((low, low + 1), key=lambda r: (abs(r * width - budget), r))


def attach_lora(model, plan: LoraPlan, seed: int):
    """``model`` with PEFT LoRA adapters on ``plan.targets`` (alpha = 2 * rank, no dropout), only they trainable.

    B starts at zero, so the adapted model computes what the model did; A is drawn from ``seed``.
    The trainable count is checked against PEFT's own.
    """
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(int(rng(seed, f"lora:{plan.modules}").integers(2**63)))
    config = LoraConfig(r=plan.rank, lora_alpha=2 * plan.rank, lora_dropout=0.0, bias="none",
                        target_modules=list(plan.targets), task_type="CAUSAL_LM")
    with warnings.catch_warnings():  # PEFT calls a Transformers method deprecated for v6
        warnings.simplefilter("ignore", FutureWarning)
        adapted = get_peft_model(model, config)
    trainable, _ = adapted.get_nb_trainable_parameters()
    if trainable != plan.trainable:
        raise RuntimeError(f"PEFT trains {trainable} parameters, the plan says {plan.trainable}")
    return adapted


def trainable_count(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
