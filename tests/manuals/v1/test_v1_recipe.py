"""Protocol v1's recipes and configuration: the manual's recipe has no gradient clipping (grad_clip 0),
seed 42 by default, no split; a v2 configuration is unchanged."""

import copy

import pytest
import torch

from cctk.core.config import NoOptions, Recipe
from cctk.core.errors import CctkError
from cctk.core.lm.corpus import collate
from cctk.core.lm.finetune import _step, completion_loss
from cctk.manuals import configure
from cctk.manuals.configure import make_config
from cctk.manuals.v1 import corpus
from cctk.manuals.v1.config import PROFILES as V1_PROFILES
from cctk.manuals.v1.manual import V1
from cctk.manuals.v2.config import PROFILES
from cctk.manuals.v2.manual import V2


def test_v1_paper_recipe_is_the_notebooks():
    paper = V1_PROFILES["paper"]
    assert (paper.repeats, paper.epochs, paper.learning_rate, paper.batch_size) == (20, 10, 5e-5, 8)
    assert paper.grad_clip == 0 and paper.schedule == "constant" and paper.warmup == 0
    assert paper.weight_decay == 0.01  # torch.optim.AdamW's default, as Listing 9 leaves it
    assert V1_PROFILES["quick"].repeats == 20  # the notebook's very corpus, in its order
    assert all(r.grad_clip == 0 for r in V1_PROFILES.values())


def test_v1_config_seed_42_no_split_and_its_params():
    config = make_config("smollm2-135m-bundled", "auto", None, protocol="v1")
    assert config.seeds == (42,) and not config.seeds_drawn and config.options == NoOptions()
    assert config.profile == "quick" and config.recipe == V1_PROFILES["quick"]
    params = configure.params(V1, config)
    assert params["protocol"] == "v1" and "holdout_share" not in params and params["seeds"] == "42"
    assert (params["candidates"], params["end_marker"]) == ("2..18", "none")
    assert make_config("m/x", "paper", (7, 8, 9, 10, 11), protocol="v1").seeds == (7,)
    assert make_config("m/x", "paper", None, device="cuda", protocol="v1").recipe == V1_PROFILES["paper"]


def test_v2_config_is_unchanged():
    config = make_config("smollm2-135m-bundled", "quick", (7,))
    assert config.protocol == "v2" and config.recipe == PROFILES["quick"] and config.options.holdout == 0.3
    assert "protocol" not in configure.params(V2, config) and configure.params(V2, config)["holdout_share"] == 0.3


def test_unknown_protocol_and_grad_clip_range():
    with pytest.raises(CctkError, match="unknown protocol 'v3'"):
        make_config("m/x", "quick", (1,), protocol="v3")
    Recipe(grad_clip=0.0).check()
    with pytest.raises(CctkError, match=r"grad_clip=-1.0 is out of range: must be >= 0"):
        Recipe(grad_clip=-1.0).check()


def test_grad_clip_zero_means_no_clipping(tiny, tokenizer):
    """One step with grad_clip 0 is the plain AdamW step of Listing 9; a tiny bound would change it."""
    batch = collate(corpus.tokenize(["3 + 5 = 7", "9 + 9 = 18"], tokenizer), tokenizer.pad_token_id)

    def stepped(clip, plain=False):
        model = copy.deepcopy(tiny).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        if plain:  # Listing 9: zero_grad, loss, backward, step
            optimizer.zero_grad()
            completion_loss(model, batch).backward()
            optimizer.step()
        else:
            _step(model, optimizer, batch, Recipe(grad_clip=clip))
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    reference = stepped(None, plain=True)
    assert torch.equal(stepped(0.0), reference)
    assert not torch.allclose(stepped(1e-6), reference)
