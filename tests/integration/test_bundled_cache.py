"""The bundled model converted once into the cache is the model read from its GGUF, bit for bit."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from cctk.core.lm import models

pytestmark = pytest.mark.slow

TEXTS = ["3 + 5 = 8<|endoftext|>", "What is 7 + 9?", " 12", " héllo wörld\n\nx", "<|im_start|>user\nhi<|im_end|>"]


def test_the_converted_folder_holds_the_gguf_model_bit_for_bit(tmp_path, monkeypatch):
    """What Transformers reads from the GGUF, recorded as the conversion reads it (its weights copied at once, so
    nothing done to them after can hide), against the model and tokenizer loaded back from the folder it wrote:
    the GGUF is read once (14 s of de-quantizing and 3 s of tokenizer here), not twice."""
    read: dict = {}

    def recording(kind, load):
        def from_pretrained(*args, **kwargs):
            loaded = load(*args, **kwargs)
            if kwargs.get("gguf_file"):
                read[kind] = loaded
                if kind == "model":
                    read["weights"] = {k: v.detach().clone() for k, v in loaded.state_dict().items()}
            return loaded

        return from_pretrained

    monkeypatch.setattr(
        AutoModelForCausalLM, "from_pretrained", recording("model", AutoModelForCausalLM.from_pretrained)
    )
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", recording("tokenizer", AutoTokenizer.from_pretrained))
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path))
    models._last_loaded.clear()  # load_model's in-memory copy must not answer for the folder
    folder = models.bundled_folder()  # converted here, from the GGUF
    assert folder.startswith(str(tmp_path / "cctk")) and set(read) == {"model", "tokenizer", "weights"}
    monkeypatch.undo()  # the folder is loaded back by Transformers itself
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path))
    model, tokenizer = models.load_model(models.BUNDLED)
    assert model.config._name_or_path == folder

    expected, expected_tokenizer, theirs = read["model"], read["tokenizer"], read["weights"]
    ours = model.state_dict()
    assert type(model) is type(expected) and ours.keys() == theirs.keys()
    assert all(ours[k].dtype == torch.float32 and torch.equal(ours[k], theirs[k]) for k in ours)
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still tied
    for text in TEXTS:
        assert tokenizer(text)["input_ids"] == expected_tokenizer(text)["input_ids"]
    assert (tokenizer.bos_token, tokenizer.eos_token) == (expected_tokenizer.bos_token, expected_tokenizer.eos_token)
    models._last_loaded.clear()
