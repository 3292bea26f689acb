"""cctk.core.lm.compute: FLOPs of an example by hand, the cost of a run's training, native bf16 and the
one-line refusal of --precision bf16 where the device would only emulate it."""

import pytest
from click.testing import CliRunner

from cctk.core.errors import CctkError
from cctk.core.lm import compute
from cctk.core.records import TrainRecord


def test_example_flops_by_hand(make_tiny):
    model = make_tiny("llama", 100)
    # the tiny Llama: hidden 64, 4 heads of 16, 2 key-value heads, MLP 128, 2 layers, tied embedding
    per_layer = 64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 3 * 64 * 128  # q, k, v, o; gate, up, down
    rows = [([1, 2, 3, 4], [-100, -100, 3, 4]), ([1, 2, 3], [-100, 2, 3])]  # 3.5 tokens, 2 answers
    expected = 6 * (2 * per_layer) * 3.5 + 6 * (100 * 64) * 2
    assert compute.example_flops(model, rows) == expected


def test_training_cost_by_hand(monkeypatch):
    """Two arms: 10 examples x 3 epochs at 2 GFLOP, 5 x 2 at 4: 100 GFLOP over 40 examples; peak 50 GFLOP/s."""
    monkeypatch.delenv(compute.PINNED, raising=False)  # measured (here by the stand-in), not pinned
    monkeypatch.setattr(compute, "peak_flops", lambda dtype, device: 50e9)
    records = [TrainRecord(10, 6, 1.0, (1.0, 0.5, 0.2), 0, 2.0), TrainRecord(5, 2, 1.0, (1.0, 0.4), 0, 4.0)]
    cost = compute.training_cost(records)
    assert (cost.examples, cost.gflop, cost.gflop_per_example) == (40, 100.0, 2.5)
    assert cost.limit_seconds == 2.0
    assert cost.metrics(3.0)["limit_ratio"] == 1.5
    assert cost.line(3.0).startswith(
        "1.50x the float32 compute limit of its training (0.0 min: 40 examples x 2.50 GFLOP at 50"
    )
    assert "below 1 cannot be" not in cost.line(3.0) and cost.line(1.0).endswith(compute.BUSY)
    assert compute.training_cost(records, earlier=80.0).limit_seconds == 1.25  # the higher peak: 80 GFLOP/s
    assert compute.training_cost(records, earlier=20.0).limit_seconds == 2.0


def test_a_pinned_peak_is_the_limit_start_and_end(monkeypatch):
    """CCTK_GEMM_PEAK_GFLOPS: no GEMM measured (a stand-in that fails if called), the pinned rate the limit whatever
    ``earlier`` says, the metrics and the line saying it was pinned, and no 'busy machine' excuse below 1."""

    def measured(dtype, device):
        raise AssertionError("a pinned peak is not measured")

    monkeypatch.setattr(compute, "peak_flops", measured)
    monkeypatch.setenv(compute.PINNED, " 40 ")
    records = [TrainRecord(10, 6, 1.0, (1.0, 0.5, 0.2), 0, 2.0), TrainRecord(5, 2, 1.0, (1.0, 0.4), 0, 4.0)]
    assert compute.peak_gflops("cpu", "bf16") == 40.0
    cost = compute.training_cost(records, earlier=80.0)
    assert (cost.peak_gflops, cost.limit_seconds, cost.pinned) == (40.0, 2.5, True)  # 100 GFLOP at 40 GFLOP/s
    assert cost.metrics(5.0)["gemm_peak_pinned"] == 1.0 and cost.metrics(5.0)["limit_ratio"] == 2.0
    assert cost.line(5.0) == (
        "2.00x the float32 compute limit of its training (0.0 min: 40 examples x 2.50 GFLOP at 40 GFLOP/s, "
        "the GEMM peak pinned by CCTK_GEMM_PEAK_GFLOPS)"
    )
    assert not cost.line(1.0).endswith(compute.BUSY)
    monkeypatch.delenv(compute.PINNED)
    monkeypatch.setattr(compute, "peak_flops", lambda dtype, device: 50e9)
    assert compute.training_cost(records).metrics(5.0)["gemm_peak_pinned"] == 0.0


@pytest.mark.parametrize("value", ["fast", "0", "-3", "nan", "inf"])
def test_a_pin_that_is_not_a_rate_is_refused(monkeypatch, value):
    monkeypatch.setenv(compute.PINNED, value)
    with pytest.raises(
        CctkError, match=rf"^CCTK_GEMM_PEAK_GFLOPS='{value}': give the device's GEMM peak as a positive"
    ):
        compute.peak_gflops()


def test_cctk_run_refuses_a_bad_pin_in_one_line_before_any_work(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(compute.PINNED, "fast")
    assert refused_run(tiny_dir, tmp_path).startswith("Error: CCTK_GEMM_PEAK_GFLOPS='fast': give")


def refused_run(tiny_dir, tmp_path, *extra: str) -> str:
    """The output of a smoke ``cctk run`` that must fail in one line before any session folder or store exists."""
    from cctk.cli.main import cli

    out = tmp_path / "out"
    store = ("--tracking", f"sqlite:///{tmp_path}/m.db")
    done = CliRunner().invoke(
        cli, ["run", "--model", str(tiny_dir), "--profile", "smoke", "--out", str(out), *store, *extra]
    )
    assert done.exit_code == 1, done.output
    assert len(done.output.strip().splitlines()) == 1 and not out.exists() and not (tmp_path / "m.db").exists()
    return done.output


def test_peak_flops_is_a_rate():
    assert compute.peak_flops(size=64, seconds=0.05) > 1e6  # 2 * 64**3 FLOPs take far less than a second


def test_the_peak_is_the_fastest_window_after_the_warm_up():
    """A device that takes 0.1 s a product for its first half second (a CPU ramping up), then 0.05 s, with one
    window slowed to 0.125 s a product (a neighbour's burst): the peak is 20 products a second (one each 0.05 s).
    One average over 1.5 s after a single product, as the peak was read before, says about 15."""
    now = [0.0]
    costs = iter([0.1] * 5 + [0.05] * 5 + [0.125] * 2 + [0.05] * 100)
    syncs = []

    def product():
        now[0] += next(costs)

    rate = compute.best_rate(product, lambda: syncs.append(now[0]), flop=1.0, seconds=1.5, clock=lambda: now[0])
    assert rate == pytest.approx(20.0)
    assert len(syncs) == 1 + compute.WINDOWS and syncs[0] == pytest.approx(0.5)  # the warm-up: 5 slow products


@pytest.mark.parametrize(
    ("flags", "native"),
    [({"avx2", "avx512f"}, False), ({"avx512f", "avx512_bf16"}, True), ({"amx_bf16"}, True), (set(), False)],
)
def test_native_bf16_from_cpu_flags(flags, native):
    assert (compute.bf16_missing("cpu", flags) is None) == native


def test_precision_bf16_is_refused_without_native_bf16():
    compute.check_precision("float32", "cpu", flags=set())  # float32 runs anywhere
    compute.check_precision("bf16", "cpu", flags={"avx512_bf16"})
    with pytest.raises(CctkError, match=r"--precision bf16 needs native bf16 arithmetic: this CPU .* lacks"):
        compute.check_precision("bf16", "cpu", flags={"avx2"})


def test_cctk_run_refuses_bf16_in_one_line_before_any_work(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(compute, "cpu_flags", lambda: {"avx2", "fma"})
    output = refused_run(tiny_dir, tmp_path, "--precision", "bf16", "--device", "cpu")
    assert output.startswith("Error: --precision bf16 needs native bf16 arithmetic: this CPU")


def test_the_forecast_before_training_by_hand(monkeypatch):
    """#55: before the first arm trains, a run prints and logs the compute limit of the training to come (the
    plan's examples and GFLOP at the peak measured at its start) and, on a CPU, where the quick pipeline's arms
    took 1.13x their limit, the whole run: the seconds so far, the training at that ratio, each trained model
    measured as long as the base model took, and the reports: 6 s of tables and reports and 5/13 s of figures for
    each model trained (a quick run's 13: 11 s). Two arms: 120 examples over their epochs at 2.5 GFLOP, 30 at 10:
    600 GFLOP at 20 GFLOP/s = 30 s; 12 s so far, 2 models at 4 s: 12 + 33.9 + 8 + 6 + 10/13 = 60.669 s.
    No guess on CUDA, where no training has been timed against its limit. (The forecast once took the quick
    pipeline's whole ratio, 1.23x, for every run: a smoke run said 2.1 min and took 4.2, its 14 measurements a
    larger share of it.)"""
    monkeypatch.delenv(compute.PINNED, raising=False)
    cost = compute.planned_cost([(120, 2.5), (30, 10.0)], 20.0)
    assert (cost.examples, cost.gflop, cost.gflop_per_example, cost.limit_seconds) == (150, 600.0, 4.0, 30.0)
    rest = compute.Rest(elapsed=12.0, models=2, per_model=4.0)
    line, metrics = compute.forecast(cost, "cpu", rest)
    assert metrics == {"estimated_limit_seconds": 30.0, "estimated_seconds": pytest.approx(59.9 + 10 / 13)}
    assert line == (
        "estimated: the training's float32 compute limit is 0.5 min (150 examples x 4.00 GFLOP at 20 GFLOP/s, "
        "this machine's GEMM peak at the start); the whole run about 1.0 min (12 s so far; the training 1.13x its "
        "limit, as the quick pipeline's arms took on two CPU cores; 2 models measured at 4.0 s each, as the base "
        "model took; 7 s of figures and reports)"
    )
    one = compute.forecast(cost, "cpu", compute.Rest(elapsed=12.0, models=1, per_model=4.0))[0]
    # --curves: 2 arms measured after each of 3 epochs, 3 s each (the base model's measurement alone): 18 s more
    curves = compute.forecast(cost, "cpu", compute.Rest(12.0, 2, 4.0, curve_points=6, per_point=3.0))
    assert curves[1]["estimated_seconds"] == pytest.approx(77.9 + 10 / 13)
    assert curves[0].endswith(
        "2 models measured at 4.0 s each, as the base model took; 6 learning-curve measurements (every arm after "
        "every epoch) at 3.0 s each, as the base model's measurement alone took; 7 s of figures and reports)"
    )
    assert "; 1 model measured at 4.0 s, as the base model took; 6 s of figures and reports)" in one  # 1.0.0's one
    quick = compute.forecast(cost, "cpu", compute.Rest(12.0, 13, 4.0))  # 2.0.0's 13 arms: 6 + 5 s
    assert quick[0].endswith("as the base model took; 11 s of figures and reports)")
    # --no-figures: 6 s of tables and reports, no figures
    plain = compute.forecast(cost, "cpu", compute.Rest(12.0, 2, 4.0, figures=False))
    assert plain[1]["estimated_seconds"] == pytest.approx(59.9)
    assert plain[0].endswith("as the base model took; 6 s of tables and reports)")
    line, metrics = compute.forecast(compute.planned_cost([(2_000_000, 50.0)], 50_000.0, "bf16"), "cuda", rest)
    assert metrics == {"estimated_limit_seconds": 2000.0}
    assert line == (
        "estimated: the training's bf16 compute limit is 33.3 min (2,000,000 examples x 50.00 GFLOP at 50,000 "
        "GFLOP/s, this machine's GEMM peak at the start); no training has been timed against its limit on a cuda "
        "device yet: expect more than the limit, then 2 models measured at 4.0 s each, as the base model took, and "
        "the reports"
    )
    monkeypatch.setenv(compute.PINNED, "20")
    assert (
        "GFLOP at 20 GFLOP/s, the GEMM peak pinned)"
        in compute.forecast(compute.planned_cost([(1, 1.0)], 20), "cpu", rest)[0]
    )
