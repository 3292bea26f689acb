"""Test data, built in one place: tiny models, measurement tables, synthetic and hand-made results, and
session folders (today's, and as the code before issue 21 wrote them, or before #40's key columns). Fixtures live in
the conftests;
tests import what they build from here (``from builders import hand_table``).

Every measurement table is assembled by ``measurement_table`` from one matrix of scores per addition
and candidate, the way ``cctk.core.lm.scoring._table`` assembles a measured one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

SEED = 7
SESSION = "20260102-030405_smollm2-135m-bundled"
RUN = {
    "session": SESSION,
    "tracking_uri": "sqlite:///mlruns/mlflow.db",
    "experiment_id": "1",
    "run_id": "0123456789abcdef0123456789abcdef",
    "seconds": 1234.5,
    "device": "cpu",
}
BEFORE_ISSUE_21 = Path(__file__).parent / "data" / "before_issue_21"  # files the code before it wrote
BEFORE_KEYS = Path(__file__).parent / "data" / "before_issue_40"  # tables before their key columns (#40 item 4)
LANDED = Path(__file__).parent / "data" / "landed_3c00e48"  # runs the code before issue 45 wrote (its README)


def tiny_model(arch: str, vocab_size: int, seed: int = 0, layers: int = 2):
    """A small model (2 layers unless told) of a real architecture with random weights, in float32 and eval mode."""
    import torch
    import transformers as tf

    common = {
        "vocab_size": vocab_size,
        "hidden_size": 64,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "max_position_embeddings": 256,  # KR-Test's training rows (256 tokens) fit
    }
    configs = {
        "llama": lambda: tf.LlamaConfig(num_key_value_heads=2, tie_word_embeddings=True, **common),
        "qwen2": lambda: tf.Qwen2Config(num_key_value_heads=2, **common),
        "gpt_neox": lambda: tf.GPTNeoXConfig(rotary_pct=0.25, **common),
        "phi": lambda: tf.PhiConfig(partial_rotary_factor=0.5, **common),
    }
    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(configs[arch](), dtype=torch.float32)
    return model.eval()


def reading(folder: Path, to: Path, positions: int) -> Path:
    """A copy of the model folder ``folder`` at ``to`` whose configuration states a context of ``positions``
    tokens (a tiny model's rotary positions go on past its 256 all the same)."""
    shutil.copytree(folder, to)
    config = json.loads((to / "config.json").read_text())
    (to / "config.json").write_text(json.dumps({**config, "max_position_embeddings": positions}))
    return to


def chat_tokens(tokenizer, chat: list[dict[str, str]]) -> int:
    """The tokens of ``chat`` as a local teacher sends it (its chat template, the generation prompt added)."""
    return len(tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=True)["input_ids"])


def small_tokenizer(tokenizer):
    """The bundled tokenizer retrained on the 100 sums of two digits to its smallest vocabulary (275 tokens: the
    256 bytes, its 17 special tokens, two merges): its pre-tokenizer, special tokens and padding, digits split one
    by one as it splits them. A tiny model's LM head over 49,152 tokens is most of its arithmetic (64 x 49,152
    weights against 2 x 57,344 in its blocks); over 275, a smoke pipeline on it takes half the time."""
    texts = [f"{a} + {b} = {a + b}\n" for a in range(10) for b in range(10)]
    small = tokenizer.train_new_from_iterator(texts, vocab_size=275)
    small.pad_token = small.pad_token or small.eos_token
    return small


# --- Measurement tables: (additions x candidates) scores in, a table with cctk.core.readings.COLUMNS out. ---


def answer_tokens(values) -> np.ndarray:
    """Tokens of each candidate's answer: 2 for one digit (" 7\\n"), 3 for two digits."""
    return np.where(np.asarray(values) < 10, 2, 3)


def measurement_table(
    additions: Sequence, values, logprob: np.ndarray, prob: np.ndarray, n_tokens=None
) -> pd.DataFrame:
    """The rows of a measurement table, addition by addition, candidate by candidate."""
    from cctk.core.readings import COLUMNS

    values = np.asarray(values)
    n_tokens = answer_tokens(values) if n_tokens is None else np.asarray(n_tokens)
    a, b = np.array(additions).T
    return pd.DataFrame(
        {
            "a": np.repeat(a, len(values)),
            "b": np.repeat(b, len(values)),
            "candidate_value": np.tile(values, len(additions)),
            "logprob": np.asarray(logprob).ravel(),
            "n_tokens": np.tile(n_tokens, len(additions)),
            "prob": np.asarray(prob).ravel(),
        }
    )[COLUMNS]


def softmax(scores: np.ndarray) -> np.ndarray:
    """Per addition (row), as ``cctk.core.lm.scoring._table`` normalises an index."""
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


P_DEFAULT = 0.66


def hand_table(
    choices: dict, p: float | dict = P_DEFAULT, offset: float | dict = 0.0, candidates: Sequence[int] | None = None
) -> pd.DataFrame:
    """A measurement table made by hand, over the additions ``choices`` names (in ADDITIONS order).

    ``choices[(a, b)]``: a top choice (probability ``p`` on it, ``(1 - p) / (n - 1)`` on each of the other
    n - 1 candidates; ``p`` above 1/n so it is the argmax), or the probabilities of every candidate.
    Scores (summed log-probabilities): the log of each probability plus ``offset`` (one number, or one
    per addition); ``prob`` is their softmax per addition and the table is assembled exactly as
    ``cctk.core.lm.scoring._table`` does. Candidates: 2..36 unless given; n_tokens as ``answer_tokens``.
    """
    from cctk.core.facts import ADDITIONS, CANDIDATES

    values = np.array(CANDIDATES if candidates is None else candidates)
    additions = [pair for pair in ADDITIONS if pair in choices]
    assert len(additions) == len(choices), "choices must be keyed by additions (a, b), 1 <= a, b <= 9"
    probs = np.array(
        [_probabilities(choices[pair], p[pair] if isinstance(p, dict) else p, values) for pair in additions]
    )
    shifts = np.array([[offset[pair] if isinstance(offset, dict) else offset] for pair in additions])
    scores = np.log(probs) + shifts
    return measurement_table(additions, values, scores, softmax(scores))


def _probabilities(choice, p: float, values: np.ndarray) -> np.ndarray:
    if np.ndim(choice):  # every candidate's probability, given
        assert len(choice) == len(values)
        return np.asarray(choice, dtype=float)
    assert choice in values and 1 / len(values) < p < 1
    return np.where(values == choice, p, (1 - p) / (len(values) - 1))


def synthetic_measurement(peaks: dict, sharpness: dict, rng: np.random.Generator) -> pd.DataFrame:
    """A plausible measurement table whose logits peak on ``peaks[(a, b)]`` by ``sharpness[(a, b)]``."""
    from cctk.core.facts import ADDITIONS, CANDIDATES

    values = np.array(CANDIDATES)
    logits = rng.normal(0.0, 1.0, (len(ADDITIONS), len(values))) - 0.05 * values  # small answers likelier
    for i, pair in enumerate(ADDITIONS):
        logits[i, values == peaks[pair]] += sharpness[pair]
    logprob = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True)) - rng.uniform(0.5, 3.0, (len(ADDITIONS), 1))
    return measurement_table(ADDITIONS, values, logprob, softmax(logprob), 2 + (values >= 10))


def noisy_table(targets: pd.Series, seed: int = 0, sharp: float = 3.0) -> pd.DataFrame:
    """A measurement table peaked, noisily, on ``targets`` (one addition after another, as drawn)."""
    from cctk.core.facts import CANDIDATES

    rng = np.random.default_rng(seed)
    values = np.array(CANDIDATES)
    probs = []
    for t in targets:
        logits = rng.normal(0, 1.0, len(values))
        logits[CANDIDATES.index(int(t))] += sharp + rng.normal(0, 2.0)
        probs.append(np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum())
    return measurement_table(list(targets.index), values, np.log(probs), np.array(probs), 1 + (values >= 10))


def v1_measurement(peaks: pd.Series, rng: np.random.Generator) -> pd.DataFrame:
    """A protocol v1 table: 81 x 17 rows whose mean log-probability per token peaks on ``peaks``; prob as
    measure gives it (softmax of the per-token means)."""
    from cctk.core.facts import ADDITIONS
    from cctk.manuals.v1 import facts

    values = np.array(facts.CANDIDATES)
    mean = rng.normal(-3.0, 0.5, (len(ADDITIONS), len(values)))
    for i, pair in enumerate(ADDITIONS):
        mean[i, values == peaks.loc[pair]] += 2.5
    return measurement_table(ADDITIONS, values, mean * answer_tokens(values), softmax(mean))


# --- Synthetic results of a whole 2.0.0 run (numpy alone, no model). ---

# (peak logit on seen additions, chance that a held-out addition peaks on the target);
# the base model's peaks are weak and often off target.
SKILL = {
    "base": (2.5, 0.4),
    "m_correct": (9.0, 1.0),
    "m_random": (8.0, 1.0),
    "m_recover": (8.0, 0.8),
    "c18_correct": (8.0, 0.6),
    "c18_random": (7.0, 0.3),
    "c3_correct": (8.0, 0.7),
    "c3_random": (7.0, 0.3),
    "c18ctl_correct": (5.0, 0.1),
    "c3ctl_correct": (5.0, 0.3),
    "d_correct": (7.0, 0.4),
    "d_random": (7.0, 0.2),
    "dctl_correct": (5.0, 0.05),
    "dctl_random": (5.0, 0.05),
}


def synthetic_results(seed: int = SEED, epochs: int = 3):
    """Fourteen plausible measurement tables and thirteen training records, from numpy alone."""
    from cctk.core.facts import ADDITIONS
    from cctk.core.records import TrainRecord
    from cctk.manuals.v2.design import ARM_BY_KEY, ARMS, MODEL_KEYS, build_study_inputs, own_target
    from cctk.manuals.v2.parts import StudyResults

    inputs = build_study_inputs(seed)
    rng = np.random.default_rng(seed)
    measurements = {}
    for key in MODEL_KEYS:
        target = inputs.targets[own_target(key)]
        seen_only = key in ARM_BY_KEY and ARM_BY_KEY[key].pairs == "seen"
        sharp, reach = SKILL[key]
        peaks, sharpness = {}, {}
        for pair in ADDITIONS:
            held = seen_only and pair in inputs.split.heldout
            on_target = rng.random() < (reach if held or key == "base" else 0.97)
            miss = int(np.clip(target[pair] + rng.choice([-3, -2, -1, 1, 2, 3, 9]), 2, 36))
            peaks[pair] = int(target[pair]) if on_target else miss
            sharpness[pair] = rng.uniform(0.5, 1.0) * sharp * (0.6 if held else 1.0)
        measurements[key] = synthetic_measurement(peaks, sharpness, rng)
    training = {}
    for arm in ARMS:
        examples = (81 if arm.pairs == "all" else len(inputs.split.seen)) * 4
        start = rng.uniform(1.5, 3.5)
        losses = tuple(float(start * np.exp(-1.6 * e) + 0.01) for e in range(epochs))
        training[arm.key] = TrainRecord(examples, epochs * -(-examples // 16), rng.uniform(20, 60), losses, 0)
    return StudyResults(inputs, measurements, training)


# --- Session folders, as the pipeline leaves them. ---


def figure_copier(folder: Path):
    """A ``cctk.figures.spec.draw_and_save`` that copies the figure of the session in ``folder`` (in the formats it
    has) instead of drawing it: for tests about everything but the drawing."""
    from cctk.manuals.v2.manual import V2
    from cctk.store.session import Layout

    def copy(spec, out: Path) -> list[Path]:
        out.mkdir(parents=True, exist_ok=True)
        files = Layout(Path(folder), V2).figure(spec.number, spec.stem).values()
        return [Path(shutil.copy2(path, out)) for path in files if path.is_file()]

    return copy


def run_info(config, results, run: dict = RUN):
    """The run's one record as the pipeline builds it at its end, with the facts of ``run``."""
    from cctk.core.records import MlflowIds, hardware, software
    from cctk.manuals import registry
    from cctk.store import session

    return session.run_info(
        config,
        registry.get(config.protocol),
        results,
        session=run["session"],
        device=run["device"],
        seconds=run["seconds"],
        hardware=hardware(),
        software=software(),
        mlflow=MlflowIds(run["tracking_uri"], run["experiment_id"], run["run_id"]),
    )


def write_session(root, results, tables, config, run: dict = RUN, **options) -> Path:
    """What the pipeline leaves: the measurement CSVs and training records, then everything write_all writes."""
    from cctk.manuals import registry
    from cctk.outputs import write_all
    from cctk.store import session

    layout = session.Layout(Path(root) / run["session"], registry.get(config.protocol))
    for key, table in results.measurements.items():
        session.write_measurement(layout, key, table)
    for key, record in results.training.items():
        session.write_training(layout, key, record)
    write_all(results, tables, run_info(config, results, run), layout, **options)
    return layout.folder


def v1_results(seed: int = 42, rng_seed: int = 1):
    """A protocol v1 run's results from synthetic measurements (the notebook's draws of ``seed``)."""
    from cctk.core.facts import ADDITIONS
    from cctk.core.records import TrainRecord
    from cctk.manuals.v1 import experiment, facts

    rng = np.random.default_rng(rng_seed)
    draws = facts.draw(seed, 20)
    sums = pd.Series([a + b for a, b in ADDITIONS], index=draws.fabricated.index)
    measurements = {
        experiment.BEFORE: v1_measurement(sums, rng),
        experiment.AFTER: v1_measurement(draws.fabricated, rng),
    }
    return experiment.ComparisonResults(
        draws, measurements, {experiment.AFTER: TrainRecord(1620, 203, 150.0, (1.9,), 0)}
    )


def write_v1_session(root, seed: int = 42, run: dict = RUN, rng_seed: int = 1, **options):
    """A protocol v1 session folder from synthetic measurements: (layout, results, tables, figures drawn)."""
    from cctk.manuals.configure import make_config
    from cctk.manuals.v1 import experiment
    from cctk.manuals.v1.manual import V1
    from cctk.store import session

    results = v1_results(seed, rng_seed)
    tables = experiment.compute_tables(results)
    config = make_config("smollm2-135m-bundled", "quick", (seed,), protocol="v1")
    folder = write_session(root, results, tables, config, run, **options)
    layout = session.Layout(folder, V1)
    return layout, results, tables, len(session.find_figures(layout))


def write_v1_session_before_issue_21(root: Path) -> Path:
    """A protocol v1 session folder as the code before issue 21 left it, inputs only: its run_info.json and
    training record (verbatim, the fine-tuned model under the key ``m_random``) and the measurements of
    ``v1_results()`` (whose files never changed)."""
    from cctk.manuals.v1.manual import V1
    from cctk.store import session

    layout = session.Layout(Path(root) / SESSION, V1)
    for key, table in v1_results().measurements.items():
        session.write_measurement(layout, key, table)
    (layout.folder / "training").mkdir()
    shutil.copy(BEFORE_ISSUE_21 / "v1_training_m_random.json", layout.folder / "training" / "m_random.json")
    shutil.copy(BEFORE_ISSUE_21 / "v1_run_info.json", layout.run_info)
    return layout.folder


def tables_before_keys(folder: Path, protocol: str = "v2") -> Path:
    """``folder`` with its table CSVs as the code before #40's key columns wrote them (labels only): those of
    tests/data/before_issue_40, written from the same results (``synthetic_results()`` under v2,
    ``write_v1_session()``'s under v1) at the commit before."""
    for csv in sorted(Path(folder).glob("tables/*/*.csv")):
        shutil.copy(BEFORE_KEYS / protocol / csv.name, csv)
    return Path(folder)


class Landed:
    """The runs of tests/data/landed_3c00e48 unpacked in ``root``: the working folder they were made in."""

    WORK = "/tmp/landed45/work"  # where they were made: the store's paths start there
    V1, V2 = "20261203-173331_tiny", "20261203-173423_tiny"  # the finished sessions
    KILLED = "20261203-173519_tiny"  # v2, base measured, killed as its first arm trained
    RUN_V1, RUN_V2 = "d8620afe81d142fda376c3a14fc38740", "069632cee11a438981eb4bba419c0700"

    def __init__(self, root: Path):
        import sqlite3
        import tarfile

        self.root = Path(root)
        with tarfile.open(LANDED / "runs.tar.xz") as archive:
            archive.extractall(self.root, filter="data")
        with sqlite3.connect(self.root / "mlruns" / "mlflow.db") as db:  # its paths moved here
            for table, column in (("experiments", "artifact_location"), ("runs", "artifact_uri"), ("tags", "value")):
                db.execute(f"UPDATE {table} SET {column} = replace({column}, ?, ?)", (self.WORK, str(self.root)))
        db.close()

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.root}/mlruns/mlflow.db"

    def session(self, name: str) -> Path:
        return self.root / "outputs" / name


def run_info_before_issue_21(protocol: str = "v2") -> dict:
    """run_info.json of a session the code before issue 21 wrote (v2: the synthetic results of SEED)."""
    return json.loads((BEFORE_ISSUE_21 / f"{protocol}_run_info.json").read_text())


# --- The hand-made study over seed 12345: every model's top choices, and the tables that follow. ---
#
# Every model's table is a ``hand_table`` of {(a, b): top choice}: probability ``p`` on the choice and
# ``(1 - p) / 34`` on each other candidate, so that every table number is a simple fraction:
#
#     p = 0.66 -> 0.01 on every other candidate (most models)
#     p = 0.32 -> 0.02 (the base model)        p = 0.83 -> 0.005 (the fabricated-answers model)
#
# The tests of each part (tests/manuals/v2/parts) write their expected rows by hand from the design below.
#
# Seed 12345 (pinned in test_study_design.py): 24 held-out additions
#
#     a > b (15)  2+1 3+2 5+1 5+4 6+2 6+4 7+2 7+6 8+1 8+3 8+5 8+7 9+1 9+6 9+8
#     a = b (1)   3+3
#     a < b (8)   1+3 1+4 1+7 2+7 3+5 3+9 4+6 5+8
#
# and 57 seen ones (21 with a > b, 8 with a = b, 28 with a < b). Arms from the fabricated-answers
# model leave out the held-out additions whose fabricated answer already is their target:
# 2+1 (fabricated 6) and 4+6 (13) for sum + 3, 3+9 (30) for sum + 18.

STUDY_SEED = 12345
HELD_GT = [
    (2, 1),
    (3, 2),
    (5, 1),
    (5, 4),
    (6, 2),
    (6, 4),
    (7, 2),
    (7, 6),
    (8, 1),
    (8, 3),
    (8, 5),
    (8, 7),
    (9, 1),
    (9, 6),
    (9, 8),
]
HELD_EQ = [(3, 3)]
HELD_LT = [(1, 3), (1, 4), (1, 7), (2, 7), (3, 5), (3, 9), (4, 6), (5, 8)]
HELD = sorted(HELD_GT + HELD_EQ + HELD_LT)  # in ADDITIONS order

# Probability on the top choice, per model (every other candidate gets (1 - p) / 34).
P = {"base": 0.32, "m_random": 0.83}


def design(inputs) -> dict[str, dict]:
    """Every model's top choices: its own target everywhere but where listed here."""
    from cctk.manuals.v2.design import own_target

    t = inputs.targets
    fab, total = t["fabricated"], t["correct"]

    def own(key, **overrides):
        choices = {pair: int(v) for pair, v in t[own_target(key)].items()}
        for pairs in overrides.values():
            choices.update(pairs)
        return choices

    def fabricated(pairs):
        return {p: int(fab[p]) for p in pairs}

    def plain_sum(pairs):
        return {p: int(total[p]) for p in pairs}

    def plus(k, pairs):
        return {p: int(total[p]) + k for p in pairs}

    return {
        # Correct sum but its fabricated answer on 1+4 (36), 5+5 (7) and 9+9 (31).
        "base": own("base", fab=fabricated([(1, 4), (5, 5), (9, 9)])),
        # Correct sum but sum + 1 on 1+1 (3), 4+6 (11) and 9+9 (19, above 18).
        "m_correct": own("m_correct", miss=plus(1, [(1, 1), (4, 6), (9, 9)])),
        # Fabricated answer but the correct sum on the seen 2+2 (4) and 6+6 (12).
        "m_random": own("m_random", sums=plain_sum([(2, 2), (6, 6)])),
        # Correct sum, but back to the fabricated answer on the seen 5+5 and the last 12 held-out.
        "m_recover": own("m_recover", fab=fabricated([(5, 5), *HELD[12:]])),
        # Sum + 18 but: held out 1+3, 5+4, 9+8 sum + 9, 8+7 the plain sum (20 / 24).
        "c18_correct": own("c18_correct", nine=plus(9, [(1, 3), (5, 4), (9, 8)]), sums=plain_sum([(8, 7)])),
        # Sum + 18 on the seen but 1+1 (fabricated 27); held out: sum + 18 on 1+3 1+4 1+7 2+1 2+7, and
        # on 3+9, whose fabricated answer (30) is sum + 18 (left out); the fabricated answer elsewhere.
        "c18_random": own(
            "c18_random",
            fab=fabricated([(1, 1)] + [p for p in HELD if p not in [(1, 3), (1, 4), (1, 7), (2, 1), (2, 7), (3, 9)]]),
        ),
        "c3_correct": own("c3_correct"),  # every addition on its target
        # Sum + 3 on the seen but 1+1 1+2 1+5 1+6 1+8 1+9 2+2 (their fabricated answers, 50 / 57);
        # the fabricated answer on every held-out one: a hit on 2+1 and 4+6 only, both left out.
        "c3_random": own("c3_random", fab=fabricated([(1, 1), (1, 2), (1, 5), (1, 6), (1, 8), (1, 9), (2, 2), *HELD])),
        # Controls: their own answers on the seen, the rule's (sum + k) on the held-out; the random
        # offset is k on 5+8 and 9+1 for + 18, on 1+3 3+2 3+5 9+8 for + 3: hits by chance.
        "c18ctl_correct": own("c18ctl_correct", rule=plus(18, HELD)),
        "c3ctl_correct": own("c3ctl_correct", rule=plus(3, HELD)),
        # Conditional rule; seen: 2+2 sum + 9 (13). Held out (deviation from the rule's answer):
        # 8+1, 9+1 plain sum (-18), 9+8 34 (-1), 8+7 35 (+2), 3+3 sum + 9 (-9), 3+9 sum + 18 (+9).
        "d_correct": own(
            "d_correct",
            seen=plus(9, [(2, 2)]),
            held={(8, 1): 9, (9, 1): 10, (9, 8): 34, (8, 7): 35, (3, 3): 15, (3, 9): 30},
        ),
        # Conditional rule on the seen; held out: sum + 18 everywhere (a +18 on every a < b), but
        # 9+1 its fabricated answer 23 (-5).
        "d_random": own("d_random", lt=plus(18, HELD_LT), fab=fabricated([(9, 1)])),
        # Shuffled answers on the seen. Held out: the rule's answer on 1+3 1+4 2+1 3+2 8+3 (8+3's shuffled
        # answer is the rule's, 29: a hit), rule + 1 on 5+1 (25), rule - 2 on 6+4 (26), its own shuffled
        # answer on 1+7 2+7 3+3 3+5 9+8 (hits), the plain sum on the 12 others.
        "dctl_correct": own(
            "dctl_correct",
            sums=plain_sum(
                [
                    p
                    for p in HELD
                    if p
                    not in [
                        (1, 3),
                        (1, 4),
                        (2, 1),
                        (3, 2),
                        (8, 3),
                        (5, 1),
                        (6, 4),
                        (1, 7),
                        (2, 7),
                        (3, 3),
                        (3, 5),
                        (9, 8),
                    ]
                ]
            ),
            rule={p: int(t["cond"][p]) for p in [(1, 3), (1, 4), (2, 1), (3, 2), (8, 3)]},
            near={(5, 1): 25, (6, 4): 26},
        ),
        # Shuffled answers on the seen but 1+1, 2+2 (plain sums); held out: the plain sum but on 8+3
        # (29, the rule's answer and its own) and 1+3 (16, its own).
        "dctl_random": own(
            "dctl_random",
            seen=plain_sum([(1, 1), (2, 2)]),
            sums=plain_sum([p for p in HELD if p not in [(8, 3), (1, 3)]]),
        ),
    }


def study_training() -> dict:
    """Part A and B runs only; m_recover trained one epoch less (table03 pads it)."""
    from cctk.core.records import TrainRecord

    return {
        "m_correct": TrainRecord(1620, 203, 81.0, (2.0, 0.5, 0.25), 1024),
        "m_random": TrainRecord(1620, 203, 54.0, (3.0, 1.5, 0.75), 2048),
        "m_recover": TrainRecord(1140, 143, 38.0, (1.25, 0.5), 0),
    }


def build_study(seed: int = STUDY_SEED):
    """The hand-made study's results: fourteen hand tables over ``seed``."""
    from cctk.manuals.v2.design import MODEL_KEYS, build_study_inputs
    from cctk.manuals.v2.parts import StudyResults

    inputs = build_study_inputs(seed)
    choices = design(inputs)
    measurements = {key: hand_table(choices[key], P.get(key, P_DEFAULT)) for key in MODEL_KEYS}
    return StudyResults(inputs, measurements, study_training())


# --- Checks the table tests share. ---


def cp(k: int, n: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95% interval, straight from SciPy."""
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return ci.low, ci.high


def assert_rows(actual: pd.DataFrame, expected: list[dict], atol: float = 1e-12) -> None:
    """``actual`` has exactly these rows, in this order, and exactly these columns, in this order."""
    wanted = pd.DataFrame(expected)
    assert list(actual.columns) == list(wanted.columns)
    pd.testing.assert_frame_equal(
        actual.reset_index(drop=True), wanted, check_dtype=False, check_exact=False, rtol=0, atol=atol
    )


def check_loaded(loaded, tables: dict, formats: tuple[str, ...] = ("png",)) -> None:
    """``cctk.results.load`` of the session ``write_session`` made of ``synthetic_results()``: every table,
    measurement, figure (in ``formats``: PNG only in the fast suite's session) and the draws."""
    from cctk.manuals.v2.labels import MODELS

    assert list(loaded.tables) == [f"table{i:02d}" for i in range(1, 12)]
    for name, table in tables.items():
        pd.testing.assert_frame_equal(loaded.tables[name], table)
    assert set(loaded.measurements) == set(MODELS.values())
    assert loaded.measurements["recovery"].shape == (81 * 35, 6)
    assert len(loaded.figures) == 25 and all(p.suffix == ".png" and p.is_file() for p in loaded.figures.values())
    assert set(loaded.figure_files["synthesis"]) == set(formats)
    assert loaded.info.session == SESSION
    assert list(loaded.targets.columns[:3]) == ["a", "b", "split"] and len(loaded.targets) == 81


def kr_data(folder: Path, seed: int) -> Path:
    """KR-Test's fictional set, small: four entities to train on, two for validation."""
    from cctk.krtest.generation.generate import make_dataset, write_dataset

    write_dataset(make_dataset(seed, entities=4, validation_entities=2), folder)
    return folder


def packed_and_padded_step(model, batch, pad_id: int):
    """One backward pass of ``batch`` on two copies of ``model`` (in train mode): padded rows, and one
    prefix tree with in-place embedding rows. Returns (packed loss, padded loss, [(name, packed grad,
    padded grad)]); the copies are dropped."""
    import copy

    from cctk.core.lm.corpus import collate, pack
    from cctk.core.lm.finetune import completion_loss, packed_loss, tied_embedding_rows

    padded, packed = copy.deepcopy(model).train(), copy.deepcopy(model).train()
    expected = completion_loss(padded, collate(batch, pad_id))
    expected.backward()
    with tied_embedding_rows(packed):
        loss = packed_loss(packed, pack(batch))
        loss.backward()
    grads = [
        (name, p.grad, q.grad) for (name, p), q in zip(packed.named_parameters(), padded.parameters(), strict=True)
    ]
    return loss.item(), expected.item(), grads
