"""``cctk krtest``: generate a data set, evaluate a model, train with KR-Test curves, run the study."""
from __future__ import annotations

from pathlib import Path

import click

from ..models import BUNDLED
from .generate import ENTITIES, VALIDATION_ENTITIES
from . import DEFAULT_BUDGET

OUT_DIR = click.Path(file_okay=False, path_type=Path)
IN_FILE = click.Path(dir_okay=False, path_type=Path)


@click.group("krtest")
def krtest():
    """KR-Test: what a model retains of a corpus, not only its perplexity (seed 003, "Beyond Perplexity")."""


@krtest.command()
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every draw (same seed, same bytes).")
@click.option("--out", type=OUT_DIR, required=True, help="Folder for corpus.txt, questions.jsonl, validation.txt.")
@click.option("--entities", type=int, default=ENTITIES, show_default=True,
              help="People in the corpus (even; six questions each).")
@click.option("--validation-entities", type=int, default=VALIDATION_ENTITIES, show_default=True,
              help="Other people, in the validation text only (even).")
def generate(seed, out, entities, validation_entities):
    """Write a seeded corpus about fictional people, its questions and a validation text."""
    from .generate import check_seed, make_dataset, write_dataset

    check_seed(seed)
    dataset = make_dataset(seed, entities, validation_entities)
    paths = write_dataset(dataset, out)
    click.echo(f"{len(dataset.items)} questions about {entities} people, validation text about "
               f"{validation_entities} others: {', '.join(str(p) for p in paths.values())}")


@krtest.command("eval")
@click.option("--model", default=BUNDLED, show_default=True, help="Roster key, Hub id or local directory.")
@click.option("--questions", type=IN_FILE, required=True,
              help="JSONL items: context, sentence_true, sentence_false, location.")
@click.option("--corpus", type=IN_FILE, default=None, help="The corpus the items' locations point into.")
@click.option("--open-book", "book", is_flag=True,
              help="Put each item's source passage before its context (the oracle).")
@click.option("--out", type=OUT_DIR, required=True, help="Folder for items.csv and summary.json.")
@click.option("--tracking", default=None, help="Tracking configuration name or URI (default: embedded).")
def eval_command(model, questions, corpus, book, out, tracking):
    """Score one model on a question file; print its accuracy with an exact 95% interval."""
    from .jobs import run_eval

    run_eval(model, questions, out, corpus, book, tracking, echo=click.echo)


@krtest.command()
@click.option("--model", default=BUNDLED, show_default=True, help="Roster key, Hub id or local directory.")
@click.option("--corpus", type=IN_FILE, required=True, help="The text to fine-tune on (passages split by blank lines).")
@click.option("--questions", type=IN_FILE, required=True, help="KR-Test items about the corpus (JSONL).")
@click.option("--validation", type=IN_FILE, default=None,
              help="Text for validation perplexity (default: validation.txt beside the corpus).")
@click.option("--method", type=click.Choice(["full", "lora"]), default="full", show_default=True)
@click.option("--modules", type=click.Choice(["attention", "ffn"]), default=None, help="LoRA placement.")
@click.option("--budget", type=int, default=DEFAULT_BUDGET, show_default=True,
              help="LoRA: trainable parameters aimed at (the closest rank is chosen).")
@click.option("--eval-every", type=int, default=None, help="Optimizer steps between evaluations [default: 9].")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--epochs", type=int, default=None, help="Override: passes over the corpus.")
@click.option("--learning-rate", type=float, default=None, help="Override: AdamW learning rate.")
@click.option("--batch-size", type=int, default=None, help="Override: passages per optimizer step.")
@click.option("--grad-clip", type=float, default=None, help="Override: gradient-norm clipping.")
@click.option("--weight-decay", type=float, default=None, help="Override: AdamW weight decay.")
@click.option("--schedule", type=click.Choice(["constant", "linear"]), default=None,
              help="Override: learning-rate schedule.")
@click.option("--warmup", type=float, default=None, help="Override: share of steps of linear warm-up.")
@click.option("--max-tokens", type=int, default=None,
              help="Longest training row; longer passages are cut [default: 256].")
@click.option("--out", type=OUT_DIR, required=True, help="Folder for items.csv, summary.json, curve.csv.")
@click.option("--tracking", default=None, help="Tracking configuration name or URI (default: embedded).")
def train(model, corpus, questions, validation, method, modules, seed, out, tracking, **values):
    """Fine-tune on a corpus (full or LoRA), KR accuracy and validation perplexity every K steps."""
    from .jobs import read_inputs, run_train
    from .train import make_train_config

    config = make_train_config(method, modules, seed, **values)
    inputs = read_inputs(questions, corpus, validation, need_corpus=True, need_validation=True)
    run_train(model, inputs, config, out, tracking, echo=click.echo)


@krtest.command()
@click.option("--model", default=BUNDLED, show_default=True, help="Roster key, Hub id or local directory.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the data set, batch order and adapters.")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A folder written by `cctk krtest generate` (default: generate one from the seed).")
@click.option("--entities", type=int, default=None, help=f"People in a generated corpus [default: {ENTITIES}].")
@click.option("--validation-entities", type=int, default=None,
              help=f"People in a generated validation text [default: {VALIDATION_ENTITIES}].")
@click.option("--budget", type=int, default=None, help=f"LoRA trainable parameters [default: {DEFAULT_BUDGET}].")
@click.option("--eval-every", type=int, default=None, help="Optimizer steps between evaluations [default: 9].")
@click.option("--epochs", type=int, default=None, help="Override: passes over the corpus, every trained arm.")
@click.option("--batch-size", type=int, default=None, help="Override: passages per step, every trained arm.")
@click.option("--full-learning-rate", type=float, default=None, help="Override: learning rate of full fine-tuning.")
@click.option("--lora-learning-rate", type=float, default=None, help="Override: learning rate of both LoRA arms.")
@click.option("--out", type=OUT_DIR, default=Path("outputs/krtest"), show_default=True,
              help="Folder that receives the session folder.")
@click.option("--tracking", default=None, help="Tracking configuration name or URI (default: embedded).")
def study(model, seed, data, out, tracking, **values):
    """The paper's study: blind and open-book baselines, full fine-tuning, LoRA on attention vs FFN."""
    from . import study as study_module

    config = study_module.make_study_config(model, seed, data, **values)
    outcome = study_module.run(config, out, tracking, echo=click.echo)
    for key, name in study_module.ARMS.items():
        s = outcome.summaries[key]
        click.echo(f"{name:<20} {100 * s.accuracy:5.1f}% [{100 * s.lo:.1f}-{100 * s.hi:.1f}]")
