"""Shared fixtures: the bundled tokenizer and tiny, randomly initialised real-architecture models."""
from __future__ import annotations

import pytest
import torch


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
def tiny(tokenizer):
    return tiny_model("llama", len(tokenizer))


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, tokenizer):
    """A tiny Llama saved with the real tokenizer: a local model directory for pipeline runs."""
    folder = tmp_path_factory.mktemp("tiny")
    tiny_model("llama", len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture()
def tracking_uri(tmp_path, monkeypatch):
    """An embedded SQLite store of the test's own, with MLFLOW_TRACKING_URI pointing at it."""
    import mlflow

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)  # an earlier test's cctk.tracking.activate set MLflow's global URI
    return uri
