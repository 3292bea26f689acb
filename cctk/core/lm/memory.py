"""Memory, planned before any work: what a model and a recipe need on a device and in host memory.

The estimate is arithmetic on the architecture (its config, built on the meta device: no weights are
read), in bytes::

    weights          4 P              float32 always (the manual's recipe; autocast leaves them float32)
    gradients        4 P_trained
    optimizer        8 P_trained      AdamW's two float32 moments; adamw8bit: 2.03 P_trained (8-bit codes and a
                                      float32 scale per 256 values, each moment) + 8 x the largest trained tensor
                                      (its compiled update's two new moments in float32, one tensor at a time)
    half copies      2 P_matrices     bf16/fp16 autocast keeps a half copy of each matrix for backward
    activations      T x L x (10 H + 2 G + 5 I) x 4 (2 in half) + L x heads x S x 4 (attention scores)
    logits           5 x K x V x 4    the LM head at the K supervised positions: logits, their rows per example,
                                      log-softmax and two gradients
    workspace        32 MiB           the kernels' scratch of a training step
    measurement      c x LOGIT_BUDGET x 4   the scorer's logits held at once, c = 2 (weights already counted);
                                      KR-Test's chunked perplexity c = 3 (the logits, a flattened copy of them,
                                      their log-softmax: 2.9-3.0x measured, tests/krtest); where a job measures
                                      while it trains (``--curves``, KR-Test's evaluations every K steps),
                                      beside the gradients and the optimizer's moments

A measurement alone (``cctk measure``, ``krtest eval``: ``measuring``, ``Job.untrained`` set) is the weights, the
measurement and, on a CPU, the runtime: no gradients, moments, activations or training logits. A local teacher
or oracle is planned the same way before it loads (``generation``: its weights in its ``--dtype``, and in the
measurement's place one request of ``PLANNED_PROMPT`` prompt tokens and a retry's reply); once its prompts are
known, its longest request is checked (``Plan.request_shortfall``), each request bounded as (``generating``)::

    request          1.5 x (2 L G (P + R) b + P (8 H + 4 I) x 4 [+ 2 x heads x P^2 x 4 with eager attention])
                     + 64 MiB

its key-value cache of the prompt's P tokens and a reply's R in its dtype's b bytes, and one layer's prefill
(the norms and the rotary embedding upcast to float32; the logits of the last token alone), 1.5 times, and the
kernels' scratch: the bundled model's greedy replies rose 0.50-0.86x of it on the CPU (a 3,000-token prompt,
ten fresh processes of one and two threads: 226-385 MiB, the allocator's reuse of freed pages varying; 1,000-
and 6,000-token prompts within that), tests/integration/test_memory_bundled.py.

T is the tokens of one batch: B rows of up to R tokens, B the batch size, or the rows of the largest training set
where fewer (``Job.most_rows``: a batch holds no more). S is the larger of a padded batch's scores, each row
attending within itself (B x R^2), and a packed one's, its prefix tree one sequence of at most F = min(B, D) x R
tokens (F^2), D the distinct rows of a training set (``Job.distinct_rows``: the tree feeds a repeated row once;
where not known, B); where no batch of the rows can share enough to go packed (``Job.packs``, KR-Test's rows by
``corpus.most_shared``), the padded one's alone. K is the supervised tokens of one batch (at most 4 an arithmetic
example; every token of a KR-Test passage), L the layers, H the hidden size, G the keys' width (H x key-value
heads / heads: grouped-query attention), I the feed-forward size, V the vocabulary. The activations' 10 H + 2 G +
5 I bound what a layer saves for backward a token, counted with autograd's saved-tensor hooks (tests/core/lm/
test_memory.py): Llama and Qwen2 about 9.6 H + 2 G + 4 I (the norms' inputs and outputs, the attention's query,
keys, values and output, the gated feed-forward's four I-wide tensors), Phi 8.2 H + 5 I (its tanh GELU's
intermediates), GPT-NeoX less.

On a GPU the plan keeps a margin of what is free (``margin``): the larger of ``MARGIN_SHARE`` of it (the
caching allocator's rounding and fragmentation: the few percent by which reserved commonly exceeds allocated)
and ``MARGIN_FLOOR`` (what loads after the check: CUDA's lazy kernels, cuBLAS's workspaces, the compiled 8-bit
update; the 0.5 GiB an earlier plan held back, which the T4 still fitted). Neither was measured on a GPU here;
``python -m cctk.bench gpu`` prints the allocator's reserved against its allocated peak, to check the share.
The free memory is read again once the model is on the device (``cctk.core.lm.device.check_placed``).

The device's peak is what its allocator holds (``torch.cuda.max_memory_allocated``): the CUDA context (about
0.5 GiB) is outside it and outside what ``torch.cuda.mem_get_info`` reports free, so it is counted on neither
side (a fresh card's free memory is its total less the context, ``CARDS``). On a CPU the device is the host,
and the estimate counts what the first training step allocates once (about 0.2 GiB). Host memory holds the
process, the model copies that wait there (a parent for its next arm, an arm's copy before it moves to the
device) and, on a CPU device, everything above. Measured against the process's peak resident memory in
tests/core/lm/test_memory.py and by ``python -m cctk.bench gpu``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..config import Recipe
from ..errors import CctkError

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel

GIB = 2**30
CUDA_CONTEXT = 512 * 2**20  # the CUDA runtime and kernels' share of a device, before any tensor (outside the allocator)
# What a process's first training step allocates once on a CPU (autograd's engine, the kernels' thread
# buffers): about 200 MB measured here, whatever the model's size (tests/core/lm/test_memory.py warms it up).
CPU_FIRST_STEP = 256 * 2**20
LOGIT_BUDGET = 2**26  # the scorer's (cctk.core.lm.scoring.LOGIT_BUDGET), kept here to stay torch-free at import
WORKSPACE = 32 * 2**20  # scratch of the kernels of a training step, counted with the logits
ANSWER_TOKENS = 4  # supervised tokens of one arithmetic example at most: " 36\n" is 2-4 tokens
# per trained parameter: two float32 moments; two 8-bit ones with a float32 scale per block of 256
OPTIMIZER_BYTES = {"adamw": 8.0, "adamw8bit": 2 * (1 + 4 / 256)}
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}  # a parameter of weights loaded in each (--dtype)
ADAMW8BIT_TEMPORARY = 8  # bytes a value of the largest tensor: cctk.core.lm.adamw8bit.TEMPORARY_BYTES (torch-free)
LOGIT_COPIES = 2  # the scorer's logits: the logits and their log-softmax
REQUEST_SLACK = 1.5  # a generating model's request over its key-value cache and one layer's prefill (``generating``)
REQUEST_SCRATCH = 64 * 2**20  # and beside them, the kernels' scratch and the allocator's rounding of a request
# the prompt a generating model is planned with before its prompts are known: a KR-Test teacher's instructions
# (about 700 tokens in the bundled model's template) and a short passage; its longest is checked once they are read
PLANNED_PROMPT = 1024
MARGIN_SHARE = 0.05  # of a GPU's free memory, kept free (see the module's docstring)
MARGIN_FLOOR = 512 * 2**20


@dataclass(frozen=True)
class Shape:
    """What memory depends on in a model's architecture."""

    params: int  # every parameter (tied weights once)
    matrices: int  # parameters of the linear layers and the LM head: autocast makes half copies of these
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int | None = None  # the keys' and values' heads (grouped-query attention); None: as many as ``heads``

    @property
    def kv_width(self) -> int:
        """The width of the keys (and of the values): the hidden size where every query head has its own."""
        return self.hidden * (self.kv_heads or self.heads) // self.heads

    @property
    def largest(self) -> int:
        """Values of its largest tensor: the embedding or the LM head (vocabulary x hidden), or a feed-forward
        matrix where that is larger."""
        return max(self.vocab, self.intermediate) * self.hidden

    @classmethod
    def of_config(cls, config: PretrainedConfig) -> Shape:
        """The shape of a transformers config, its parameters counted on the meta device (no memory)."""
        import torch
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        return cls.of_model(model)

    @classmethod
    def of_model(cls, model: PreTrainedModel) -> Shape:
        import torch

        config = model.config

        def get(*names: str) -> Any:
            """The config's value under the first of ``names`` it sets (architectures name them differently)."""
            return next((getattr(config, n) for n in names if getattr(config, n, None)), None)

        head = model.get_output_embeddings()
        matrices = {id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)}
        if head is not None:
            matrices[id(head.weight)] = head.weight.numel()
        hidden = get("hidden_size", "n_embd")
        return cls(
            sum(p.numel() for p in model.parameters()),
            sum(matrices.values()),
            get("num_hidden_layers", "n_layer"),
            hidden,
            get("intermediate_size", "n_inner") or 4 * hidden,
            get("vocab_size"),
            get("num_attention_heads", "n_head"),
            get("num_key_value_heads"),
        )


@dataclass(frozen=True)
class Estimate:
    """Peak bytes of one training arm and of one measurement on the device, and the host's share."""

    weights: int
    gradients: int
    optimizer: int
    half_copies: int
    activations: int
    logits: int
    measurement: int
    runtime: int  # a CPU process's first-step allocations (0 on CUDA: the context is outside the allocator)
    waiting: int  # copies of the model that wait in host memory while an arm trains (a parent for its next arm)
    measured_in_training: bool = False  # measured while the gradients and moments live (curves, KR-Test)
    measured_as: str = "scoring logits"  # what ``measurement`` holds, as the breakdown names it ("a request")

    @property
    def training(self) -> int:
        return self.gradients + self.optimizer + self.half_copies + self.activations + self.logits

    @property
    def measuring(self) -> int:
        """A measurement's share: its logits, beside the gradients and moments where it runs mid-training."""
        return self.measurement + (self.gradients + self.optimizer if self.measured_in_training else 0)

    @property
    def device(self) -> int:
        """Peak on the device's allocator: the weights, the runtime and the larger of training and measuring."""
        return self.runtime + self.weights + max(self.training, self.measuring)

    def host(self, on_cpu: bool) -> int:
        """Peak in host memory beyond the process itself: the waiting copies, and the device's peak on a CPU
        (the device is the host), else the copy of an arm made on the host before it moves to the device."""
        return self.waiting * self.weights + (self.device if on_cpu else self.weights)

    def breakdown(self) -> str:
        parts = {
            "weights": self.weights,
            "gradients": self.gradients,
            "optimizer": self.optimizer,
            "half copies": self.half_copies,
            "activations": self.activations + self.logits,
            self.measured_as: self.measurement if not self.training else 0,  # a measurement (or request) alone
            "runtime": self.runtime,
        }
        return ", ".join(f"{name} {gib(n)}" for name, n in parts.items() if n)


def gib(n: int | float) -> str:
    return f"{n / GIB:.1f} GiB"


@dataclass(frozen=True)
class Job:
    """What a training job asks of memory beyond its shape and recipe (the arithmetic pipeline's by default)."""

    trained: int | None = None  # trainable parameters (None: all; LoRA trains fewer)
    supervised: int = ANSWER_TOKENS  # supervised tokens of one row at most (KR-Test: the whole row)
    measured_in_training: bool = False  # measured while it trains (``--curves``; KR-Test every K steps)
    logit_copies: int = LOGIT_COPIES  # logit budgets its measurement holds at once (KR-Test's perplexity: 3)
    row_option: str | None = None  # the option that sets the longest row (KR-Test's --max-tokens); None: fixed
    most_rows: int | None = None  # rows of the largest training set: no batch holds more (None: not known)
    distinct_rows: int | None = None  # distinct rows of a training set: a packed batch feeds no more (None: not known)
    packs: bool = True  # whether a batch may go packed (False: its rows share too little, every batch pads)
    # a job that trains nothing: what it does, as its memory line says ("measured": ``cctk measure``, ``krtest eval``;
    # "generating": a local teacher), no training term; None: it trains
    untrained: str | None = None
    weights_dtype: str = "float32"  # the dtype its weights load in, where it trains nothing (a local teacher's --dtype)
    request: int | None = None  # a generating job's: the bytes of one request, in the measurement's place

    @property
    def trains(self) -> bool:
        return self.untrained is None

    def batch(self, batch_size: int) -> int:
        """The rows of the largest batch the job trains at ``batch_size``: the batch, or every row where fewer."""
        return batch_size if self.most_rows is None else min(batch_size, self.most_rows)


PIPELINE = Job()


def estimate(
    shape: Shape, recipe: Recipe, longest_row: int, device_type: str = "cpu", waiting: int = 0, job: Job = PIPELINE
) -> Estimate:
    """The peak memory of fine-tuning and measuring ``shape`` with ``recipe`` on a device of ``device_type``.

    ``longest_row``: tokens of the longest training row; ``waiting``: model copies that wait in host
    memory while an arm trains (a 2.0.0 pipeline: one parent; one model trained in place: none);
    ``job``: what the training asks beyond that (trainable parameters, supervised tokens, measuring mid-way).
    """
    if not job.trains:  # the weights and the scorer's logits (a generator's request) alone
        weights = DTYPE_BYTES[job.weights_dtype] * shape.params
        held, words = (
            (job.logit_copies * LOGIT_BUDGET * 4, "scoring logits")
            if job.request is None
            else (job.request, "a request")
        )
        return Estimate(weights, 0, 0, 0, 0, 0, held, _runtime(device_type), waiting, measured_as=words)
    trained = shape.params if job.trained is None else job.trained
    half = recipe.precision in ("bf16", "fp16")
    batch = job.batch(recipe.batch_size)
    tokens = batch * longest_row
    packed = min(batch, job.distinct_rows or batch) * longest_row  # a prefix tree's tokens at most
    per_token = shape.layers * (10 * shape.hidden + 2 * shape.kv_width + 5 * shape.intermediate) * (2 if half else 4)
    scores = shape.layers * shape.heads * max(packed**2 if job.packs else 0, batch * longest_row**2) * 4
    logits = 5 * batch * min(job.supervised, longest_row) * shape.vocab * 4 + WORKSPACE
    return Estimate(
        weights=4 * shape.params,
        gradients=4 * trained,
        optimizer=int(OPTIMIZER_BYTES[recipe.optimizer] * trained)
        + (ADAMW8BIT_TEMPORARY * min(shape.largest, trained) if recipe.optimizer == "adamw8bit" else 0),
        half_copies=2 * shape.matrices if half else 0,
        activations=tokens * per_token + scores,
        logits=logits,
        measurement=job.logit_copies * LOGIT_BUDGET * 4,
        runtime=_runtime(device_type),
        waiting=waiting,
        measured_in_training=job.measured_in_training,
    )


def _runtime(device_type: str) -> int:
    return CPU_FIRST_STEP if device_type == "cpu" else 0


def generating(shape: Shape, prompt: int, reply: int, dtype: str = "float32", eager: bool = False) -> int:
    """Bytes a generating model holds beside its weights for one request: a prompt of ``prompt`` tokens and a
    reply of up to ``reply``, its weights in ``dtype`` (``eager``: attention that writes out the prompt's scores);
    the module docstring's request line."""
    cache = 2 * shape.layers * shape.kv_width * (prompt + reply) * DTYPE_BYTES[dtype]
    prefill = prompt * (8 * shape.hidden + 4 * shape.intermediate) * 4
    scores = 2 * shape.heads * prompt**2 * 4 if eager else 0
    return int(REQUEST_SLACK * (cache + prefill + scores)) + REQUEST_SCRATCH


def measuring(model: str, shape: Shape, room: Room, logit_copies: int = LOGIT_COPIES) -> Plan:
    """The plan of a measurement alone (``cctk measure``, ``krtest eval``): the model's weights, in float32, and the
    scorer's logits (``logit_copies`` budgets held at once) on the device, nothing trained."""
    return Plan(model, shape, Recipe(), 1, room, job=Job(logit_copies=logit_copies, untrained="measured"))


def generation(model: str, shape: Shape, room: Room, reply: int, dtype: str = "float32", eager: bool = False) -> Plan:
    """The plan of a local model generating (a KR-Test teacher or oracle) before its prompts are known: its
    weights in ``dtype`` and one request (``generating``) of ``PLANNED_PROMPT`` prompt tokens and a reply of up to
    ``reply``; its longest request is checked once its prompts are known (``Plan.request_shortfall``)."""
    request = generating(shape, PLANNED_PROMPT, reply, dtype, eager)
    job = Job(untrained="generating", weights_dtype=dtype, request=request)
    return Plan(model, shape, Recipe(), 1, room, job=job)


@dataclass(frozen=True)
class Room:
    """What a device and the host have free now (bytes), and what the device can do."""

    device: int
    host: int
    device_type: str = "cpu"
    name: str = "cpu"
    bf16: bool = False  # native bf16 arithmetic

    @property
    def usable(self) -> int:
        """What the device's jobs may plan to fill: on a GPU, what is free less ``margin``; elsewhere all."""
        return self.device - margin(self.device) if self.device_type == "cuda" else self.device


def free_for(need: int) -> int:
    """The free memory a GPU job of ``need`` bytes asks for: ``need`` and the margin of that much."""
    return max(int(need / (1 - MARGIN_SHARE)), need + MARGIN_FLOOR)


def margin(free: int) -> int:
    """What a GPU job leaves free of ``free`` bytes: ``MARGIN_SHARE`` of it, at least ``MARGIN_FLOOR``."""
    return max(int(MARGIN_SHARE * free), MARGIN_FLOOR)


@dataclass(frozen=True)
class Plan:
    """A job's memory against a device: the estimate, whether it fits, and what would fit instead."""

    model: str  # as the user named it
    shape: Shape
    recipe: Recipe
    longest_row: int  # tokens of the longest training row
    room: Room
    waiting: int = 0  # copies that wait in host memory while an arm trains (see ``estimate``)
    others: dict[str, Shape] = field(default_factory=dict, compare=False)  # models to suggest (the roster)
    job: Job = PIPELINE

    @property
    def estimate(self) -> Estimate:
        return self._estimate(self.shape, self.recipe)

    def _estimate(self, shape: Shape, recipe: Recipe) -> Estimate:
        return estimate(shape, recipe, self.longest_row, self.room.device_type, self.waiting, self.job)

    @property
    def on_cpu(self) -> bool:
        return self.room.device_type == "cpu"

    def shortfall(self) -> str | None:
        """None when the job fits, else one line: what is needed where, what is free, which options fit."""
        need = self.estimate
        short = _short_of(self.room, need.device, need.host(self.on_cpu))
        if short is None:
            return None
        needed, free = short
        return f"{self.model} {self._job_words()} needs about {needed} ({need.breakdown()}), {free}; {self.what_fits()}"

    def placed_shortfall(self, free: int) -> str | None:
        """Once the model's weights are on the device and ``free`` bytes are left there: None where the rest
        of the job (everything but the weights) fits what is free less the margin, else one line."""
        rest = self.estimate.device - self.estimate.weights
        if self.on_cpu or rest <= free - margin(free):
            return None
        rest_of = (
            f"the rest of this recipe ({self._recipe_words()})"
            if self.job.trains
            else f"the rest ({self._job_words()})"
        )
        return (
            f"{self.model} is on {self.room.name}, and {rest_of} needs about {gib(rest)} more there, {gib(free)} "
            f"free now ({gib(margin(free))} of it kept free: other processes or kernels took memory since the "
            f"check); {self.what_fits()}"
        )

    def request_shortfall(
        self, prompt: int, reply: int, now: Room, eager: bool = False, loaded: bool = False
    ) -> str | None:
        """A generating job's request (``generating``), ``now`` what is free where it runs: None where the request
        fits what the plan set aside for one (its ``measurement``) or what is free (less the margin on a GPU;
        beside the first step's runtime on a CPU, and the weights unless ``loaded``), else what it needs and what
        is free, as words."""
        need = generating(self.shape, prompt, reply, self.job.weights_dtype, eager)
        weights = 0 if loaded else self.estimate.weights
        if need <= self.estimate.measurement or weights + need + self.estimate.runtime <= now.usable:
            return None
        kept = f" ({gib(margin(now.device))} of it kept free)" if now.device_type == "cuda" else ""
        where = f"on {now.name}" if now.device_type == "cuda" else "in host memory"
        beside = f"beside {self.model}'s weights" if loaded else f"with {self.model}'s weights ({gib(weights)})"
        return (
            f"a request of {prompt} prompt tokens and a reply of up to {reply} needs about "
            f"{gib(weights + need + self.estimate.runtime)} {where} {beside} (its key-value cache and the prompt's "
            f"activations), {gib(now.device)} free now{kept}"
        )

    def check(self) -> Estimate:
        """The estimate, or a one-line error (``shortfall``) before any work."""
        short = self.shortfall()
        if short:
            raise CctkError(short)
        return self.estimate

    def expected_peak(self) -> int:
        """The peak a run's measurement is set beside: the device's; on a CPU the process's resident memory,
        now (the model not loaded yet) plus what the run adds."""
        return process_memory() + self.estimate.host(True) if self.on_cpu else self.estimate.device

    def out_of_memory(self, device: str, where: str, error: BaseException) -> str:
        """The one line an out-of-memory error of a run becomes: where, the allocator's words, the estimate
        and what fits."""
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return (
            f"out of memory on {device} in {where} ({first[:200]}); estimated {gib(self.estimate.device)} "
            f"({self.estimate.breakdown()}), {gib(self.room.device)} free at the start; {self.what_fits()}"
        )

    def what_fits(self) -> str:
        said = []
        variants = options(self.recipe, self.room) if self.job.trains else []  # a measurement is float32 alone
        best = next((v for v in variants if self.fits(self.shape, v)), None)
        if best is not None:
            said.append(f"it fits with {_flags(best, self.recipe)} ({gib(self._peak(self.shape, best))})")
        elif self.job.trains:  # no precision or optimizer saves enough: the batch, or the rows, may be too large
            for flag, plan in self._cut():
                said.append(f"it fits with {flag} ({gib(plan._peak(plan.shape, plan.recipe))})")
        smaller = [k for k, s in self.others.items() if s.params < self.shape.params and self.fits(s, self.recipe)]
        if smaller:
            said.append(f"a smaller model fits as it is: {', '.join(smaller)}")
        said.append(
            f"or a device with at least {gib(free_for(self.estimate.device))} free"
            if not self.on_cpu
            else f"or a machine with at least {gib(self.estimate.host(True))} of free memory"
        )
        return "; ".join(said)

    def _job_words(self) -> str:
        """The job as the memory line names it: "with this recipe (...)", or "measured in float32"."""
        return (
            f"with this recipe ({self._recipe_words()})"
            if self.job.trains
            else f"{self.job.untrained} in {self.job.weights_dtype}"
        )

    def _recipe_words(self) -> str:
        """The recipe as the memory line names it: what a user can change (the rows where an option sets them)."""
        rows = f", rows of up to {self.longest_row} tokens" if self.job.row_option else ""
        size, batch = self.recipe.batch_size, self.job.batch(self.recipe.batch_size)
        held = f": all of an arm's rows, {batch} at most" if batch < size else ""
        return f"{self.recipe.precision}, {self.recipe.optimizer}, batch {size}{held}{rows}"

    def _cut(self) -> list[tuple[str, Plan]]:
        """The batch size, and the longest row where an option sets it (``Job.row_option``), each cut to the
        largest power of two below it at which the job fits: the option with its value and the plan, for each
        that gets there."""
        batch = self.job.batch(self.recipe.batch_size)  # a batch past every arm's rows trains as that many
        knobs: list[tuple[str, int, Callable[[int], Plan]]] = [
            ("--batch-size", batch, lambda n: replace(self, recipe=replace(self.recipe, batch_size=n)))
        ]
        if self.job.row_option:  # rows cut shorter are more of them, sharing more: nothing known of them then
            unbounded = replace(self.job, most_rows=None, distinct_rows=None, packs=True)
            knobs.append((self.job.row_option, self.longest_row, lambda n: replace(self, longest_row=n, job=unbounded)))
        found = []
        for option, value, change in knobs:
            n = 1 << ((value - 1).bit_length() - 1) if value > 1 else 0  # 5000: 4096; 4096: 2048
            while n >= 1:
                plan = change(n)
                if plan.fits(plan.shape, plan.recipe):
                    found.append((f"{option} {n}", plan))
                    break
                n //= 2
        return found

    def _peak(self, shape: Shape, recipe: Recipe) -> int:
        need = self._estimate(shape, recipe)
        return need.host(True) if self.on_cpu else need.device

    def fits(self, shape: Shape, recipe: Recipe) -> bool:
        """Whether ``shape`` with ``recipe`` fits this plan's device and host."""
        need = self._estimate(shape, recipe)
        return (self.on_cpu or need.device <= self.room.usable) and need.host(self.on_cpu) <= self.room.host


def together(plans: Sequence[Plan]) -> str | None:
    """Jobs that train nothing, loaded at once on one device and run in turn (a local teacher and a local
    oracle), each planned alone: None where all their weights and the largest of the rest (one request at a time)
    fit, else one line. On a GPU each model's host copy moves to the device before the next one loads."""
    assert plans and not any(p.job.trains for p in plans), "models that train load one at a time"
    room = min((p.room for p in plans), key=lambda r: (r.device, r.host))  # read before each load: the least
    weights = sum(p.estimate.weights for p in plans)
    device = weights + max(p.estimate.device - p.estimate.weights for p in plans)
    on_cpu = room.device_type == "cpu"
    short = _short_of(room, device, device if on_cpu else max(p.estimate.weights for p in plans))
    if short is None:
        return None
    names = " and ".join(f"{p.model} ({gib(p.estimate.weights)} of weights)" for p in plans)
    larger = (
        f"a device with at least {gib(free_for(device))} free"
        if not on_cpu
        else f"a machine with at least {gib(device)} of free memory"
    )
    return (
        f"{names}, {plans[0]._job_words()} at once, need about {short[0]}, {short[1]}; each fits alone: make one of "
        f"them an endpoint (http://host:port/v1), or use {larger}"
    )


def _short_of(room: Room, device: int, host: int) -> tuple[str, str] | None:
    """Where a job that needs ``device`` bytes on its device and ``host`` in host memory does not fit ``room``: the
    need and where (``3.2 GiB on cuda:0 (...)``), and what is free there (``2.0 GiB free (0.5 GiB of it kept
    free)``); the device checked first, a CPU's being the host; None where both fit."""
    if room.device_type != "cpu" and device > room.usable:
        return f"{gib(device)} on {room.name}", f"{gib(room.device)} free ({gib(margin(room.device))} of it kept free)"
    if host > room.host:
        return f"{gib(host)} in host memory", f"{gib(room.host)} free"
    return None


def _flags(variant: Recipe, recipe: Recipe) -> str:
    """The options that turn ``recipe`` into ``variant``: ``--precision bf16 --optimizer adamw8bit``."""
    changed = [n for n in ("precision", "optimizer") if getattr(variant, n) != getattr(recipe, n)]
    return " ".join(f"--{n} {getattr(variant, n)}" for n in changed)


def options(recipe: Recipe, room: Room) -> list[Recipe]:
    """The recipe's variants this device can run, nearest the manual's first: the optimizer, then the precision."""
    precisions = ["float32"] + (["bf16"] if room.bf16 else []) + (["fp16"] if room.device_type == "cuda" else [])
    optimizers = ["adamw"] + (["adamw8bit"] if room.device_type == "cuda" else [])
    variants = [replace(recipe, optimizer=o, precision=p) for p in precisions for o in optimizers]
    return [v for v in variants if v != recipe]


# --- The process's own resident memory (Linux: /proc/self/status; elsewhere the peak since the start). ---


def _status(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        return None
    return None


def process_memory() -> int:
    """Resident memory of this process now, in bytes (0 where it cannot be read)."""
    return _status("VmRSS") or 0


def process_peak() -> int:
    """Peak resident memory of this process since the last ``reset_process_peak`` (or its start), in bytes."""
    peak = _status("VmHWM")
    if peak is not None:
        return peak
    import resource
    import sys

    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024  # bytes on macOS, kB on Linux


def release_freed() -> None:
    """Hand memory the process freed back to the system (glibc's ``malloc_trim``), so that what is allocated
    next shows in the resident memory again rather than reusing pages still counted; nothing elsewhere."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    name = ctypes.util.find_library("c")
    with contextlib.suppress(OSError, AttributeError, TypeError):
        ctypes.CDLL(name).malloc_trim(0)


def reset_process_peak() -> bool:
    """Start the peak over from the present resident memory (Linux 4.0+); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


# --- The roster against the cards people have (docs/gpus.md; ``cctk models --fits``). ---

CARDS = {  # name -> (GiB torch reports as total_memory, native bf16); free before any process: less CUDA_CONTEXT
    "T4 16 GB": (14.75, False),
    "L4/A10 24 GB": (22.0, True),
    "A100 40 GB": (39.4, True),
    "A100/H100 80 GB": (79.1, True),
    "H200 141 GB": (139.8, True),
}


def card_room(total_gib: float, bf16: bool, host_gib: float = 64.0, name: str = "") -> Room:
    """A card as a fresh process finds it: its total less the CUDA context, free."""
    return Room(int(total_gib * GIB) - CUDA_CONTEXT, int(host_gib * GIB), "cuda", name, bf16=bf16)


def nearest_fit(shape: Shape, recipe: Recipe, card: Room, longest_row: int = 16, waiting: int = 1) -> str:
    """The recipe itself where it fits the card, else its nearest variant that does (``options`` order), as
    the flags to add; "-" where none does."""
    plan = Plan("", shape, recipe, longest_row, card, waiting)
    if plan.shortfall() is None:
        return "as is"
    return next((_flags(v, recipe) for v in options(recipe, card) if plan.fits(shape, v)), "-")


def fits_table(shapes: dict[str, Shape], recipe: Recipe, host_gib: float = 64.0) -> list[list[str]]:
    """Rows of the roster (parameters, then one column per card in ``CARDS``): what a 2.0.0 pipeline with
    ``recipe`` needs there, the host holding ``host_gib``."""
    rows = []
    for key, shape in shapes.items():
        cells = [nearest_fit(shape, recipe, card_room(total, bf16, host_gib)) for total, bf16 in CARDS.values()]
        need = estimate(shape, recipe, 16, "cuda", waiting=1)
        rows.append([key, f"{shape.params / 1e6:,.0f}M", gib(need.device), *cells])
    return rows
