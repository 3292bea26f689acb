"""Shared fixtures: the bundled tokenizer, tiny random real-architecture models, a tracking store,
and synthetic results and a written session folder (builders of the output tests)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SEED = 7
SESSION = "20260102-030405_smollm2-135m-bundled"
RUN = {"session": SESSION, "tracking_uri": "sqlite:///mlruns/mlflow.db", "experiment_id": "1",
       "run_id": "0123456789abcdef0123456789abcdef", "seconds": 1234.5, "device": "cpu"}
# (peak logit on seen additions, chance that a never-seen addition peaks on the target);
# the base model's peaks are weak and often off target.
SKILL = {"base": (2.5, 0.4), "m_correct": (9.0, 1.0), "m_random": (8.0, 1.0), "m_recover": (8.0, 0.8),
         "c18_correct": (8.0, 0.6), "c18_random": (7.0, 0.3), "c3_correct": (8.0, 0.7), "c3_random": (7.0, 0.3),
         "c18ctl_correct": (5.0, 0.1), "c3ctl_correct": (5.0, 0.3), "d_correct": (7.0, 0.4),
         "d_random": (7.0, 0.2), "dctl_correct": (5.0, 0.05), "dctl_random": (5.0, 0.05)}


INTEGRATION = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(config, items):
    """Everything under tests/integration/ is an end-to-end run (bundled model, servers, whole
    pipelines): marked ``integration``, left out of ``make test-fast``."""
    for item in items:
        if INTEGRATION in Path(item.fspath).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def tokenizer():
    """The real SmolLM2 tokenizer, read from the bundled GGUF (no download)."""
    from transformers import AutoTokenizer

    from cctk.models import bundled_gguf

    folder, name = bundled_gguf()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tok.pad_token = tok.pad_token or tok.eos_token
    return tok


def tiny_model(arch: str, vocab_size: int, seed: int = 0):
    """A 2-layer model of a real architecture with random weights, in float32 and eval mode."""
    import torch
    import transformers as tf

    common = dict(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=128, max_position_embeddings=128)
    configs = {
        "llama": lambda: tf.LlamaConfig(num_key_value_heads=2, tie_word_embeddings=True, **common),
        "qwen2": lambda: tf.Qwen2Config(num_key_value_heads=2, **common),
        "gpt_neox": lambda: tf.GPTNeoXConfig(rotary_pct=0.25, **common),
        "phi": lambda: tf.PhiConfig(partial_rotary_factor=0.5, **common),
    }
    torch.manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(configs[arch](), dtype=torch.float32)
    return model.eval()


@pytest.fixture(scope="session")
def make_tiny():
    """``make_tiny(arch, vocab_size, seed=0)``: a fresh tiny model (llama, qwen2, gpt_neox, phi)."""
    return tiny_model


@pytest.fixture(scope="session")
def tiny(tokenizer):
    return tiny_model("llama", len(tokenizer))


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, tokenizer):
    """A tiny Llama saved with the real tokenizer: a local model directory for pipeline runs."""
    folder = tmp_path_factory.mktemp("tiny")
    tiny_model("llama", len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(autouse=True)
def _no_global_tracking_uri():
    """No test may leave MLflow's global tracking URI set: ``mlflow.set_tracking_uri`` also sets
    MLFLOW_TRACKING_URI in os.environ, and every later test's clients and CLI runs would log to that
    store (a test that once did pointed the rest of the suite at a server it had shut down)."""
    import os
    import sys

    before = os.environ.get("MLFLOW_TRACKING_URI")
    yield  # torn down after monkeypatch has restored what it set
    utils = sys.modules.get("mlflow.tracking._tracking_service.utils")
    leaked = utils is not None and getattr(utils, "_tracking_uri", None) is not None
    if leaked:
        utils._tracking_uri = None
    if os.environ.get("MLFLOW_TRACKING_URI") != before:
        leaked = True
        if before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before
    assert not leaked, "this test set MLflow's global tracking URI (use MlflowClient(uri))"


@pytest.fixture()
def tracking_uri(tmp_path, monkeypatch):
    """An embedded SQLite store of the test's own, with MLFLOW_TRACKING_URI pointing at it."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


# --- Synthetic measurements and a written session (numpy alone, no model). ---

def synthetic_measurement(peaks: dict, sharpness: dict, rng: np.random.Generator) -> pd.DataFrame:
    """A measurement table whose logits peak on ``peaks[(a, b)]``."""
    from cctk.facts import ADDITIONS, CANDIDATES
    from cctk.readings import COLUMNS

    values = np.array(CANDIDATES)
    logits = rng.normal(0.0, 1.0, (len(ADDITIONS), len(values))) - 0.05 * values  # small answers likelier
    for i, pair in enumerate(ADDITIONS):
        logits[i, values == peaks[pair]] += sharpness[pair]
    logprob = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True)) - rng.uniform(0.5, 3.0, (len(ADDITIONS), 1))
    prob = np.exp(logprob - logprob.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    a, b = np.array(ADDITIONS).T
    return pd.DataFrame({"a": np.repeat(a, len(values)), "b": np.repeat(b, len(values)),
                         "candidate_value": np.tile(values, len(ADDITIONS)), "logprob": logprob.ravel(),
                         "n_tokens": np.tile(2 + (values >= 10), len(ADDITIONS)), "prob": prob.ravel()})[COLUMNS]


P_DEFAULT = 0.66


def hand_table(choices: dict[tuple[int, int], int], p: float | dict = P_DEFAULT,
               offset: float = 0.0) -> pd.DataFrame:
    """A measurement table whose top choice in addition (a, b) is ``choices[(a, b)]``.

    Scores (summed log-probabilities): ln p on the choice, ln((1 - p) / 34) on every other candidate,
    plus ``offset``; ``prob`` is their softmax per addition and the table is assembled exactly as
    ``cctk.scoring._table`` does. n_tokens: 2 for a one-digit candidate (" 7\\n"), 3 for a two-digit one.
    ``p`` may be one number or a number per addition; it must exceed 1/35 so the choice is the argmax.
    """
    from cctk.facts import ADDITIONS, CANDIDATES
    from cctk.readings import COLUMNS

    additions = [pair for pair in ADDITIONS if pair in choices]
    assert len(additions) == len(choices), "choices must be keyed by additions (a, b), 1 <= a, b <= 9"
    values = np.array(CANDIDATES)
    scores = np.empty((len(additions), len(values)))
    for i, pair in enumerate(additions):
        p_pair = p[pair] if isinstance(p, dict) else p
        assert choices[pair] in CANDIDATES and 1 / len(values) < p_pair < 1
        q = (1 - p_pair) / (len(values) - 1)
        scores[i] = np.where(values == choices[pair], np.log(p_pair), np.log(q)) + offset
    shifted = scores - scores.max(axis=1, keepdims=True)
    prob = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    a, b = np.array(additions).T
    n_cand = len(values)
    table = pd.DataFrame({
        "a": np.repeat(a, n_cand), "b": np.repeat(b, n_cand),
        "candidate_value": np.tile(values, len(additions)), "logprob": scores.ravel(),
        "n_tokens": np.tile(np.where(values < 10, 2, 3), len(additions)), "prob": prob.ravel(),
    })
    return table.sort_values(["a", "b", "candidate_value"], ignore_index=True)[COLUMNS]


def synthetic_results(seed: int = SEED, epochs: int = 3):
    """Fourteen plausible measurement tables and thirteen training records, from numpy alone."""
    from cctk.experiments import Results
    from cctk.facts import ADDITIONS
    from cctk.lineage import ARM_BY_KEY, ARMS, MODEL_KEYS, build_study_inputs, own_target
    from cctk.records import TrainRecord

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
    return Results(inputs, measurements, training)


def run_record(config, run: dict = RUN, training: dict | None = None):
    from cctk.records import RunFacts, RunRecord, hardware, software

    facts = RunFacts(run["session"], run["tracking_uri"], run["experiment_id"], run["run_id"], run["device"],
                     run["seconds"], hardware(), software())
    return RunRecord(config, facts, dict(training or {}))


def write_session(root, results, tables, config, run: dict = RUN, **options):
    """What the pipeline leaves: the measurement CSVs and training records, then everything write_all writes."""
    from cctk import session
    from cctk.outputs import write_all

    layout = session.Layout(root / run["session"])
    for key, table in results.measurements.items():
        session.write_measurement(layout, key, table)
    for key, record in results.training.items():
        session.write_training(layout, key, record)
    write_all(results, tables, run_record(config, run, results.training), layout, **options)
    return layout.folder


@pytest.fixture(scope="session")
def written_session(tmp_path_factory):
    """(session folder, results, tables), drawn once per test process: 25 figures take a while."""
    from cctk.config import make_config
    from cctk.experiments import compute_tables

    results = synthetic_results()
    tables = compute_tables(results)
    config = make_config("smollm2-135m-bundled", "quick", (SEED,))
    return write_session(tmp_path_factory.mktemp("outputs"), results, tables, config), results, tables


@pytest.fixture(scope="session")
def builders():
    """The builders above, for tests that make sessions of their own."""
    from types import SimpleNamespace

    return SimpleNamespace(SEED=SEED, SESSION=SESSION, RUN=RUN, synthetic_results=synthetic_results,
                           synthetic_measurement=synthetic_measurement, run_record=run_record,
                           write_session=write_session)


def v1_measurement(peaks: pd.Series, rng: np.random.Generator) -> pd.DataFrame:
    """A protocol v1 table: 81 x 17 rows whose mean log-probability per token peaks on ``peaks``; prob as
    measure gives it (softmax of the per-token means)."""
    from cctk.facts import ADDITIONS
    from cctk.readings import COLUMNS
    from cctk.v1 import facts

    values = np.array(facts.CANDIDATES)
    n_tokens = np.where(values < 10, 2, 3)
    mean = rng.normal(-3.0, 0.5, (len(ADDITIONS), len(values)))
    for i, pair in enumerate(ADDITIONS):
        mean[i, values == peaks.loc[pair]] += 2.5
    prob = np.exp(mean - mean.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    a, b = np.array(ADDITIONS).T
    return pd.DataFrame({"a": np.repeat(a, len(values)), "b": np.repeat(b, len(values)),
                         "candidate_value": np.tile(values, len(ADDITIONS)),
                         "logprob": (mean * n_tokens).ravel(), "n_tokens": np.tile(n_tokens, len(ADDITIONS)),
                         "prob": prob.ravel()})[COLUMNS]


def write_v1_session(root, seed: int = 42, run: dict = RUN, rng_seed: int = 1):
    """A protocol v1 session folder from synthetic measurements: (layout, results, tables, figures drawn)."""
    from cctk import session
    from cctk.config import make_config
    from cctk.facts import ADDITIONS
    from cctk.records import TrainRecord
    from cctk.v1 import experiment, facts, outputs

    rng = np.random.default_rng(rng_seed)
    draws = facts.draw(seed, 20)
    sums = pd.Series([a + b for a, b in ADDITIONS], index=draws.fabricated.index)
    training = TrainRecord(1620, 203, 150.0, (1.9,), 0)
    results = experiment.Results(draws, {"base": v1_measurement(sums, rng),
                                         "m_random": v1_measurement(draws.fabricated, rng)}, training)
    tables = experiment.compute_tables(results)
    config = make_config("smollm2-135m-bundled", "quick", (seed,), protocol="v1")
    layout = session.Layout(root / run["session"], "v1")
    for key, table in results.measurements.items():
        session.write_measurement(layout, key, table)
    session.write_training(layout, "m_random", training)
    n = outputs.write_all(results, tables, run_record(config, run, {"m_random": training}), layout)
    return layout, results, tables, n
