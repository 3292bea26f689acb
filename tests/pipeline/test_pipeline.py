"""The pipeline's checks, before any work: nothing is written, no MLflow run is created."""

import json
import re
from pathlib import Path

import pytest
import torch

from cctk.core.errors import CctkError
from cctk.manuals import configure
from cctk.manuals.configure import make_config
from cctk.pipeline import stages as pipeline
from cctk.store import tracking


@pytest.mark.parametrize(("model", "message"), [("nope", "unknown model"), ("/no/such/dir", "no model directory")])
def test_bad_model_fails_before_any_work(model, message, tmp_path, unopened_tracking_uri):
    with pytest.raises(CctkError, match=message):
        pipeline.run(make_config(model, "smoke", (1,)), pipeline.Where(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "mlflow.db").exists()


def test_unreachable_hub_fails_before_any_work(tmp_path, unopened_tracking_uri, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(CctkError, match="cannot reach the Hugging Face Hub"):
        pipeline.run(make_config("phi-1.5", "smoke", (1,)), pipeline.Where(tmp_path / "out"))
    assert not (tmp_path / "out").exists() and not (tmp_path / "mlflow.db").exists()


def test_unreachable_tracking_server_fails_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    with pytest.raises(CctkError, match="cannot reach the MLflow tracking server"):
        pipeline.run(make_config("smollm2-135m-bundled", "smoke", (1,)), pipeline.Where(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_resume_of_an_unknown_or_foreign_run_fails_in_one_line(tracking_uri):
    store = tracking.connect()
    other = store.start(store.experiment(), "not a pipeline", {"cctk.kind": "measure"})
    with pytest.raises(CctkError, match="is not a cctk pipeline"):
        pipeline.resume(other.run_id)
    with pytest.raises(CctkError, match="no run 'deadbeef'"):
        pipeline.resume("deadbeef")


def test_auto_profile_is_paper_on_cuda_and_quick_on_a_cpu():
    assert make_config("m", "auto", (1,), device="cuda:0").profile == "paper"
    config = make_config("m", "auto", (1,), device="cpu")
    assert config.profile == "quick" and config.profile_note == "quick (auto: CPU)"
    assert config.as_params()["profile"] == "quick" and config.as_params()["profile_requested"] == "auto"
    assert make_config("m", "smoke", (1,), device="cuda").profile == "smoke"


def test_the_auto_profile_on_a_cpu_says_why_in_the_first_lines_and_a_tag(tiny_dir, tmp_path, tracking_uri, monkeypatch):
    """Where ``auto`` takes the CPU's recipe (no GPU here; a GPU torch cannot use ends in one line before), the
    run says so where it starts and in tag ``cctk.auto_profile``; a profile asked for by name carries none."""

    def stop(*args, **kwargs):
        raise RuntimeError("stopped after the first lines")

    monkeypatch.setattr(pipeline, "fine_tune", stop)
    said = []
    options = pipeline.Options(echo=said.append, system_metrics=False, figures=False)
    with pytest.raises(RuntimeError, match="stopped"):
        pipeline.run(
            make_config(str(tiny_dir), "auto", (3,), device="cpu", parts="A"), pipeline.Where(tmp_path), options
        )
    why = "quick, the CPU's recipe (no CUDA device on this machine); --profile paper runs the manual's recipe here"
    assert f"profile auto: {why}; seeds 3" in said
    store = tracking.connect()
    (parent,) = store.search([store.experiment()], f"tags.`{tracking.KIND}` = 'pipeline'")
    assert parent.tags[pipeline.AUTO_PROFILE] == why


def test_a_run_forecasts_its_training_before_the_first_arm_and_logs_it(tiny_dir, tmp_path, tracking_uri):
    """#55: once the base model is measured, before any arm trains, the run prints the compute limit of the
    training to come (from its arms' rows and the GEMM peak of its start: pinned in the suite) and the whole run's
    time (the seconds so far, the training at the ratio the quick pipeline's arms took on a CPU, each arm measured
    as long as the base model took, the reports), and logs both; the limit is the one its end reports."""
    from cctk.core.lm import compute

    said = []
    options = pipeline.Options(echo=said.append, system_metrics=False, figures=False)
    config = make_config(str(tiny_dir), "smoke", (3,), parts="A", curves=True)
    pipeline.run(config, pipeline.Where(tmp_path), options)
    (forecast,) = [i for i, line in enumerate(said) if line.startswith("estimated: the training's float32 compute")]
    assert forecast == said.index(f"loading {tiny_dir} ...") + 1  # the base model is measured without a line
    assert said[forecast + 1].startswith("arm 1/2 correct sums: ")
    # --curves: each arm measured after each of its 2 epochs, as long as the base model's measurement alone took
    # (before: left out, a quick run's 78 measurements, about 8 minutes, among them)
    said_of_it = (
        r"the whole run about [\d.]+ min \((\d+) s so far; the training 1.13x its limit, as the quick pipeline's arms "
        r"took on two CPU cores; 2 models measured at ([\d.]+) s each, as the base model took; 4 learning-curve "
        r"measurements \(every arm after every epoch\) at ([\d.]+) s each, as the base model's measurement alone "
        r"took; 6 s of tables and reports\)$"  # figures=False: no figures to draw (it said 11 s of figures)
    )
    found = re.search(said_of_it, said[forecast])
    assert found, said[forecast]
    store = tracking.connect()
    (parent,) = store.search([store.experiment()], f"tags.`{tracking.KIND}` = 'pipeline'")
    logged = store.metrics(parent.run_id)
    assert logged["estimated_limit_seconds"] == pytest.approx(logged["compute_limit_seconds"], rel=1e-9)
    so_far, per_model, per_point = float(found[1]), float(found[2]), float(found[3])
    expected = so_far + compute.TRAINING_RATIO["cpu"][0] * logged["compute_limit_seconds"] + 2 * per_model + 6
    expected += 4 * per_point
    assert logged["estimated_seconds"] == pytest.approx(expected, abs=0.6 + 6 * 0.05)  # the line's rounding
    assert 0 <= per_point <= per_model <= so_far + 0.5 and so_far < logged["pipeline_seconds"]  # each within the next
    # the arm's line: the mean loss of its first and last epoch, as its run's `loss` history and table 11 (before:
    # the first and last step's loss, which neither shows)
    (arm,) = store.search([store.experiment()], f"tags.`{tracking.KEY}` = 'm_correct'")
    history = [m.value for m in sorted(store.client.get_metric_history(arm.run_id, "loss"), key=lambda m: m.step)]
    assert len(history) == 2  # the smoke recipe's epochs
    assert re.fullmatch(
        rf"arm 1/2 correct sums: \d+ steps, loss {history[0]:.4f} \(epoch 1\) -> {history[1]:.4f} \(epoch 2\), "
        r"[\d.]+ s",
        said[forecast + 1],
    ), said[forecast + 1]
    # its corpus, an MLflow dataset whose source is the run's targets.csv in the store, as anyone who reads the
    # store reads it (before: this machine's session folder)
    (used,) = store.client.get_run(arm.run_id).inputs.dataset_inputs
    from mlflow.utils.file_utils import local_file_uri_to_path

    stored = f"{store.client.get_run(parent.run_id).info.artifact_uri}/targets.csv"  # beside the test's database
    assert stored.startswith(f"file://{tmp_path}/artifacts/")
    assert json.loads(used.dataset.source) == {"uri": stored} and used.dataset.source_type == "local"
    assert Path(local_file_uri_to_path(stored)).read_bytes() == next(tmp_path.glob("*/targets.csv")).read_bytes()


def test_an_arm_that_raises_leaves_a_failed_nested_run(tiny_dir, tmp_path, tracking_uri, monkeypatch):
    """The second arm's training raises: its nested run and the pipeline are FAILED with the error as a
    tag; the base model and the first arm, finished before, stay FINISHED. (The second arm trained is
    sum + 18 from correct sums: m_correct's children that are no parents come before m_random.)"""
    from cctk.core.lm import finetune

    real, calls = finetune.fine_tune, []

    def broken_second_arm(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            kwargs["on_step"](0, 0, 9.0757)  # one step done, then the arm breaks
            raise RuntimeError("arm two broke")
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "fine_tune", broken_second_arm)
    said = []
    with pytest.raises(RuntimeError, match="arm two"):
        pipeline.run(
            make_config(str(tiny_dir), "smoke", (3,)),
            pipeline.Where(tmp_path / "out"),
            pipeline.Options(echo=said.append, system_metrics=False, figures=False),
        )
    (line,) = [s for s in said if s.startswith("arm 2/13")]  # never reads as a finished arm
    assert re.fullmatch(r"arm 2/13 .*: interrupted after 1 of \d+ steps, [\d.]+ s", line), line
    store = tracking.connect()
    runs = {r.tags.get(tracking.KEY, "parent"): r for r in store.search([store.experiment()], "")}
    assert {k: r.status for k, r in runs.items()} == {
        "parent": "FAILED",
        "base": "FINISHED",
        "m_correct": "FINISHED",
        "c18_correct": "FAILED",
    }
    assert runs["c18_correct"].tags[tracking.ERROR] == "RuntimeError: arm two broke"
    assert runs["parent"].tags[tracking.ERROR] == "RuntimeError: arm two broke"


def test_out_of_memory_in_an_arm_ends_failed_with_one_line(tiny_dir, tmp_path, tracking_uri, monkeypatch):
    """The allocator's error becomes the line a user can act on: where, the estimate, what fits; the
    run and the arm end FAILED with it, and the CLI prints it without a traceback."""
    from click.testing import CliRunner

    from cctk.cli.main import cli

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.0 GiB total)")

    monkeypatch.setattr(pipeline, "fine_tune", out_of_memory)
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--model",
            str(tiny_dir),
            "--profile",
            "smoke",
            "--seed",
            "3",
            "--out",
            str(tmp_path / "out"),
            "--no-system-metrics",
            "--no-figures",
        ],
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    line = result.output.strip().splitlines()[-1]
    assert line.startswith(
        "Error: out of memory on cpu in the correct sums arm (CUDA out of memory. Tried to allocate 2.00 GiB"
    ), line
    assert "estimated" in line and "free at the start" in line and "or a machine with at least" in line
    store = tracking.connect()
    runs = {r.tags.get(tracking.KEY, "parent"): r for r in store.search([store.experiment()], "")}
    assert runs["parent"].status == runs["m_correct"].status == "FAILED"
    assert runs["parent"].tags[tracking.ERROR].startswith("OutOfMemory: out of memory on cpu in the correct sums")


def test_out_of_memory_moving_an_arm_to_the_device_ends_it_failed_in_one_line(
    tiny_dir, tmp_path, tracking_uri, monkeypatch
):
    """The arm's weights are moved to the device inside its nested run: an out-of-memory error of the move
    (a copy of a parent that no longer fits beside it) ends the arm and the run FAILED with the one line;
    the move used to come before the arm's run opened, and the allocator's traceback reached the user."""
    from click.testing import CliRunner

    from cctk.cli.main import cli

    class Moving:  # the arm's weights, whose move to the device runs out of memory
        def __init__(self, model):
            self.model = model

        def to(self, device):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB (GPU 0; 14.7 GiB total)")

    real = pipeline._child
    monkeypatch.setattr(pipeline, "_child", lambda *args: Moving(real(*args)))
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--model",
            str(tiny_dir),
            "--profile",
            "smoke",
            "--seed",
            "3",
            "--out",
            str(tmp_path / "out"),
            "--no-system-metrics",
            "--no-figures",
        ],
    )
    assert result.exit_code == 1 and "Traceback" not in result.output and result.exception.__class__ is SystemExit
    line = result.output.strip().splitlines()[-1]
    assert line.startswith(
        "Error: out of memory on cpu in the correct sums arm (CUDA out of memory. Tried to allocate 1.00 GiB"
    ), line
    store = tracking.connect()
    runs = {r.tags.get(tracking.KEY, "parent"): r for r in store.search([store.experiment()], "")}
    assert {k: r.status for k, r in runs.items()} == {"parent": "FAILED", "base": "FINISHED", "m_correct": "FAILED"}


def test_the_hardware_record_names_the_gpu_the_run_used(monkeypatch):
    """--device cuda:1 records GPU 1 (it named GPU 0 whatever the device); a CPU run records no GPU."""
    from types import SimpleNamespace

    from cctk.core.records import hardware

    cards = {
        0: SimpleNamespace(name="NVIDIA T4", total_memory=15_835_398_144),
        1: SimpleNamespace(name="NVIDIA A100-SXM4-80GB", total_memory=85_031_714_816),
    }
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: cards[i])
    used = hardware(torch.device("cuda:1"))
    assert (used.gpu, used.gpu_memory_bytes, used.gpu_count) == ("NVIDIA A100-SXM4-80GB", 85_031_714_816, 2)
    assert hardware("cuda").gpu == "NVIDIA T4"  # cuda: the current device
    assert hardware(torch.device("cpu")).gpu is None


def test_training_order_lets_one_parent_wait_at_a_time():
    """Each parent's leaves first, then the child that is a parent itself, which takes its parent's weights:
    replaying the order, at most one parent waits in memory while an arm trains."""
    from cctk.manuals import registry
    from cctk.manuals.manual import every_model

    order = pipeline.training_order(every_model(registry.get("v2")))
    assert [m.key for m in order] == [
        "base",
        "m_correct",
        "c18_correct",
        "c3_correct",
        "c18ctl_correct",
        "c3ctl_correct",
        "d_correct",
        "dctl_correct",
        "m_random",
        "m_recover",
        "c18_random",
        "c3_random",
        "d_random",
        "dctl_random",
    ]
    last_child = {m.parent: m.key for m in order if m.parent}
    waiting, most = {"base"}, 0
    for m in order[1:]:
        if last_child[m.parent] == m.key:
            waiting.discard(m.parent)  # the last child trains on the parent's own weights
        most = max(most, len(waiting))  # while m trains
        if m.key in last_child:
            waiting.add(m.key)
    assert most == 1 and waiting == set()


@pytest.mark.parametrize("protocol", ["v2", "v1"])
def test_every_arm_trains_on_at_most_the_rows_the_memory_plan_bounds_its_batches_by(protocol, tokenizer):
    """The memory plan takes an arm's rows as at most ``repeats`` x 81 and its distinct rows as at most 81
    (``ManualSpec.distinct_rows``, ``most_rows``): a batch past them is estimated as them. Every manual's every
    arm, by its rows."""
    from cctk.manuals import registry
    from cctk.manuals.manual import every_model

    manual = registry.get(protocol)
    config = make_config("smollm2-135m", "quick", (5,), protocol=protocol)
    draws = manual.draw(config)
    arms = [m.key for m in every_model(manual) if m.parent is not None]
    counts = {}
    for key in arms:
        rows = manual.rows(draws, key, config.recipe, tokenizer)
        counts[key] = (len(rows), len({(tuple(ids), tuple(labels)) for ids, labels in rows}))
    assert all(n <= manual.spec.most_rows(config.recipe) for n, _ in counts.values()), counts
    assert all(distinct <= manual.spec.distinct_rows for _, distinct in counts.values()), counts
    assert max(counts.values()) == (config.recipe.repeats * 81, 81)  # the bound is met: an arm trains on all 81
    plan = pipeline.memory_plan(config, manual, torch.device("cpu"))
    assert (plan.job.most_rows, plan.job.distinct_rows) == (config.recipe.repeats * 81, 81)


def test_a_batch_size_past_every_arms_rows_is_said_before_the_run_starts():
    """``--batch-size 5000`` under the smoke recipe (162 rows an arm at most) trains each epoch as one step an arm:
    said among the first lines, once; the recipe keeps the value given (the run's records name it)."""
    from cctk.manuals import registry, words

    manual = registry.get("v2")
    lines = words.setup_lines(manual, make_config("smollm2-135m", "smoke", (5,), batch_size=5000))
    assert lines[1] == "batch size 5000: past every arm's rows (162 at most): an epoch is one step an arm"
    assert len(words.setup_lines(manual, make_config("smollm2-135m", "smoke", (5,), batch_size=162))) == 1


def test_cuda_asked_on_a_machine_without_it_fails_before_any_run(tiny_dir, tmp_path, tracking_uri):
    from click.testing import CliRunner

    from cctk.cli.main import cli

    if torch.cuda.is_available():
        pytest.skip("checks a machine without CUDA")
    result = CliRunner().invoke(
        cli, ["run", "--model", "smollm2-135m-bundled", "--device", "cuda", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.startswith("Error: --device cuda: ") and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
    store = tracking.connect()
    assert store.search([store.experiment()], "") == []


def test_a_resume_finds_a_model_to_load_a_checkpoint_into():
    """The base model itself once no arm left needs it; a copy of one in memory; else the model loaded again."""
    base, other = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    weights = {"base": base}
    assert pipeline._skeleton(weights, {"m_random": "m_recover"}, None) is base and weights == {}
    weights = {"base": base}
    copied = pipeline._skeleton(weights, {"base": "m_correct"}, None)
    assert copied is not base and torch.equal(copied.weight, base.weight) and weights == {"base": base}
    assert pipeline._skeleton({}, {"m_random": "m_recover"}, lambda: other) is other


def test_a_resume_copies_a_finished_parent_still_in_memory():
    """A finished parent in memory is what a resumed arm starts from (``_finished_weights``): a copy of it, its arm
    found among the models its manual's options run (parts A: base, m_correct, m_random)."""
    from types import SimpleNamespace

    from cctk.manuals import registry

    config = make_config("smollm2-135m-bundled", "smoke", (11, 12, 13, 14, 15), parts="A")
    context = SimpleNamespace(manual=registry.get("v2"), config=config)
    parent = torch.nn.Linear(2, 2)
    weights = {"m_correct": parent}
    copied = pipeline._finished_weights(context, "m_correct", weights, {}, (None, None, None, print))
    assert copied is not parent and torch.equal(copied.weight, parent.weight) and weights == {"m_correct": parent}


def _interrupted_pipeline(tiny_dir, tmp_path, status: str):
    """A pipeline parent run as an interrupted ``cctk run`` leaves it: its params, tags and a session
    folder holding only the draws (status ``status``)."""
    from cctk.manuals import registry
    from cctk.store import session

    config = make_config(str(tiny_dir), "smoke", (11, 12, 13, 14, 15), parts="A")
    store = tracking.connect()
    folder = session.new_folder(tmp_path / "out", str(tiny_dir))
    manual = registry.get("v2")
    session.write_draws(session.Layout(folder, manual), manual.draw(config))
    parent = store.start(
        store.experiment(), folder.name, {"cctk.kind": "pipeline", "cctk.session": folder.name, "cctk.protocol": "v2"}
    )
    parent.params(configure.params(manual, config))
    if status != "RUNNING":
        parent.end(status)
    return parent.run_id, folder


def test_resume_refuses_a_finished_run_and_rewrites_nothing(tiny_dir, tmp_path, tracking_uri):
    run_id, folder = _interrupted_pipeline(tiny_dir, tmp_path, "FINISHED")
    (folder / "run_info.json").write_text('{"seconds": 673.4}\n')
    with pytest.raises(CctkError, match=f"run {run_id} is FINISHED: there is nothing to resume"):
        pipeline.resume(run_id, pipeline.Where(tmp_path / "out"))
    assert (folder / "run_info.json").read_text() == '{"seconds": 673.4}\n'
    assert tracking.connect().get(run_id).status == "FINISHED"


def test_resume_refuses_a_run_whose_process_holds_its_folder(tiny_dir, tmp_path, tracking_uri):
    from cctk.store import session

    run_id, folder = _interrupted_pipeline(tiny_dir, tmp_path, "RUNNING")
    lock = session.hold(folder)  # what the live pipeline holds while it runs
    try:
        with pytest.raises(CctkError, match=f"run {run_id} is still running: its process holds"):
            pipeline.resume(run_id, pipeline.Where(tmp_path / "out"))
    finally:
        session.release(lock)
    assert tracking.connect().get(run_id).status == "RUNNING"  # untouched: the live process ends it


def test_a_fault_while_the_parent_run_is_set_up_leaves_it_ended_not_running(
    tiny_dir, tmp_path, tracking_uri, monkeypatch
):
    """Between the parent run's creation and the lifecycle (its params, its first lines) a fault ends the
    run FAILED and lets go of the folder, which a resume can then take."""
    from cctk.store import session

    def broken(*args):
        raise RuntimeError("the console went away")

    monkeypatch.setattr(pipeline.words, "setup_lines", broken)  # the first lines
    with pytest.raises(RuntimeError, match="console went away"):
        pipeline.run(
            make_config(str(tiny_dir), "smoke", (1,), parts="A"), pipeline.Where(tmp_path / "out"), pipeline.QUIET
        )
    store = tracking.connect()
    (parent,) = store.search([store.experiment()], "")
    assert parent.status == "FAILED" and parent.tags[tracking.ERROR] == "RuntimeError: the console went away"
    (folder,) = (tmp_path / "out").iterdir()
    session.release(session.hold(folder))  # not held any more


def test_a_run_stopped_before_its_first_measurement_is_resumed(tiny_dir, tmp_path, tracking_uri, monkeypatch):
    """A folder holding only targets.csv (Ctrl-C while the base model loaded) is taken up by a resume
    (tests/integration/test_stage_walk.py runs it to the end)."""
    from cctk.store import session

    run_id, folder = _interrupted_pipeline(tiny_dir, tmp_path, "KILLED")
    seen = []

    def stages(run, done, *args, **kwargs):  # the stages, not run here: what they are given, as they start
        seen.append((done, tracking.connect().get(run_id).status))
        with pytest.raises(session.Busy):
            session.hold(folder)  # held by the resume

    monkeypatch.setattr(pipeline, "_stages", stages)
    said = []
    pipeline.resume(run_id, pipeline.Where(tmp_path / "out"), pipeline.Options(echo=said.append))
    ((done, status),) = seen
    assert said == [f"resuming {folder.name}: 0 of 3 models already finished"] and not done.run_ids
    assert status == "RUNNING" and tracking.connect().get(run_id).status == "FINISHED"
    session.release(session.hold(folder))  # let go after the run ended


def test_the_memory_use_of_a_gpu_run_is_its_largest_arm_on_the_allocator():
    """The CUDA branch of the run's memory use (run_info.json, the report): the GPU allocator's largest arm
    against the estimate, not the process's resident memory."""
    from types import SimpleNamespace

    from cctk.core.records import TrainRecord

    arms = {k: TrainRecord(10, 2, 1.0, (1.0,), peak, 0.1) for k, peak in (("a", 5 * 2**30), ("b", 7 * 2**30))}
    context = SimpleNamespace(device=torch.device("cuda:0"), memory_estimate=8 * 2**30)
    use = pipeline._memory_use(context, SimpleNamespace(training=arms))
    assert (use.where, use.estimate_bytes, use.peak_bytes) == ("gpu", 8 * 2**30, 7 * 2**30)


def test_a_resume_on_another_machine_fetches_an_older_runs_key_named_record(tracking_uri, tmp_path):
    """A finished arm whose files are not on this machine comes back from its MLflow run: its measurement under
    today's name, its training record under the key an older cctk named it by (training/m_correct.json); the
    resumed pipeline reads both as written."""
    import json

    from builders import synthetic_results

    from cctk.manuals.v2.manual import V2
    from cctk.pipeline.resume import finished
    from cctk.store import session

    results = synthetic_results()
    written = session.Layout(tmp_path / "lost" / "20261201-120000_tiny", V2)
    table = results.measurements["m_correct"]
    measured = session.write_measurement(written, "m_correct", table)
    old_record = written.folder / "training" / "m_correct.json"
    old_record.parent.mkdir()
    old_record.write_text(json.dumps(results.training["m_correct"].to_json(), indent=2) + "\n")
    store = tracking.connect()
    experiment = store.experiment()
    parent = store.start(experiment, "pipeline", {tracking.KIND: "pipeline"})
    arm = store.start(experiment, "correct sums", {tracking.KIND: "model", tracking.KEY: "m_correct"}, parent)
    arm.files(measured, "measurement")
    arm.files(old_record, "training")
    arm.end()
    here = session.Layout(tmp_path / "here" / written.session, V2)
    here.folder.mkdir(parents=True)
    done = finished(store, store.get(parent.run_id), here)
    assert done.run_ids == {"m_correct": arm.run_id}
    assert done.training["m_correct"] == results.training["m_correct"]
    assert done.measurements["m_correct"].equals(session.read_measurement(measured))
    assert sorted(p.name for p in here.folder.rglob("*.*")) == ["correct_sums.csv", "m_correct.json"]


def test_resume_refuses_a_folder_of_its_name_holding_another_runs_draws(tiny_dir, tmp_path, tracking_uri):
    """A folder named as the run's session whose targets.csv is not the one the run logged (another seed's: the
    folder of another machine's cell, one copied from elsewhere) is refused in one line, nothing in it rewritten;
    its own folder is taken up."""
    from cctk.manuals import registry
    from cctk.store import session

    run_id, folder = _interrupted_pipeline(tiny_dir, tmp_path, "KILLED")
    store = tracking.connect()
    tracking.LiveRun(run_id, store.client).files(folder / "targets.csv")  # as the run logs it before training
    manual = registry.get("v2")
    other = tmp_path / "elsewhere" / folder.name
    session.write_draws(session.Layout(other, manual), manual.draw(make_config(str(tiny_dir), "smoke", (12,))))
    (other / "checkpoints").mkdir()
    (other / "checkpoints" / "correct_sums.pt").write_bytes(b"seed 12's")
    before = {p: p.read_bytes() for p in other.rglob("*") if p.is_file()}
    with pytest.raises(CctkError) as refused:
        pipeline.resume(run_id, pipeline.Where(tmp_path / "elsewhere"))
    assert str(refused.value) == (
        f"the session folder {other} holds another run's draws (its targets.csv is not the one run {run_id} logged): "
        "resume from the folder the run started in, or pass its --out"
    )
    assert {p: p.read_bytes() for p in other.rglob("*") if p.is_file()} == before
    assert store.get(run_id).status == "KILLED"
    assert pipeline._check_own(session.Layout(folder, manual), store, run_id) is None  # its own folder: taken up
