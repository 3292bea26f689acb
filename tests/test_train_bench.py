"""``python -m cctk.bench train``: the FLOPs of an example counted by hand, and a run at a batch the
default corpus of four repeats could not fill (the quick profile's 32)."""
import pytest
from click.testing import CliRunner

from cctk import train_bench
from cctk.bench import bench


def test_example_flops_by_hand(make_tiny):
    model = make_tiny("llama", 100)
    # the tiny Llama: hidden 64, 4 heads of 16, 2 key-value heads, MLP 128, 2 layers, tied embedding
    per_layer = 64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 3 * 64 * 128  # q, k, v, o; gate, up, down
    rows = [([1, 2, 3, 4], [-100, -100, 3, 4]), ([1, 2, 3], [-100, 2, 3])]  # 3.5 tokens, 2 answers
    expected = 6 * (2 * per_layer) * 3.5 + 6 * (100 * 64) * 2
    assert train_bench.example_flops(model, rows) == expected


def test_run_fills_a_batch_of_32(tiny_dir):
    result = train_bench.run(str(tiny_dir), steps=2, batch_size=32)
    assert result["batch_size"] == 32 and result["examples timed"] == 64
    for loop in ("plain PyTorch loop, float32", "cctk fine_tune, float32", "cctk fine_tune, bf16"):
        assert result[f"examples/s, {loop}"] > 0
    assert result["fine_tune float32 / plain loop"] > 0


@pytest.mark.parametrize("args, message", [
    (["--seeds", "1,x"], "--seeds takes a count N or seeds S1,S2"),
    (["--seeds", "1,2", "--set", "learning_rate=1e-4,3e-4"], "one value per run of absorb"),
    (["--seeds", "1,2", "--set", "speed=3"], "--set takes NAME=V1,V2"),
    (["--seeds", "1,2", "--set", "learning_rate=7"], "learning_rate=7.0 is out of range"),
    (["--seeds", "1,2", "--model", "no-such-model"], "no-such-model"),
])
def test_bench_absorb_refuses_bad_input_in_one_line(args, message):
    done = CliRunner().invoke(bench, ["absorb", *args])
    assert done.exit_code == 2 and message in done.output
