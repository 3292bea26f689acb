"""``python -m cctk.bench pipeline`` runs ``cctk run`` as a user does and reads its cost back from MLflow."""
import pytest

from cctk import pipeline_bench

pytestmark = pytest.mark.integration


def test_bench_pipeline_reads_the_runs_cost(tiny_dir, tmp_path):
    result = pipeline_bench.run(str(tiny_dir), profile="smoke", seed="3", out=tmp_path)
    # 81 + 81 (Part A) + 11 arms x 57 seen additions = 789 distinct examples, x 2 repeats x 2 epochs
    assert result["training examples (all arms and epochs)"] == 789 * 2 * 2
    before, pipelines, after = map(float, result["GEMM peak GFLOP/s, float32: before / the pipeline's / after"]
                                   .split(" / "))
    wall = result["wall time of the command, min"]
    limit = result["compute limit of the training, min (the pipeline's peak)"]
    assert limit > 0 and wall > 0 and min(before, pipelines, after) > 0
    ratio = result["wall time / compute limit (the pipeline's peak)"]
    assert ratio > 1  # a tiny model's pipeline is all fixed cost: far above its limit
    assert ratio == pytest.approx(wall / limit, rel=0.15)  # the minutes are printed rounded to 0.01
    assert (result["wall time / compute limit (the highest peak)"]
            >= result["wall time / compute limit (the pipeline's peak)"] - 0.01)  # the highest peak: the tighter limit
    assert (tmp_path / "outputs").is_dir() and (tmp_path / "mlflow.db").is_file()
