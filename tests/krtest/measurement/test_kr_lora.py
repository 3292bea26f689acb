import numpy as np
import pytest
from builders import tiny_model

from cctk.core.errors import CctkError
from cctk.krtest.generation.generate import make_dataset
from cctk.krtest.measurement.lora import (
    DEFAULT_BUDGET,
    attach_lora,
    closest_rank,
    find_blocks,
    matched_ranks,
    plan_lora,
    plan_pair,
    relative_difference,
    trainable_count,
)
from cctk.krtest.measurement.scoring import score

EXPECTED = {
    "llama": ("q_proj,k_proj,v_proj,o_proj", "gate_proj,up_proj,down_proj"),
    "qwen2": ("q_proj,k_proj,v_proj,o_proj", "gate_proj,up_proj,down_proj"),
    "gpt_neox": ("query_key_value,dense", "dense_h_to_4h,dense_4h_to_h"),
    "phi": ("q_proj,k_proj,v_proj,dense", "fc1,fc2"),
}
# in + out of each module of one layer of the tiny models (hidden 64, FFN 128, 4 heads; Llama/Qwen2 2 KV heads)
WIDTHS = {
    "llama": (128 + 96 + 96 + 128, 192 * 3),
    "qwen2": (128 + 96 + 96 + 128, 192 * 3),
    "gpt_neox": (64 + 192 + 128, 192 * 2),
    "phi": (128 * 4, 192 * 2),
}


@pytest.mark.parametrize("arch", EXPECTED)
def test_blocks_are_found_from_the_structure(arch):
    model = tiny_model(arch, 500)
    blocks = find_blocks(model)
    for placement, kinds in zip(("attention", "ffn"), EXPECTED[arch], strict=True):
        plan = plan_lora(model, placement, 10_000)
        assert plan.kinds() == kinds
        assert len(plan.targets) == 2 * len(kinds.split(","))  # two layers
        assert plan.targets == blocks[placement]
    assert not set(blocks["attention"]) & set(blocks["ffn"])


@pytest.mark.parametrize("arch", EXPECTED)
@pytest.mark.parametrize("budget", [1, 5_000, 12_345, 100_000])
def test_rank_closest_to_the_budget_and_exact_counts(arch, budget):
    """Each placement's rank closest to the budget on its own (the pair's ``closest``); the plan takes its rank
    in the pair, the closest where the two counts lie within 1% of each other."""
    for i, (placement, width_per_layer) in enumerate(zip(("attention", "ffn"), WIDTHS[arch], strict=True)):
        model = tiny_model(arch, 500)
        plan, pair = plan_lora(model, placement, budget), plan_pair(model, budget)
        width = 2 * width_per_layer
        assert plan.width == width
        best = min(range(1, budget // width + 3), key=lambda r: abs(r * width - budget))
        assert pair.closest[i] == best and plan == getattr(pair, placement)
        assert plan.rank == best or pair.searched
        assert plan.trainable == plan.rank * width
        adapted = attach_lora(model, plan, seed=0)
        assert adapted.get_nb_trainable_parameters()[0] == plan.trainable
        assert trainable_count(adapted) == plan.trainable


def test_closest_rank():
    assert closest_rank(100, 1) == 1  # never below 1
    assert closest_rank(100, 249) == 2 and closest_rank(100, 251) == 3
    assert closest_rank(100, 250) == 2  # a tie goes to the smaller rank
    assert closest_rank(115_200, 3_801_600) == 33 and closest_rank(190_080, 3_801_600) == 20  # SmolLM2-135M


def test_bad_budget_and_placement():
    model = tiny_model("llama", 500)
    for budget in (0, -5):
        with pytest.raises(CctkError, match="budget"):
            plan_lora(model, "ffn", budget)
    with pytest.raises(CctkError, match="placement"):
        plan_lora(model, "embeddings", 100)


def test_an_adapter_at_initialisation_changes_no_score(tokenizer):
    items = list(make_dataset(1, entities=2, validation_entities=2).items)
    base = tiny_model("qwen2", len(tokenizer))
    before = score(base, tokenizer, items)
    adapted = attach_lora(base, plan_lora(base, "attention", 4_000), seed=0).get_base_model()
    after = score(adapted, tokenizer, items)
    assert np.abs(before.logprob_true - after.logprob_true).max() <= 1e-5


def test_equal_budget_pair_on_llama_1b_widths():
    # Llama-3.2-1B: hidden 2048, FFN 8192, 32 heads and 8 KV heads of 64, 16 layers
    attention, ffn = 16 * (2 * (2048 + 2048) + 2 * (2048 + 512)), 16 * 3 * (2048 + 8192)
    assert (closest_rank(attention, DEFAULT_BUDGET), closest_rank(ffn, DEFAULT_BUDGET)) == (18, 8)
    assert relative_difference(18 * attention, 8 * ffn) == pytest.approx(0.0256, abs=1e-4)  # the 2.6%
    assert matched_ranks(attention, ffn, DEFAULT_BUDGET) == (16, 7)  # 3,407,872 and 3,440,640: 0.96% apart
    assert relative_difference(16 * attention, 7 * ffn) == pytest.approx(32_768 / 3_407_872)


@pytest.mark.parametrize(
    ("budget", "closest", "chosen", "searched"),
    [
        (5_000, (6, 4), (5, 4), True),  # 5376 vs 4608 (16.7%) -> 4480 vs 4608 (2.86%, the best within 25%)
        (7_000, (8, 6), (9, 7), True),  # 7168 vs 6912 (3.7%) -> 8064 vs 8064 (exact)
        (8_064, (9, 7), (9, 7), False),  # both reach it: nothing to search
    ],
)
def test_plan_pair_on_tiny_llama(budget, closest, chosen, searched):
    # the tiny Llama: attention width 2 * 448 = 896, FFN width 2 * 576 = 1152 (their ratio is 7 : 9)
    pair = plan_pair(tiny_model("llama", 500), budget)
    assert (pair.attention.width, pair.ffn.width) == (896, 1152)
    assert pair.closest == closest and (pair.attention.rank, pair.ffn.rank) == chosen and pair.searched == searched
    assert pair.attention.trainable == chosen[0] * 896 and pair.ffn.trainable == chosen[1] * 1152
    line = pair.line()
    assert f"{100 * pair.difference:.2f}% apart" in line and ("chose the closest pair" in line) == searched
    # each placement planned alone (cctk krtest train) takes its rank in the pair: two arms trained apart
    # train what the study's two arms train (before: 6 and 4 at 5,000, 5376 against 4608 parameters)
    model = tiny_model("llama", 500)
    assert (plan_lora(model, "attention", budget).rank, plan_lora(model, "ffn", budget).rank) == chosen
    assert plan_lora(model, "attention", budget, rank=closest[0]).trainable == closest[0] * 896  # a rank given


def test_a_searched_pair_says_how_far_it_lies_from_the_budget():
    """At 5,000 the pair 5 and 4 trains 4480 (10.4% under the budget) and 4608 (7.8% under)."""
    line = plan_pair(tiny_model("llama", 500), 5_000).line()
    assert line.endswith("chose the closest pair within 25% of the budget, 10.4% under and 7.8% under it)"), line


def test_a_pair_out_of_reach_keeps_the_closest_ranks():
    # widths 1000 and 10_000 at a budget of 100: no rank lies within 25% of it, so each keeps rank 1
    assert matched_ranks(1_000, 10_000, 100) == (1, 1)
    assert matched_ranks(100, 260, 1_000) == (8, 3)  # 800 vs 780 (2.6%) beats 1000 vs 1040 (4%)
