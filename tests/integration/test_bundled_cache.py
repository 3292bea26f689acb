"""The bundled model converted once into the cache is the model read from its GGUF, bit for bit."""

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from cctk.core.lm import models

TEXTS = ["3 + 5 = 8<|endoftext|>", "What is 7 + 9?", " 12", " héllo wörld\n\nx", "<|im_start|>user\nhi<|im_end|>"]


def test_the_converted_folder_holds_the_gguf_model_bit_for_bit(tmp_path, monkeypatch):
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path))
    models._last_loaded.clear()  # load_model's in-memory copy must not answer for the folder
    model, tokenizer = models.load_model(models.BUNDLED)
    folder = models.bundled_folder()
    assert folder.startswith(str(tmp_path / "cctk")) and model.config._name_or_path == folder

    gguf_folder, name = models.bundled_gguf()
    expected = AutoModelForCausalLM.from_pretrained(gguf_folder, gguf_file=name, dtype=torch.float32)
    expected_tokenizer = AutoTokenizer.from_pretrained(gguf_folder, gguf_file=name)
    ours, theirs = model.state_dict(), expected.state_dict()
    assert type(model) is type(expected) and ours.keys() == theirs.keys()
    assert all(ours[k].dtype == torch.float32 and torch.equal(ours[k], theirs[k]) for k in ours)
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still tied
    for text in TEXTS:
        assert tokenizer(text)["input_ids"] == expected_tokenizer(text)["input_ids"]
    assert (tokenizer.bos_token, tokenizer.eos_token) == (expected_tokenizer.bos_token, expected_tokenizer.eos_token)
    models._last_loaded.clear()
