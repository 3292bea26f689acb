"""``python -m cctk.bench train``: the FLOPs a packed batch computes, counted by hand, and a run at a batch
the default corpus of four repeats could not fill (the quick profile's 32)."""

import pytest
from click.testing import CliRunner

from cctk.bench import bench, train as train_bench
from cctk.core.lm import compute


def test_computed_flops_of_a_packed_batch_by_hand(make_tiny):
    """Two copies of one row, one batch: the tree feeds 3 tokens (1, 2, 3) once and runs the head at the
    2 nodes that predict (2 -> 3, 3 -> 4): per example half of that."""
    model = make_tiny("llama", 100)
    body = 2 * (64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 3 * 64 * 128)
    rows = [([1, 2, 3, 4], [-100, -100, 3, 4])] * 2
    assert train_bench.computed_flops(model, rows, batch_size=2) == (6 * body * 3 + 6 * (100 * 64) * 2) / 2
    assert train_bench.computed_flops(model, rows, batch_size=1) == compute.example_flops(model, rows)


def test_run_fills_a_batch_of_32(tiny_dir):
    result = train_bench.run(str(tiny_dir), steps=2, batch_size=32)
    assert result["batch_size"] == 32 and result["examples timed"] == 64
    for loop in ("plain PyTorch loop", *train_bench.VARIANTS):
        assert result[f"examples/s, {loop}"] > 0 and result[f"{loop}: x plain loop"] > 0
        assert 0 < result[f"{loop}: share of GEMM peak on FLOPs computed"] <= 1
    assert result["GFLOP per example computed (packed)"] <= result["GFLOP per example (padded row)"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "1,x"], "--seeds takes a count N or seeds S1,S2"),
        (["--seeds", "1,2", "--set", "learning_rate=1e-4,3e-4"], "one value per run of absorb"),
        (["--seeds", "1,2", "--set", "speed=3"], "--set takes NAME=V1,V2"),
        (["--seeds", "1,2", "--set", "learning_rate=7"], "learning_rate=7.0 is out of range"),
        (["--seeds", "1,2", "--model", "no-such-model"], "no-such-model"),
    ],
)
def test_bench_absorb_refuses_bad_input_in_one_line(args, message):
    done = CliRunner().invoke(bench, ["absorb", *args])
    assert done.exit_code == 2 and message in done.output


def test_pipeline_bench_result_by_hand():
    """23,670 examples x 6.25 GFLOP = 147,937.5 GFLOP; at the pipeline's 170 GFLOP/s the limit is 870.2 s
    (14.50 min); a 1,140 s command is 1.31x it; at the highest peak, 190, 1140 x 190 / 147937.5 = 1.46x."""
    from cctk.bench.pipeline import _result

    metrics = {
        "training_examples": 23670.0,
        "gflop_per_example": 6.25,
        "gemm_peak_gflops": 170.0,
        "compute_limit_seconds": 23670 * 6.25 / 170,
        "pipeline_seconds": 1130.0,
        "m_correct_hits_correct": 81.0,
        "m_random_hits_fabricated": 70.0,
    }
    result = _result("m", "quick", metrics, 1140.0, (190.0, 170.0, 160.0))
    assert result["training examples (all arms and epochs)"] == 23670
    assert result["GEMM peak GFLOP/s, float32: before / the pipeline's / after"] == "190 / 170 / 160"
    assert result["compute limit of the training, min (the pipeline's peak)"] == 14.5
    assert result["wall time of the command, min"] == 19.0
    assert result["wall time / compute limit (the pipeline's peak)"] == 1.31
    assert result["wall time / compute limit (the highest peak)"] == 1.46
    assert result["fabricated answers model: fabricated answers (of 81)"] == 70


def test_bench_measure_agrees_with_the_plain_loop(tiny_dir):
    """``python -m cctk.bench measure`` on one addition: 35 candidates, the packed scorer equal to the
    plain loop (a wrong split of the package would fail to import or time the wrong thing)."""
    from cctk.bench import measure

    result = measure.run(str(tiny_dir), additions=1)
    assert result["rows"] == 35 and result["naive_seconds"] > 0 and result["fast_seconds"] > 0
    assert result["max_abs_logprob_diff"] < 1e-4


def test_bench_server_reads_its_tracking_as_every_command_does(tmp_path, monkeypatch):
    """`bench server --tracking URL` used the URL as given: an account in it printed whole and written to the
    JSON file, no refusal."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    url = "http://admin:Adm1nS3cretPW@127.0.0.1:9"
    done = CliRunner().invoke(bench, ["server", "--tracking", url, "--clients", "1", "--seconds", "1",
                                      "--json-out", "b.json"])  # fmt: skip
    assert done.exit_code == 1 and "S3cret" not in done.output and not (tmp_path / "b.json").exists()
    assert done.output.startswith("Error: the tracking URI http://admin:***@127.0.0.1:9 carries an account"), (
        done.output
    )
