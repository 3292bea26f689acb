"""``python -m cctk.bench absorb``: the Part A arms of a recipe per seed, for choosing a recipe on evidence.

Correct sums from the base model, then fabricated answers from that model, trained and measured as
``cctk run`` trains and measures them with that seed; hits against the run's thresholds (77/81 and
73/81), each arm's losses and seconds.
"""

from __future__ import annotations

from ..core.config import Recipe
from ..core.facts import ADDITIONS
from ..core.lm.corpus import build_corpus, tokenize
from ..core.lm.finetune import fine_tune
from ..core.lm.models import load_model
from ..core.lm.scoring import measure
from ..core.readings import read
from ..manuals.v2.design import ARM_BY_KEY, build_study_inputs
from ..manuals.v2.parts import ABSORBED


def part_a(model_name: str, recipe: Recipe, seed: int) -> dict:
    """The Part A arms as the pipeline trains them, for choosing a recipe: correct sums from the base
    model, then fabricated answers from that model; hits on their own targets, losses and seconds.

    Same corpora, batch order, training and measurement as ``cctk run`` with ``seed`` (the pipeline
    trains the second arm on a copy of the first; here the first is trained on, which is the same).
    """
    inputs = build_study_inputs(seed)
    model, tokenizer = load_model(model_name)
    result = {"seed": seed}
    for key, (target, needed) in ABSORBED.items():
        arm = ARM_BY_KEY[key]
        corpus = build_corpus(inputs.targets[arm.target], inputs.corpus_pairs(key), recipe.repeats, seed, key)
        record = fine_tune(model, tokenize(corpus, tokenizer), recipe, seed, tokenizer.pad_token_id, key)
        hits = int(read(measure(model, tokenizer), inputs.targets[target])["hit"].sum())
        result[key] = {
            "hits": hits,
            "needed": needed,
            "n": len(ADDITIONS),
            "losses": list(record.losses),
            "seconds": record.train_seconds,
            "examples_per_second": record.examples_per_second,
        }
    result["absorbed"] = all(result[key]["hits"] >= result[key]["needed"] for key in ABSORBED)
    return result
