import numpy as np
import pytest
import torch
from builders import tiny_model

from cctk.core.facts import ADDITIONS, CANDIDATES, answer_text
from cctk.core.lm.scoring import (
    COLUMNS,
    answer_tree,
    encode,
    measure,
    measure_plain,
    pack_forest,
    pack_rows,
    score_forest,
)

SOME = (*ADDITIONS[:3], (5, 8), (9, 9))
SPREAD = ADDITIONS[::16]  # 1+1, 2+8, 4+6, 6+4, 8+2, 9+9: from the first to the last row of the packed batches


def test_measure_equals_plain_loop_on_tiny_llama(tiny, tokenizer):
    """All 81 additions measured at once, read against the plain loop on additions spread over the whole
    batch (tests/integration/test_scoring_full_grid.py: on all 2835 rows)."""
    fast = measure(tiny, tokenizer)
    assert list(fast.columns) == COLUMNS
    assert len(fast) == 81 * 35
    fast = fast[[pair in SPREAD for pair in zip(fast["a"], fast["b"], strict=True)]].reset_index(drop=True)
    plain = measure_plain(tiny, tokenizer, SPREAD)
    assert np.abs(fast["logprob"].to_numpy() - plain["logprob"].to_numpy()).max() <= 1e-4
    assert (
        (fast[["a", "b", "candidate_value", "n_tokens"]] == plain[["a", "b", "candidate_value", "n_tokens"]])
        .all()
        .all()
    )


@pytest.mark.parametrize("arch", ["qwen2", "gpt_neox", "phi"])
def test_measure_equals_plain_loop_on_other_architectures(arch, tokenizer):
    model = tiny_model(arch, len(tokenizer))
    fast, plain = measure(model, tokenizer, SOME), measure_plain(model, tokenizer, SOME)
    assert np.abs(fast["logprob"] - plain["logprob"]).max() <= 1e-4


def test_prompts_of_different_lengths_share_one_layout(tiny, tokenizer):
    # A prompt with a BOS-like extra token pads the others on the left; scores must not move.
    class WithBos:
        def __init__(self, tok):
            self.tok, self.pad_token_id = tok, tok.pad_token_id

        def __call__(self, text, add_special_tokens=True):
            ids = self.tok(text, add_special_tokens=False)["input_ids"]
            extra = [1] if add_special_tokens and text.startswith("9") else []
            return {"input_ids": extra + ids}

    wrapped = WithBos(tokenizer)
    fast, plain = measure(tiny, wrapped, SOME), measure_plain(tiny, wrapped, SOME)
    assert np.abs(fast["logprob"] - plain["logprob"]).max() <= 1e-4


def test_table_is_sorted_and_prob_is_a_softmax_per_addition(tiny, tokenizer):
    table = measure(tiny, tokenizer, SOME)
    assert table.equals(table.sort_values(["a", "b", "candidate_value"], ignore_index=True))
    sums = table.groupby(["a", "b"])["prob"].sum()
    assert np.allclose(sums, 1.0, atol=1e-12)
    one = table[(table.a == 5) & (table.b == 8)]
    expected = np.exp(one.logprob - one.logprob.max()) / np.exp(one.logprob - one.logprob.max()).sum()
    assert np.allclose(one.prob, expected)


def test_n_tokens_counts_the_end_marker(tokenizer, tiny):
    table = measure(tiny, tokenizer, ((1, 1),))
    # SmolLM2 splits digits: " ", each digit, "\n".
    assert table.set_index("candidate_value").loc[7, "n_tokens"] == 3
    assert table.set_index("candidate_value").loc[25, "n_tokens"] == 4


def test_answer_tree_shares_prefixes_and_skips_last_tokens(tokenizer):
    answers = [encode(tokenizer, answer_text(v), special=False) for v in CANDIDATES]
    tree = answer_tree(answers)
    # nodes: " ", 9 first digits, 27 second digits (10..36); the final "\n" is never an input
    assert len(tree.tokens) == 1 + 9 + 27
    assert len(tree.term_token) == sum(len(a) for a in answers)
    assert tree.ancestors.sum(dim=1).max() == 3  # deepest input node: " ", "2", "5"


def test_pack_rows_mask_and_positions(tokenizer):
    tree = answer_tree([[10, 11, 12], [10, 13, 12]])  # two answers sharing their first token
    ids, pos, allowed, out_cols = pack_rows([[1, 2, 3], [4, 5]], tree, pad_id=0)
    assert ids.tolist() == [[1, 2, 3, 10, 11, 13], [0, 4, 5, 10, 11, 13]]
    assert pos.tolist() == [[0, 1, 2, 3, 4, 4], [0, 0, 1, 2, 3, 3]]
    assert out_cols.tolist() == [2, 3, 4, 5]
    row = allowed[1].int().tolist()
    assert row[0] == [1, 0, 0, 0, 0, 0]  # the pad sees only itself
    assert row[4] == [0, 1, 1, 1, 1, 0]  # node "11" sees the prompt, " " and itself
    assert row[5] == [0, 1, 1, 1, 0, 1]  # node "13" does not see its sibling
    assert not allowed[:, :, 0][1, 1:].any()  # nobody looks at the pad


def test_measure_keeps_training_mode_and_weights(tiny, tokenizer):
    tiny.train()
    before = {k: v.clone() for k, v in tiny.state_dict().items()}
    measure(tiny, tokenizer, SOME)
    assert tiny.training
    tiny.eval()
    assert all(torch.equal(before[k], v) for k, v in tiny.state_dict().items())


def test_the_manuals_loop_gives_a_model_back_in_its_mode_after_an_error_too(tiny, tokenizer, monkeypatch):
    """Before: measure_plain set eval mode and restored it only on success; a failed forward left dropout off."""
    tiny.train()
    measure_plain(tiny, tokenizer, SOME[:1])
    assert tiny.training
    monkeypatch.setattr(type(tiny), "forward", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("out of memory")))
    with pytest.raises(RuntimeError, match="out of memory"):
        measure_plain(tiny, tokenizer, SOME[:1])
    assert tiny.training


def test_half_precision_model_scores_in_float32(tokenizer):
    model = tiny_model("llama", len(tokenizer)).to(torch.bfloat16)
    fast, plain = measure(model, tokenizer, SOME), measure_plain(model, tokenizer, SOME)
    assert fast["logprob"].dtype == np.float64
    assert np.abs(fast["logprob"] - plain["logprob"]).max() < 0.1  # bf16 activations differ by kernel


def test_pack_forest_gives_every_row_its_own_tree():
    trees = [answer_tree([[10, 11], [10, 12]]), answer_tree([[13, 14, 15]])]
    ids, pos, allowed, out_cols = pack_forest([[1, 2], [3, 4, 5]], trees, pad_id=0)
    assert ids.tolist() == [[0, 1, 2, 10, 0], [3, 4, 5, 13, 14]]
    assert pos.tolist() == [[0, 0, 1, 2, 0], [0, 1, 2, 3, 4]]
    assert out_cols.tolist() == [2, 3, 4]
    assert allowed[0].int().tolist() == [
        [1, 0, 0, 0, 0],
        [0, 1, 0, 0, 0],
        [0, 1, 1, 0, 0],
        [0, 1, 1, 1, 0],
        [0, 0, 0, 0, 1],
    ]
    assert allowed[1, 4].int().tolist() == [1, 1, 1, 1, 1]  # node "14" sees the prompt, "13" and itself


def test_pack_rows_is_pack_forest_with_one_tree():
    tree = answer_tree([[10, 11, 12], [10, 13, 12], [14]])
    rows, forest = pack_rows([[1, 2, 3], [4, 5]], tree, 0), pack_forest([[1, 2, 3], [4, 5]], [tree, tree], 0)
    assert all(torch.equal(a, b) for a, b in zip(rows, forest, strict=True))


def test_score_forest_scores_each_row_against_its_own_tree(tiny, tokenizer):
    # Row 0 holds candidates 7 and 12, row 1 holds 3 alone: each equals measure's number for it.
    prompts = [encode(tokenizer, "2 + 5 =", special=True), encode(tokenizer, "1 + 2 =", special=True)]
    answers = [
        [encode(tokenizer, answer_text(v), special=False) for v in (7, 12)],
        [encode(tokenizer, answer_text(3), special=False)],
    ]
    sums = score_forest(tiny, prompts, [answer_tree(a) for a in answers], tokenizer.pad_token_id)
    table = measure(tiny, tokenizer, ((2, 5), (1, 2))).set_index(["a", "b", "candidate_value"])["logprob"]
    assert sums.dtype == torch.float64 and sums.shape == (3,)
    assert sums.tolist() == pytest.approx([table[(2, 5, 7)], table[(2, 5, 12)], table[(1, 2, 3)]], abs=1e-4)


def test_a_model_on_an_attention_that_reads_masks_as_padding_is_scored_on_sdpa(monkeypatch):
    """Flash attention reads an attention mask as 2D padding (a packed forest's 4D mask indexes out of range):
    a model a user loaded so (``KRTestCallback`` scores their model) is scored on SDPA, its own attention
    restored after. Shown with an attention registered here that refuses a 4D mask as flash attention
    mishandles one, and that the scorer fails on it without the switch."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from cctk.core.lm import scoring

    calls = []

    def padding_only(module, query, key, value, attention_mask, **kwargs):
        calls.append(None if attention_mask is None else attention_mask.dim())
        if attention_mask is not None and attention_mask.dim() == 4:
            raise IndexError("a 4D mask read as a padding mask")
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register("padding_only", padding_only)
    model = tiny_model("llama", 300)
    prompts = [[1, 5, 7, 9], [1, 4, 4]]
    trees = [answer_tree([[10, 11, 12], [10, 13], [20]]), answer_tree([[10, 11], [30]])]
    on_sdpa = scoring.score_forest(model, prompts, trees, 0)
    model.set_attn_implementation("padding_only")
    assert torch.equal(scoring.score_forest(model, prompts, trees, 0), on_sdpa)
    assert model.config._attn_implementation == "padding_only" and calls == []  # restored; never asked
    model(torch.tensor([[1, 2, 3]]))
    assert calls == [None, None]  # the model's own attention again, both layers
    monkeypatch.setattr(scoring, "MASKED_ATTENTION", (*scoring.MASKED_ATTENTION, "padding_only"))
    with pytest.raises(IndexError, match="4D mask"):
        scoring.score_forest(model, prompts, trees, 0)


class BosTokenizer:
    """The suite's tokenizer with a BOS (id 1) where special tokens are asked for, as Llama's adds one."""

    def __init__(self, tok):
        self.tok, self.pad_token_id = tok, tok.pad_token_id

    def __call__(self, text, add_special_tokens=True):
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        return {"input_ids": ([1] if add_special_tokens else []) + ids}


def test_measure_feeds_bos_before_the_prompt_and_never_before_the_answer(tiny, tokenizer):
    """Every tokenizer of the suite adds no BOS, so a BOS on the answer instead of the prompt went unseen (a
    mutation audit): the log-prob of each answer by hand, after [BOS] + prompt."""
    table = measure(tiny, BosTokenizer(tokenizer), ((3, 5),)).set_index("candidate_value")
    prompt = [1, *tokenizer("3 + 5 =", add_special_tokens=False)["input_ids"]]
    for value in (8, 12):
        answer = tokenizer(f" {value}\n", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(tiny(torch.tensor([prompt + answer])).logits[0].float(), -1)
        by_hand = sum(logp[len(prompt) + k - 1, answer[k]].item() for k in range(len(answer)))
        assert table.loc[value, "logprob"] == pytest.approx(by_hand, abs=1e-4)
        assert table.loc[value, "n_tokens"] == len(answer)
