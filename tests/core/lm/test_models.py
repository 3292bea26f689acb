import subprocess
import sys
from unittest import mock

import pytest
import torch

from cctk.core.errors import CctkError
from cctk.core.lm.models import (
    BUNDLED,
    ROSTER,
    bars_on_a_terminal,
    bundled_gguf,
    cache_root,
    check_model_name,
    converted,
    eager_attention,
    load_model,
    load_tokenizer,
)


def test_unknown_key_lists_the_roster():
    with pytest.raises(CctkError) as caught:
        load_model("gpt-17")
    message = str(caught.value)
    assert "unknown model 'gpt-17'" in message
    assert all(key in message for key in ROSTER)
    assert "\n" not in message


def test_hub_ids_and_model_directories_are_accepted_names(tiny_dir):
    check_model_name("EleutherAI/pythia-410m")
    check_model_name(str(tiny_dir))
    check_model_name("phi-1.5")


@pytest.mark.parametrize("name", ["/no/such/model", "./tiny", "../models/tiny", "a/b/c", "owner/"])
def test_a_mistyped_path_fails_in_one_line(name):
    with pytest.raises(CctkError, match=r"no model directory at|unknown model") as caught:
        check_model_name(name)
    assert "\n" not in str(caught.value)


def test_a_folder_without_a_model_fails(tmp_path):
    with pytest.raises(CctkError, match="not a model directory"):
        check_model_name(str(tmp_path))


def test_check_available_needs_no_model_load(monkeypatch, tmp_path):
    from cctk.core.lm import models

    models.check_available(BUNDLED)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(CctkError, match="cannot reach the Hugging Face Hub"):
        models.check_available("phi-1.5")


@pytest.mark.parametrize("env", [{"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9"}])
def test_unreachable_hub_names_the_bundled_model(env, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(CctkError) as caught:
        load_model("pythia-410m")
    assert BUNDLED in str(caught.value)
    assert "EleutherAI/pythia-410m" in str(caught.value)


def test_roster_marks_gated_and_bundled():
    assert ROSTER["llama-3.2-1b"].needs == "Hub, gated"
    assert ROSTER["gemma-3-270m"].needs == "Hub, gated"
    assert ROSTER[BUNDLED].needs == "bundled"
    assert ROSTER["phi-1.5"].source == "microsoft/phi-1_5"


def test_bundled_gguf_is_found_in_the_installed_package():
    _folder, name = bundled_gguf()
    assert name.endswith(".gguf") and "SmolLM2-135M" in name


def test_local_directory_loads_a_fresh_float32_copy(tmp_path, tokenizer, make_tiny):
    make_tiny("llama", len(tokenizer)).to(torch.bfloat16).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    first, tok = load_model(str(tmp_path))
    second, _ = load_model(str(tmp_path))
    assert first is not second
    assert next(first.parameters()).dtype == torch.float32
    with torch.no_grad():
        next(first.parameters()).add_(1.0)
    assert not torch.equal(next(first.parameters()), next(second.parameters()))
    assert tok.pad_token_id is not None


def test_a_tokenizer_read_for_a_plan_is_the_one_the_model_loads_with(tmp_path, tokenizer, make_tiny, monkeypatch):
    """``load_tokenizer`` keeps the last one read: the model's load reads no files for it again; other files
    (another folder) are read."""
    from transformers import AutoTokenizer

    from cctk.core.lm import models

    for folder in (tmp_path / "a", tmp_path / "b"):
        make_tiny("llama", len(tokenizer)).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    reads = []
    read = AutoTokenizer.from_pretrained
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", lambda *a, **k: reads.append(a[0]) or read(*a, **k))
    models._last_loaded.clear()
    planned = load_tokenizer(str(tmp_path / "a"))
    assert load_tokenizer(str(tmp_path / "a")) is planned and load_model(str(tmp_path / "a"))[1] is planned
    assert reads == [str(tmp_path / "a")]
    assert load_tokenizer(str(tmp_path / "b")) is not planned and reads == [str(tmp_path / "a"), str(tmp_path / "b")]


def test_a_load_draws_no_progress_bar_into_a_log(tmp_path, tokenizer, make_tiny, capfd):
    """Before: every pipeline's log held Transformers' ``Loading weights: 0%|...|100%`` bar, carriage returns and
    all; on a terminal it still shows, and the setting is left as it was."""
    from transformers.utils import logging as transformers_logging

    make_tiny("llama", len(tokenizer)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    load_model(str(tmp_path), keep=False)
    assert "Loading weights" not in capfd.readouterr().err
    assert transformers_logging.is_progress_bar_enabled()
    with mock.patch.object(sys.stderr, "isatty", return_value=True), bars_on_a_terminal():
        assert transformers_logging.is_progress_bar_enabled()


def test_cli_unknown_model_fails_in_one_line_without_traceback(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "cctk", "measure", "--model", "nope", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "unknown model 'nope'" in lines[0]
    assert not (tmp_path / "o").exists()


def test_cli_unreachable_hub_fails_in_one_line(tmp_path):
    env = {
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/m.db",
    }
    done = subprocess.run(
        [sys.executable, "-m", "cctk", "measure", "--model", "qwen2.5-0.5b", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert BUNDLED in done.stderr


def test_a_converted_folder_is_written_once_then_reused(tmp_path):
    calls = []

    def write(folder):
        calls.append(folder)
        (folder / "weights").write_text("w")

    target = tmp_path / "cache" / "model-abc"
    assert converted(target, write) == str(target)
    assert converted(target, write) == str(target)
    assert len(calls) == 1 and calls[0] != target  # written beside it, then renamed
    assert sorted(p.name for p in target.parent.iterdir()) == ["model-abc"]  # no scratch folder left
    assert (target / "weights").read_text() == "w"


def test_a_failed_conversion_leaves_nothing_behind(tmp_path):
    def write(folder):
        (folder / "half").write_text("h")
        raise RuntimeError("conversion failed")

    with pytest.raises(RuntimeError, match="conversion failed"):
        converted(tmp_path / "model-abc", write)
    assert list(tmp_path.iterdir()) == []


def test_a_lost_race_keeps_the_folder_that_was_first(tmp_path):
    target = tmp_path / "model-abc"

    def write(folder):  # another process finishes first, while this one converts
        target.mkdir()
        (target / "weights").write_text("first")
        (folder / "weights").write_text("second")

    assert converted(target, write) == str(target)
    assert (target / "weights").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["model-abc"]


def test_an_unwritable_cache_means_no_folder(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    assert converted(blocker / "model-abc", lambda folder: None) is None


def test_the_cache_root_follows_cctk_cache_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine" / "cctk"
    monkeypatch.delenv("CCTK_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "cctk"


def test_the_input_checks_resolve_the_model_source_once(tiny_dir):
    from cctk.core.lm.models import ROSTER, ModelSource, check_available, source

    assert check_available(str(tiny_dir)) == ModelSource(str(tiny_dir), str(tiny_dir))
    key = next(k for k, spec in ROSTER.items() if "/" in spec.source)
    assert source(key) == ModelSource(key, ROSTER[key].source)
    with pytest.raises(CctkError, match="unknown model"):
        source("no-such-model")


@pytest.mark.parametrize(
    ("model_type", "sizes", "eager"),
    [
        (
            "llama",
            {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32},
            False,
        ),
        ("bloom", {"n_layer": 1, "hidden_size": 16, "n_head": 2}, True),  # no SDPA kernel: transformers runs eager
    ],
)
def test_eager_attention_is_read_before_the_model_loads_as_it_loads(model_type, sizes, eager):
    """A configuration read (nothing asked) says what its model will run: eager where its class has no SDPA
    kernel, as the loaded model's own configuration then says; asked for eager, eager."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type, vocab_size=64, **sizes)
    assert config._attn_implementation is None and eager_attention(config) is eager
    loaded = AutoModelForCausalLM.from_config(config)
    assert loaded.config._attn_implementation == ("eager" if eager else "sdpa")
    assert eager_attention(loaded.config) is eager
    asked = AutoConfig.for_model(model_type, vocab_size=64, attn_implementation="eager", **sizes)
    assert eager_attention(asked) is True
