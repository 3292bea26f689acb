"""``cctk krtest``: generate a data set, evaluate a model, train with KR-Test curves, run the study."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeVar

import click

from ..core.config import check_seeds
from ..core.errors import CctkError
from ..core.lm.memory import DTYPE_BYTES
from ..core.lm.models import BUNDLED
from ..krtest.generation.generate import ENTITIES, VALIDATION_ENTITIES
from ..krtest.measurement.lora import DEFAULT_BUDGET
from .options import DEVICE, MODEL, TRACKING, Folder, Given, out_option

if TYPE_CHECKING:
    from typing import Unpack

    from _typeshed import DataclassInstance

    from ..krtest.generation.gate import Gate

D = TypeVar("D", bound="DataclassInstance")

IN_FILE = click.Path(dir_okay=False, path_type=Path)


# What click passes the commands beyond their named parameters (``**options``, ``**values``), as it reads them.
class _Endpoint(TypedDict):
    """An endpoint's --max-tokens, --timeout and --retries: the teacher's and the oracle's."""

    max_tokens: int
    timeout: float
    retries: int
    device: str | None  # where a local teacher or oracle generates
    dtype: str | None  # its weights' dtype


class _GenerateOptions(_Endpoint):
    teacher_model: str | None
    api_key_env: str | None
    segment: str
    min_tokens: int
    max_passage_tokens: int | None
    text_field: str
    per_passage: int
    max_passages: int | None
    temperature: float | None
    concurrency: int
    oracle_name: str | None
    oracle_model: str | None
    oracle_api_key_env: str | None
    overwrite: bool
    dry_run: bool
    tracking: str | None
    tokenizer_name: str


class _OracleValues(_Endpoint):
    segment: str
    location: str
    min_tokens: int
    max_passage_tokens: int | None
    text_field: str
    tokenizer_name: str
    overwrite: bool
    tracking: str | None


class _EvalOptions(TypedDict):
    location: str
    segment: str
    tokenizer_name: str | None
    device: str | None


class _TrainValues(TypedDict):
    budget: int
    eval_every: int | None
    epochs: int | None
    learning_rate: float | None
    batch_size: int | None
    grad_clip: float | None
    weight_decay: float | None
    schedule: str | None
    warmup: float | None
    max_tokens: int | None


class _StudyValues(TypedDict):
    location: str
    corpus: Path | None
    validation: Path | None
    entities: int | None
    validation_entities: int | None
    budget: int | None
    eval_every: int | None
    epochs: int | None
    batch_size: int | None
    full_learning_rate: float | None
    lora_learning_rate: float | None
    full_epochs: int | None
    lora_epochs: int | None
    device: str | None


@click.group("krtest", short_help="KR-Test: what a model retains of a corpus.")
def krtest() -> None:
    """KR-Test: what a model retains of a corpus, not only its perplexity (seed 003, "Beyond Perplexity")."""


LOCATION = click.option(
    "--location",
    "location",
    type=click.Choice(["char", "line"]),
    default="char",
    show_default=True,
    help="What an item's location counts: the character offset of its passage "
    "(the paper's appendix A) or its 0-based line index (appendix B).",
)
SEGMENT = click.option(
    "--segment",
    default="blank-lines",
    show_default=True,
    help="How the corpus is cut into passages: blank-lines (whitespace-only lines too, as "
    "WikiText's), lines, or tokens:N (windows of about N tokens of --tokenizer).",
)
TOKENIZER = click.option(
    "--tokenizer",
    "tokenizer_name",
    default=BUNDLED,
    show_default=True,
    help="The tokenizer of the model to be scored: sides identical over their first T tokens "
    "are rejected, and tokens:N counts its tokens.",
)

# generate's and oracle's: the same corpus read the same way, the same endpoint asked
API_KEY_ENV = click.option(
    "--api-key-env",
    default=None,
    metavar="VAR",
    help="Endpoint: the environment variable that holds the API key [default: OPENAI_API_KEY when set] (never logged).",
)
MIN_TOKENS = click.option(
    "--min-tokens",
    type=int,
    default=0,
    show_default=True,
    help="A passage shorter than this (a heading) is merged into the next one of its document.",
)
MAX_PASSAGE_TOKENS = click.option(
    "--max-tokens-per-passage",
    "max_passage_tokens",
    type=int,
    default=None,
    help="A longer passage is split at its sentence ends.",
)
TEXT_FIELD = click.option(
    "--text-field", default="text", show_default=True, help="A .jsonl corpus: the field holding the text."
)
TIMEOUT = click.option("--timeout", type=float, default=120.0, show_default=True, help="Endpoint: seconds per request.")
LOCAL_DEVICE = click.option(
    "--device",
    type=Given("a device (cpu, cuda, cuda:1)"),
    default=None,
    help="A local model: where it generates, cpu, cuda, cuda:N or mps (default: cuda when available, else cpu); "
    "an endpoint's server chooses its own.",
)
LOCAL_DTYPE = click.option(
    "--dtype",
    type=click.Choice(list(DTYPE_BYTES)),
    default=None,
    help="A local model: the dtype its weights load and generate in (default: float32; bfloat16, or float16 on "
    "CUDA, takes half the memory).",
)


@krtest.command(short_help="Write KR-Test items: a fictional set, or from your corpus.")
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of every draw: the fictional corpus, or the teacher's sampling (request n: seed + n).",
)
@out_option("Folder for questions.jsonl and the rest; an unfinished generation there is continued.")
@click.option(
    "--corpus",
    type=click.Path(path_type=Path),
    default=None,
    help="Your own corpus: a text file, a folder of .txt/.md files or a .jsonl file; a teacher writes "
    "the items from it (with --teacher). Without it: the seeded fictional corpus.",
)
@click.option(
    "--teacher",
    default=None,
    help="http://host:port/v1 (an OpenAI-compatible endpoint) or a model key or folder generating in-process.",
)
@click.option("--teacher-model", default=None, help="Endpoint: the model to ask [default: its only one, from /models].")
@API_KEY_ENV
@SEGMENT
@MIN_TOKENS
@MAX_PASSAGE_TOKENS
@TEXT_FIELD
@click.option("--per-passage", type=int, default=3, show_default=True, help="Items asked of the teacher per passage.")
@click.option("--max-passages", type=int, default=None, help="Only the first N passages (a quick look).")
@click.option(
    "--temperature",
    type=float,
    default=None,
    help="Teacher sampling temperature, sent (with the seed) only when given [local default: greedy].",
)
@LOCAL_DEVICE
@LOCAL_DTYPE
@click.option(
    "--max-tokens",
    type=int,
    default=400,
    show_default=True,
    help="Longest teacher reply, in tokens (a reply cut there is asked again once with twice as many).",
)
@click.option(
    "--retries",
    type=int,
    default=5,
    show_default=True,
    help="Endpoint: retries of a request on 429, 5xx or a lost connection (backoff, Retry-After honoured).",
)
@TIMEOUT
@click.option(
    "--concurrency",
    type=int,
    default=1,
    show_default=True,
    help="Requests in flight at once (results stay in passage order).",
)
@click.option(
    "--oracle",
    "oracle_name",
    default=None,
    metavar="URL|MODEL",
    help="The paper's oracle as a second gate: the items validation kept are put to it (temperature 0) "
    "and only those it answers with their true side are kept; the others go to rejected.jsonl.",
)
@click.option("--oracle-model", default=None, help="Endpoint oracle: the model to ask [default: its only one].")
@click.option(
    "--oracle-api-key-env",
    default=None,
    metavar="VAR",
    help="Endpoint oracle: the environment variable that holds its API key [default: the teacher's, "
    "--api-key-env, else OPENAI_API_KEY when set] (never logged).",
)
@click.option("--overwrite", is_flag=True, help="Replace a finished (or other) generation in --out.")
@click.option(
    "--dry-run", is_flag=True, help="Print the passages, the requests and a prompt-token estimate; send nothing."
)
@TRACKING
@TOKENIZER
@LOCATION
@click.option(
    "--entities",
    type=int,
    default=None,
    help=f"Fictional corpus: people in it [default: {ENTITIES}] (even; six questions each).",
)
@click.option(
    "--validation-entities",
    type=int,
    default=None,
    help=f"Fictional corpus: other people, in the validation text only [default: {VALIDATION_ENTITIES}].",
)
def generate(
    seed: int,
    out: Path,
    corpus: Path | None,
    teacher: str | None,
    location: str,
    entities: int | None,
    validation_entities: int | None,
    **options: Unpack[_GenerateOptions],
) -> None:
    """Write KR-Test items: from your corpus through a teacher LLM, or a seeded fictional data set."""
    check_seeds((seed,))
    if corpus is None:
        _fictional(seed, out, location, entities, validation_entities)
        return
    if teacher is None:
        raise CctkError("--corpus needs --teacher (an endpoint http://host:port/v1 or a local model)")
    if entities is not None or validation_entities is not None:
        raise CctkError(
            "--entities and --validation-entities size the fictional corpus; they mean nothing with --corpus"
        )
    check_local(options, teacher, options["oracle_name"])
    from ..krtest.generation import from_corpus
    from ..krtest.generation.teacher import make_teacher

    chosen = make_teacher(
        teacher,
        options["teacher_model"],
        options["api_key_env"],
        options["temperature"],
        seed=seed,
        **_endpoint(options),
    )
    gate = _gate(options, seed)
    config = _fields(from_corpus.GenerationOptions, options, location=location)
    request = _fields(from_corpus.Request, options, corpus=corpus, options=config, out=out, seed=seed)
    from_corpus.run(request, chosen, echo=click.echo, gate=gate)  # its figures, files and run printed


def _gate(options: _GenerateOptions, seed: int) -> Gate | None:
    """The oracle gate of ``generate --oracle`` (None without it), checked before any work. An endpoint oracle
    shares the teacher's --max-tokens, --retries and --timeout, and its key variable unless
    --oracle-api-key-env names another (the oracle is often the teacher's provider, not always)."""
    name, model, own_key = options["oracle_name"], options["oracle_model"], options["oracle_api_key_env"]
    if name is None:
        given = "--oracle-model" if model else "--oracle-api-key-env" if own_key else None
        if given:
            raise CctkError(f"{given} needs --oracle (an endpoint http://host:port/v1 or a local model)")
        return None
    from ..krtest.generation.gate import Gate
    from ..krtest.generation.oracle import make_oracle

    endpoint = name.startswith(("http://", "https://"))
    key = own_key or (options["api_key_env"] if endpoint else None)  # a local oracle needs no key
    flag = "--oracle-api-key-env" if own_key else "--api-key-env"
    oracle = make_oracle(name, model, key, seed=seed, key_flag=flag, **_endpoint(options))
    return Gate(oracle, seed)  # the true side's A/B positions drawn from --seed, as krtest oracle --seed does


def _endpoint(values: _Endpoint) -> _Endpoint:
    """An endpoint's --max-tokens, --timeout and --retries, and a local model's --device and --dtype: the
    teacher's and the oracle's."""
    return {
        "max_tokens": values["max_tokens"],
        "timeout": values["timeout"],
        "retries": values["retries"],
        "device": values["device"],
        "dtype": values["dtype"],
    }


def check_local(values: _Endpoint, *models: str | None) -> None:
    """``--device`` and ``--dtype`` only where a model given generates in-process (an endpoint's server chooses
    its own)."""
    if any(m is not None and not m.startswith(("http://", "https://")) for m in models):
        return
    if values["device"] is not None:
        raise CctkError(
            f"--device {values['device']} is where a local model generates; an endpoint's server chooses its own"
        )
    if values["dtype"] is not None:
        raise CctkError(
            f"--dtype {values['dtype']} is what a local model's weights load in; an endpoint's server chooses its own"
        )


def _fields(cls: type[D], values: Mapping[str, object], **given: object) -> D:
    """A ``cls`` (a dataclass) of ``given`` and the entries of ``values`` named as its other fields."""
    return cls(**given, **{f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values})


@krtest.command(short_help="The paper's Golden Standard: an LLM checks each item.")
@click.option("--questions", type=IN_FILE, default=None, help="The items to check (JSONL).")
@click.option(
    "--corpus",
    type=click.Path(path_type=Path),
    default=None,
    help="The corpus the items' locations point into (file, folder or .jsonl).",
)
@click.option(
    "--generation",
    type=Folder(),
    default=None,
    help="A folder of `generate --corpus`: its questions, corpus and segmentation.",
)
@click.option(
    "--oracle",
    "oracle_name",
    required=True,
    help="http://host:port/v1 (an OpenAI-compatible endpoint) or a model key or folder.",
)
@click.option("--oracle-model", default=None, help="Endpoint: the model to ask [default: its only one].")
@API_KEY_ENV
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the true side's position (A or B).")
@SEGMENT
@LOCATION
@MIN_TOKENS
@MAX_PASSAGE_TOKENS
@TEXT_FIELD
@TOKENIZER
@click.option("--max-tokens", type=int, default=400, show_default=True, help="Longest oracle reply, in tokens.")
@click.option("--retries", type=int, default=5, show_default=True, help="Endpoint: retries of a request.")
@TIMEOUT
@LOCAL_DEVICE
@LOCAL_DTYPE
@click.option("--overwrite", is_flag=True, help="Replace a finished oracle check in --out.")
@out_option("Folder for oracle.json, oracle.csv, questions.validated.jsonl.")
@TRACKING
def oracle(
    questions: Path | None,
    corpus: Path | None,
    generation: Path | None,
    oracle_name: str,
    oracle_model: str | None,
    api_key_env: str | None,
    seed: int,
    out: Path,
    **values: Unpack[_OracleValues],
) -> None:
    """The paper's Golden Standard: an LLM picks the option consistent with each item's passage."""
    from ..krtest.generation import oracle as oracle_module

    check_seeds((seed,))

    taken = oracle_module.from_generation(generation) if generation else {}
    if generation and (questions or corpus):
        raise CctkError("give --generation DIR, or --questions and --corpus, not both")
    if not generation and not (questions and corpus):
        raise CctkError("the oracle needs --questions FILE and --corpus PATH (or --generation DIR)")
    fields = {**values, "questions": questions, "corpus": corpus, **taken}  # --generation's own values win
    request = _fields(oracle_module.OracleRequest, fields, out=out, seed=seed)
    check_local(values, oracle_name)
    chosen = oracle_module.make_oracle(oracle_name, oracle_model, api_key_env, seed=seed, **_endpoint(values))
    oracle_module.run_oracle(request, chosen, echo=click.echo)  # its accuracy, file and run printed


def _fictional(seed: int, out: Path, location: str, entities: int | None, validation_entities: int | None) -> None:
    from click.core import ParameterSource

    from ..krtest.generation.generate import make_dataset, write_dataset

    ctx = click.get_current_context()
    flags = {p.name: p.opts[0] for p in ctx.command.params}
    teacher_only = [
        flags[n]
        for n in (
            "teacher",
            "teacher_model",
            "api_key_env",
            "segment",
            "per_passage",
            "max_passages",
            "temperature",
            "max_tokens",
            "tokenizer_name",
            "min_tokens",
            "max_passage_tokens",
            "text_field",
            "retries",
            "timeout",
            "concurrency",
            "dry_run",
            "tracking",
            "oracle_name",
            "oracle_model",
            "oracle_api_key_env",
            "device",
            "dtype",
        )
        if ctx.get_parameter_source(n) is not ParameterSource.DEFAULT
    ]
    if teacher_only:
        raise CctkError(f"{teacher_only[0]} is for items from your corpus (--corpus FILE --teacher ...)")
    entities, validation_entities = entities or ENTITIES, validation_entities or VALIDATION_ENTITIES
    dataset = make_dataset(seed, entities, validation_entities, location)
    paths = write_dataset(dataset, out, overwrite=bool(ctx.params["overwrite"]))
    click.echo(
        f"{len(dataset.items)} questions about {entities} people, validation text about "
        f"{validation_entities} others: {', '.join(str(p) for p in paths.values())}"
    )


@krtest.command("eval", short_help="Score one model on a question file.")
@MODEL
@click.option(
    "--questions", type=IN_FILE, required=True, help="JSONL items: context, sentence_true, sentence_false, location."
)
@click.option(
    "--corpus",
    type=IN_FILE,
    default=None,
    help="The corpus the items' locations point into (every location is checked against it).",
)
@click.option(
    "--open-book",
    "book",
    is_flag=True,
    help="Put each item's source passage before its context (an upper bound; the paper's oracle: krtest oracle).",
)
@LOCATION
@SEGMENT
@click.option(
    "--tokenizer",
    "tokenizer_name",
    default=None,
    help="With --segment tokens:N: the tokenizer that cut the windows [default: the model's].",
)
@out_option("Folder for items.csv, by_passage.csv and summary.json.")
@TRACKING
@DEVICE
def eval_command(
    model: str,
    questions: Path,
    corpus: Path | None,
    book: bool,
    out: Path,
    tracking: str | None,
    **options: Unpack[_EvalOptions],
) -> None:
    """Score one model on a question file; print its accuracy with an exact 95% interval."""
    from click.core import ParameterSource

    from ..krtest.commands.jobs import run_eval

    given = click.get_current_context().get_parameter_source("segment") is not ParameterSource.DEFAULT
    if given and corpus is None:  # it would be ignored: no corpus to cut into passages
        raise CctkError("--segment says how --corpus is cut into passages (by_passage.csv); give --corpus too")
    run_eval(model, questions, out, corpus, book, tracking, echo=click.echo, **options)


@krtest.command(short_help="Fine-tune on a corpus (full or LoRA), KR accuracy as it trains.")
@MODEL
@click.option("--corpus", type=IN_FILE, required=True, help="The text to fine-tune on (passages split by blank lines).")
@click.option("--questions", type=IN_FILE, required=True, help="KR-Test items about the corpus (JSONL).")
@LOCATION
@click.option(
    "--validation",
    type=IN_FILE,
    default=None,
    help="Text for validation perplexity (default: validation.txt beside the corpus).",
)
@click.option("--method", type=click.Choice(["full", "lora"]), default="full", show_default=True)
@click.option("--modules", type=click.Choice(["attention", "ffn"]), default=None, help="LoRA placement.")
@click.option(
    "--budget",
    type=int,
    default=DEFAULT_BUDGET,
    show_default=True,
    help="LoRA: trainable parameters aimed at (the rank of the placement's pair, as krtest study trains them).",
)
@click.option("--eval-every", type=int, default=None, help="Optimizer steps between evaluations [default: 9].")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--epochs", type=int, default=None, help="Override: passes over the corpus.")
@click.option("--learning-rate", type=float, default=None, help="Override: AdamW learning rate.")
@click.option("--batch-size", type=int, default=None, help="Override: passages per optimizer step.")
@click.option("--grad-clip", type=float, default=None, help="Override: gradient-norm clipping.")
@click.option("--weight-decay", type=float, default=None, help="Override: AdamW weight decay.")
@click.option(
    "--schedule", type=click.Choice(["constant", "linear"]), default=None, help="Override: learning-rate schedule."
)
@click.option("--warmup", type=float, default=None, help="Override: share of steps of linear warm-up.")
@click.option(
    "--max-tokens", type=int, default=None, help="Longest training row; longer passages are cut [default: 256]."
)
@out_option("Folder for items.csv, summary.json, curve.csv.")
@TRACKING
@DEVICE
def train(
    model: str,
    corpus: Path,
    questions: Path,
    location: str,
    validation: Path | None,
    method: str,
    modules: str | None,
    seed: int,
    out: Path,
    tracking: str | None,
    device: str | None,
    **values: Unpack[_TrainValues],
) -> None:
    """Fine-tune on a corpus (full or LoRA), KR accuracy and validation perplexity every K steps."""
    from ..krtest.commands.jobs import read_inputs, run_train
    from ..krtest.measurement.train import make_train_config

    config = make_train_config(method, modules, seed, **values)
    inputs = read_inputs(questions, corpus, validation, need_corpus=True, need_validation=True, location=location)
    run_train(model, inputs, config, out, tracking, echo=click.echo, device=device)


@krtest.command(short_help="The paper's study: baselines, full and two LoRA arms.")
@MODEL
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the data set, batch order and adapters.")
@click.option(
    "--seeds",
    default=None,
    metavar="N|S1,S2,...",
    help="The study once per seed (N: N fresh seeds, printed), nested under one sweep run, with "
    "tables across the seeds.",
)
@click.option(
    "--data",
    type=Folder(),
    default=None,
    help="A folder written by `cctk krtest generate` (default: generate one from the seed).",
)
@LOCATION
@click.option(
    "--corpus",
    type=IN_FILE,
    default=None,
    help="With --data: the text its questions point into, passages split by blank lines (default: its corpus.txt; "
    "a folder of generate --corpus has none).",
)
@click.option(
    "--validation",
    type=IN_FILE,
    default=None,
    help="With --data: the text of validation perplexity (default: its validation.txt, else validation.txt "
    "beside the corpus).",
)
@click.option("--entities", type=int, default=None, help=f"People in a generated corpus [default: {ENTITIES}].")
@click.option(
    "--validation-entities",
    type=int,
    default=None,
    help=f"People in a generated validation text [default: {VALIDATION_ENTITIES}].",
)
@click.option("--budget", type=int, default=None, help=f"LoRA trainable parameters [default: {DEFAULT_BUDGET}].")
@click.option("--eval-every", type=int, default=None, help="Optimizer steps between evaluations [default: 9].")
@click.option("--epochs", type=int, default=None, help="Override: passes over the corpus, every trained arm.")
@click.option("--batch-size", type=int, default=None, help="Override: passages per step, every trained arm.")
@click.option("--full-learning-rate", type=float, default=None, help="Override: learning rate of full fine-tuning.")
@click.option("--lora-learning-rate", type=float, default=None, help="Override: learning rate of both LoRA arms.")
@click.option("--full-epochs", type=int, default=None, help="Override: passes over the corpus, full fine-tuning.")
@click.option("--lora-epochs", type=int, default=None, help="Override: passes over the corpus, both LoRA arms.")
@out_option("Folder that receives the session folder.", default=Path("outputs/krtest"), show_default=True)
@TRACKING
@DEVICE
def study(
    model: str,
    seed: int,
    seeds: str | None,
    data: Path | None,
    out: Path,
    tracking: str | None,
    **values: Unpack[_StudyValues],
) -> None:
    """The paper's study: blind and open-book baselines, full fine-tuning, LoRA on attention vs FFN."""
    from ..krtest.commands import study as study_module

    if data is not None and (values["entities"] is not None or values["validation_entities"] is not None):
        raise CctkError("--entities and --validation-entities size a generated corpus; --data brings its own")
    if data is None and (values["corpus"] is not None or values["validation"] is not None):
        raise CctkError("--corpus and --validation go with --data; a generated data set brings its own")
    if data is None and values["location"] != "char":  # the generated items count characters
        raise CctkError("--location says what the items of a --data folder count; a generated corpus counts characters")
    if seeds is not None:
        _study_seeds(model, seed, seeds, data, out, tracking, values)
        return
    config = study_module.make_study_config(model, seed, data, **values)
    study_module.run(config, out, tracking, echo=click.echo)  # its arms' accuracies, its folder and run printed


def _study_seeds(
    model: str, seed: int, seeds: str, data: Path | None, out: Path, tracking: str | None, values: _StudyValues
) -> None:
    from click.core import ParameterSource

    from ..core.config import seeds_or_count
    from ..krtest.commands import seeds as seeds_module, study as study_module

    if click.get_current_context().get_parameter_source("seed") is not ParameterSource.DEFAULT:
        raise CctkError("give --seed (one study) or --seeds (one study per seed), not both")
    chosen = seeds_or_count(seeds)
    config = study_module.make_study_config(model, chosen[0], data, **values)
    seeds_module.run(config, chosen, out, tracking, echo=click.echo)  # the pooled accuracies and its run printed
