"""KR-Test's forecast and compute limits (``cctk.krtest.commands.timing``), by hand."""

import pytest

from cctk.core.lm import compute
from cctk.krtest.commands import timing
from cctk.krtest.measurement.train import make_train_config

ROWS = [([5, 6, 7], [5, 6, 7]), ([8, 9], [8, 9])]  # KR-Test supervises every token: 2.5 tokens a row, all supervised


@pytest.mark.parametrize(("every", "expected"), [(9, 6), (10, 6), (54, 1), (60, 1), (1, 54)])
def test_an_arm_evaluates_every_k_steps_and_at_the_last(every, expected):
    """36 rows in batches of 4 over 6 epochs: 54 optimizer steps (step 0, the untouched model's, apart)."""
    config = make_train_config("full", eval_every=every, batch_size=4, epochs=6)
    assert timing.evaluations(config, 36) == expected


def test_a_row_costs_six_passes_of_the_weights_a_token_and_four_where_they_are_frozen(tiny):
    weights = sum(p.numel() for n, p in tiny.named_parameters() if n.endswith("proj.weight"))  # every block's matrix
    head = tiny.get_output_embeddings().weight.numel()
    assert compute.example_flops(tiny, ROWS) == 6 * weights * 2.5 + 6 * head * 2.5
    assert compute.example_flops(tiny, ROWS, trains_weights=False) == 4 * weights * 2.5 + 4 * head * 2.5


def test_the_studys_cost_is_its_arms_rows_over_their_epochs(tiny):
    full, lora = make_train_config("full", epochs=3), make_train_config("lora", "ffn", epochs=2)
    costs = [timing.planned_cost(tiny, ROWS, arm, peak=50.0) for arm in (full, lora)]
    six, four = compute.example_flops(tiny, ROWS) / 1e9, compute.example_flops(tiny, ROWS, False) / 1e9
    assert [c.examples for c in costs] == [2 * 3, 2 * 2]
    assert [c.gflop for c in costs] == pytest.approx([6 * six, 4 * four], rel=1e-12)
    # the study's limit: the arms' summed
    metrics = timing.forecast(list(zip((full, lora), costs, strict=True)), 2, 1.0, "cuda")[1]
    assert metrics["estimated_limit_seconds"] == pytest.approx((6 * six + 4 * four) / 50.0, rel=1e-12)


def test_the_forecast_says_the_limit_and_the_evaluations_and_the_whole_where_a_ratio_was_timed(monkeypatch):
    arms = [make_train_config("full", eval_every=9), make_train_config("lora", "attention", eval_every=9)]
    half = compute.Cost(examples=216, gflop=216 * 60.0, peak_gflops=180.0, pinned=True)  # 72 s an arm
    pairs = [(arm, half) for arm in arms]
    line, metrics = timing.forecast(pairs, 36, 6.0, "cuda")
    assert line == (
        "estimated: the training's float32 compute limit is 2.4 min (432 rows x 60.00 GFLOP at 180 GFLOP/s, the GEMM "
        "peak pinned); 12 evaluations (every 9 steps and the last) at 6.0 s each, as the untouched model's took: "
        "1.2 min; no KR-Test training has been timed against its limit on a cuda device yet"
    )
    assert metrics == {"estimated_limit_seconds": 144.0, "estimated_eval_seconds": 72.0}
    once = timing.forecast([(make_train_config("full", eval_every=60, batch_size=4), half)], 36, 6.0, "cuda")[0]
    assert "; 1 evaluation (every 60 steps and the last) at 6.0 s, as the untouched model's took: 0.1 min; " in once
    monkeypatch.setitem(timing.TRAINING_RATIO, "cpu", (1.5, "a study's arms took here"))
    line, metrics = timing.forecast(pairs, 36, 6.0, "cpu")
    assert line.endswith(
        "1.2 min; the training and its evaluations about 4.8 min (the training 1.50x its limit, as a study's arms "
        "took here)"
    )
    assert metrics["estimated_seconds"] == 1.5 * 144.0 + 72.0
