"""``python -m cctk.bench pipeline`` runs ``cctk run`` as a user does and reads its cost back from MLflow."""

import pytest

from cctk.bench import pipeline as pipeline_bench

pytestmark = pytest.mark.integration


@pytest.mark.slow  # ~40-50 s, a whole pipeline of the tiny model timed: the bench's own check, run by make test-slow
def test_bench_pipeline_reads_the_runs_cost(tiny_dir, tmp_path):
    # without figures: what is read back is the run's cost and hits (a pipeline's figures: test_pipeline_end_to_end)
    result = pipeline_bench.run(str(tiny_dir), profile="smoke", seed="3", out=tmp_path, figures=False)
    # 81 + 81 (Part A) + 11 arms x 57 seen additions = 789 distinct examples, x 2 repeats x 2 epochs
    assert result["training examples (all arms and epochs)"] == 789 * 2 * 2
    before, pipelines, after = map(
        float, result["GEMM peak GFLOP/s, float32: before / the pipeline's / after"].split(" / ")
    )
    assert min(before, pipelines, after) > 0
    # a tiny model's limit is milliseconds (its minutes print as 0.0): the ratios, by hand in
    # tests/bench/test_bench_train.py, are far above 1 here, a pipeline being all fixed cost
    assert result["wall time / compute limit (the pipeline's peak)"] > 1
    assert result["wall time / compute limit (the highest peak)"] > 1
    assert result["correct sums model: correct sums (of 81)"] in range(82)
    assert (tmp_path / "outputs").is_dir() and (tmp_path / "mlflow.db").is_file() and result["figures"] is False
    (session,) = (tmp_path / "outputs").iterdir()
    assert (session / "tables").is_dir() and not (session / "figures").exists()  # --no-figures reached cctk run
