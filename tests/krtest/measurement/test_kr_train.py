import json
import math
from dataclasses import replace

import mlflow
import pandas as pd
import pytest
from builders import kr_data
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.errors import CctkError
from cctk.core.lm import models
from cctk.core.lm.models import BUNDLED
from cctk.krtest.commands.jobs import read_inputs, run_train
from cctk.krtest.measurement.scoring import ITEM_COLUMNS
from cctk.krtest.measurement.train import corpus_rows, make_train_config, perplexity


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return kr_data(tmp_path_factory.mktemp("krdata"), seed=2)


def history(client, run_id, key):
    return [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]


@pytest.mark.parametrize(("method", "modules"), [("full", None), ("lora", "ffn")])
def test_train_logs_kr_accuracy_and_perplexity_histories(
    tiny_dir, data_dir, tracking_uri, tmp_path, method, modules, monkeypatch
):
    from cctk.krtest.measurement import train

    config = make_train_config(method, modules, seed=1, epochs=2, batch_size=2, eval_every=2, budget=20_000)
    inputs = read_inputs(data_dir / "questions.jsonl", data_dir / "corpus.txt", need_corpus=True, need_validation=True)
    lines = []
    models._last_loaded.clear()
    # the rows its memory plan cut are the rows it trains on: ``train`` cuts nothing again (before: the corpus
    # tokenized twice, seconds for a large one)
    monkeypatch.setattr(train, "corpus_rows", lambda *a: pytest.fail("cut again"))
    trained = run_train(str(tiny_dir), inputs, config, tmp_path / "out", echo=lines.append)
    assert trained.result.steps == 4  # 4 passages, batch 2, 2 epochs
    assert not models._last_loaded  # the only copy, as planned: no pristine twin left in host memory
    run = mlflow.search_runs(search_all_experiments=True, output_format="list")[0]
    client = mlflow.MlflowClient()
    assert run.data.tags["cctk.kind"] == "krtest" and run.info.status == "FINISHED"
    assert lines[-1] == f"MLflow UI: cctk ui {run.info.run_id}"  # before: the run was not named
    accuracy, ppl = history(client, run.info.run_id, "kr_accuracy"), history(client, run.info.run_id, "val_perplexity")
    assert [s for s, _ in accuracy] == [0, 2, 4] and [s for s, _ in ppl] == [0, 2, 4]
    assert all(0 <= v <= 1 for _, v in accuracy) and all(math.isfinite(v) and v > 1 for _, v in ppl)
    assert [s for s, _ in history(client, run.info.run_id, "train_loss")] == [1, 2, 3, 4]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"items.csv", "summary.json", "curve.csv"} <= artifacts
    items = pd.read_csv(tmp_path / "out" / "items.csv")
    assert list(items.columns) == ITEM_COLUMNS and items.line.tolist() == list(range(1, 25))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(summary) == {"n", "correct", "accuracy", "lo", "hi", "mean_margin", "ties", "identical"}
    assert run.data.metrics["accuracy"] == summary["accuracy"] == accuracy[-1][1]
    # its memory as a pipeline arm logs it: the process's peak on a CPU (no GPU figure), beside the plan's estimate
    peak, estimate = trained.result.peak_cpu_memory_bytes, run.data.metrics["memory_estimate_bytes"]
    assert run.data.metrics["peak_cpu_memory_bytes"] == run.data.metrics["peak_memory_bytes"] == peak > 0
    assert not {"peak_gpu_memory_bytes", "peak_gpu_reserved_bytes"} & set(run.data.metrics)
    assert peak <= estimate, (peak, estimate)  # the plan bounds what ran
    assert lines[-2] == f"peak resident memory {peak / 2**30:.1f} GiB, {estimate / 2**30:.1f} GiB planned"
    # once step 0 is evaluated, before the first optimizer step: the training's compute limit (4 passages over 2
    # epochs) and the evaluations to come (steps 2 and 4), logged; at the end the limit and the ratio to it
    (zero,) = [i for i, line in enumerate(lines) if " step 0: KR " in line]
    assert lines[zero + 1].startswith("estimated: the training's float32 compute limit is ")
    assert " (8 rows x " in lines[zero + 1] and "; 2 evaluations (every 2 steps and the last) at " in lines[zero + 1]
    metrics = run.data.metrics
    assert metrics["estimated_limit_seconds"] == pytest.approx(metrics["compute_limit_seconds"], rel=1e-12)
    assert metrics["limit_ratio"] == pytest.approx(metrics["train_seconds"] / metrics["compute_limit_seconds"])
    assert metrics["gflop_per_example"] > 0 and metrics["estimated_eval_seconds"] > 0
    if method == "lora":
        assert int(run.data.params["lora.trainable_parameters"]) == trained.trainable == trained.plan.trainable
        assert run.data.params["lora.targets"] == "gate_proj,up_proj,down_proj"


def test_perplexity_is_exp_of_the_mean_token_loss(tiny, tokenizer):
    rows = corpus_rows("One passage here.\n\nAnother, longer passage of text.\n", tokenizer, 256)
    import torch

    nll, count = 0.0, 0
    with torch.no_grad():
        for ids, _ in rows:
            logits = tiny(torch.tensor([ids])).logits[0, :-1]
            nll += torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="sum").item()
            count += len(ids) - 1
    assert perplexity(tiny, rows, tokenizer.pad_token_id) == pytest.approx(math.exp(nll / count), rel=1e-5)


def test_corpus_rows_cut_long_passages(tokenizer):
    rows = corpus_rows("word " * 50, tokenizer, 16)
    assert [len(ids) for ids, _ in rows][:3] == [16, 16, 16]
    assert all(ids == labels for ids, labels in rows)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--method", "lora"], "--method lora needs --modules"),
        (["--method", "full", "--modules", "ffn"], "--modules is for --method lora"),
        (["--method", "lora", "--modules", "ffn", "--budget", "0"], "budget=0 is out of range"),
        (["--eval-every", "0"], "eval_every=0 is out of range"),
        (["--seed", "4294967296"], "seeds must be in 0..2**32-1 (4294967295), got 4294967296"),
        (["--learning-rate", "2"], "learning_rate=2.0 is out of range"),
        (["--model", "no-such-model"], "unknown model 'no-such-model'"),
        (["--max-tokens", "4096"], "--max-tokens 4096 is past smollm2-135m-bundled's context (2048 tokens"),
    ],
)
def test_train_command_checks_before_any_run(data_dir, tracking_uri, tmp_path, args, message):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "krtest",
            "train",
            "--corpus",
            str(data_dir / "corpus.txt"),
            "--questions",
            str(data_dir / "questions.jsonl"),
            "--out",
            str(out),
            *args,
        ],
    )
    assert result.exit_code == 1, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()
    assert mlflow.search_runs(search_all_experiments=True).empty


def test_run_train_from_python_refuses_rows_past_the_models_context_before_any_run(data_dir, tracking_uri, tmp_path):
    """``run_train``, the library's entry, checks the rows as the command does (it was the command alone: a
    Python caller's rows of 4096 tokens failed in the model)."""
    inputs = read_inputs(data_dir / "questions.jsonl", data_dir / "corpus.txt", need_corpus=True)
    config = make_train_config("full", None, 0, max_tokens=4096)
    with pytest.raises(CctkError) as error:
        run_train("smollm2-135m-bundled", inputs, config, tmp_path / "out")
    assert str(error.value) == (
        "--max-tokens 4096 is past smollm2-135m-bundled's context (2048 tokens, its position embeddings): give at "
        "most 2048"
    )
    assert not (tmp_path / "out").exists() and mlflow.search_runs(search_all_experiments=True).empty


def test_missing_validation_text_fails(data_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text((data_dir / "corpus.txt").read_text())
    with pytest.raises(CctkError, match=r"validation.txt beside the corpus"):
        read_inputs(data_dir / "questions.jsonl", corpus, need_corpus=True, need_validation=True)


def _train_by_cli(tiny_dir, data_dir, out, device_step: str, monkeypatch) -> tuple[object, pd.DataFrame]:
    monkeypatch.setenv("CCTK_DEVICE_STEP", device_step)
    result = CliRunner().invoke(
        cli,
        [
            "krtest",
            "train",
            "--model",
            str(tiny_dir),
            "--corpus",
            str(data_dir / "corpus.txt"),
            "--questions",
            str(data_dir / "questions.jsonl"),
            "--out",
            str(out),
            "--epochs",
            "2",
            "--batch-size",
            "2",
            "--eval-every",
            "2",
            "--seed",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    run = [
        r
        for r in mlflow.search_runs(search_all_experiments=True, output_format="list")
        if r.data.params.get("seed") == "1" and (out / "curve.csv").is_file()
    ]
    return sorted(run, key=lambda r: r.info.start_time)[-1], pd.read_csv(out / "curve.csv")


def test_krtest_train_on_the_device_step_logs_the_host_steps_curve(
    tiny_dir, data_dir, tracking_uri, tmp_path, monkeypatch
):
    """CCTK_DEVICE_STEP=1 cctk krtest train: the accelerator's step, on the CPU (every GPU user's path: it
    died at its first step, logging train_loss=None). It finishes with its curve and histories logged,
    equal to the host step's: losses read once per evaluation instead of every step."""
    host_run, host_curve = _train_by_cli(tiny_dir, data_dir, tmp_path / "host", "0", monkeypatch)
    device_run, device_curve = _train_by_cli(tiny_dir, data_dir, tmp_path / "device", "1", monkeypatch)
    client = mlflow.MlflowClient()
    assert device_run.info.status == "FINISHED"
    for key in ("train_loss", "kr_accuracy", "val_perplexity"):
        assert history(client, device_run.info.run_id, key) == history(client, host_run.info.run_id, key)
    assert [s for s, _ in history(client, device_run.info.run_id, "train_loss")] == [1, 2, 3, 4]
    pd.testing.assert_frame_equal(device_curve, host_curve)
    assert device_curve.step.tolist() == [0, 2, 4] and device_curve.train_loss.iloc[1:].notna().all()


def test_perplexity_goes_through_in_chunks_of_the_logit_budget(tiny, tokenizer, monkeypatch):
    """The validation perplexity built batch x 256 x vocabulary logits at once (6 GiB for Gemma beside the
    moments): it now takes as many rows as the scorer's logit budget holds, with the same value."""
    from cctk.krtest.measurement import train as kr_train

    rows = corpus_rows("One passage here.\n\nAnother, longer passage of text.\n\nA third one.\n", tokenizer, 256)
    whole = perplexity(tiny, rows, tokenizer.pad_token_id)
    longest, vocab = max(len(ids) for ids, _ in rows), tiny.get_output_embeddings().weight.shape[0]
    monkeypatch.setattr(kr_train, "LOGIT_BUDGET", longest * vocab)  # one row a pass
    batches = []
    tiny.register_forward_pre_hook(
        lambda module, args, kwargs: batches.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    assert perplexity(tiny, rows, tokenizer.pad_token_id) == pytest.approx(whole, rel=1e-6)
    assert batches == [1, 1, 1]
    tiny._forward_pre_hooks.clear()


def test_the_chunked_perplexity_holds_three_logit_budgets_as_its_plan_says(tiny, monkeypatch):
    """A chunk's logits, the flattened copy of their shifted view and its log-softmax: the rise of the process's
    resident memory over one full chunk is 3 logit budgets (2.94 measured), what KR-Test's memory plan counts
    (``PERPLEXITY_LOGIT_COPIES``; it planned 2 before #46)."""
    import torch

    from cctk.core.lm import memory
    from cctk.krtest.commands.jobs import memory_plan
    from cctk.krtest.measurement import train as kr_train

    generator = torch.Generator().manual_seed(0)
    vocab = tiny.get_output_embeddings().weight.shape[0]
    rows = [(ids := torch.randint(3, vocab, (64,), generator=generator).tolist(), ids) for _ in range(21)]
    assert kr_train.LOGIT_BUDGET // (64 * vocab) == len(rows)  # one chunk of a full budget
    perplexity(tiny, rows[:2], 0)  # warm
    memory.release_freed()
    if not memory.reset_process_peak():
        pytest.skip("the peak resident memory cannot be reset on this system")
    before = memory.process_memory()
    perplexity(tiny, rows, 0)
    copies = (memory.process_peak() - before) / (kr_train.LOGIT_BUDGET * 4)
    assert 2.5 < copies <= kr_train.PERPLEXITY_LOGIT_COPIES + 0.25, copies
    plan = memory_plan("smollm2-135m", make_train_config(), torch.device("cpu"))
    assert plan.estimate.measurement == kr_train.PERPLEXITY_LOGIT_COPIES * kr_train.LOGIT_BUDGET * 4


def test_krtest_train_that_does_not_fit_fails_in_one_line_before_any_run(
    data_dir, tracking_uri, tmp_path, monkeypatch, tokenizer
):
    """The training is planned with the pipeline's estimator (its rows, cut at 256 tokens, every token supervised,
    evaluated beside the moments): on a machine with 1 GiB free the bundled shape is refused in one line."""
    from cctk.core.lm.memory import GIB, Room
    from cctk.krtest.commands import jobs

    rows = corpus_rows((data_dir / "corpus.txt").read_text(), tokenizer, 256)
    longest = max(len(ids) for ids, _ in rows)

    monkeypatch.setattr(jobs, "room", lambda device: Room(GIB, GIB, "cpu", "cpu"))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "krtest",
            "train",
            "--model",
            "smollm2-135m-bundled",
            "--corpus",
            str(data_dir / "corpus.txt"),
            "--questions",
            str(data_dir / "questions.jsonl"),
            "--out",
            str(out),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 1, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(
        f"Error: smollm2-135m-bundled with this recipe (float32, adamw, batch 4, rows of up to {longest} tokens) needs "
    )
    assert "in host memory" in line and "1.0 GiB free" in line
    assert not out.exists() and mlflow.search_runs(search_all_experiments=True).empty


def test_krtest_eval_of_a_model_too_large_is_refused_before_it_loads(data_dir, tracking_uri, tmp_path, monkeypatch):
    """``krtest eval`` plans its measurement (float32 weights, the scorer's logits): on 0.5 GiB free the bundled
    model is refused in one line, no model loaded, no run started."""
    from cctk.core.lm import device
    from cctk.core.lm.memory import GIB, Room
    from cctk.krtest.commands import jobs

    monkeypatch.setattr(device, "room", lambda where: Room(GIB // 2, GIB // 2, "cpu", "cpu"))  # the plan's
    monkeypatch.setattr(jobs, "load_model", lambda *a, **k: pytest.fail("loaded"))
    out = tmp_path / "out"
    args = ["--questions", str(data_dir / "questions.jsonl"), "--out", str(out), "--device", "cpu"]
    result = CliRunner().invoke(cli, ["krtest", "eval", "--model", "smollm2-135m-bundled", *args])
    assert result.exit_code == 1, result.output
    assert result.output == (
        "Error: smollm2-135m-bundled measured in float32 needs about 1.3 GiB in host memory (weights 0.5 GiB, "
        "scoring logits 0.5 GiB, runtime 0.2 GiB), 0.5 GiB free; or a machine with at least 1.3 GiB of free memory\n"
    )
    assert not out.exists() and mlflow.search_runs(search_all_experiments=True).empty


def test_krtest_train_plans_its_own_rows_not_a_batch_of_rows_of_max_tokens(tokenizer):
    """``krtest train --batch-size 16`` of the bundled model on the generated corpus (36 passages of up to 90
    tokens) was refused on this 24 GiB machine at 27.3 GiB (29.2 since the activations' bound of 2026-12-07):
    rows of 256 tokens, 16 of them as one packed sequence. Its rows are known before any run: 36 of them, the
    longest 90 tokens, none sharing 10% of its tokens with another (so no batch goes packed): 6.0 GiB, and
    every batch size past 36 the same."""
    import torch

    from cctk.core.lm.memory import GIB, Room
    from cctk.krtest.commands import jobs
    from cctk.krtest.generation.generate import make_dataset

    rows = corpus_rows(make_dataset(0).corpus, tokenizer, 256)
    config = make_train_config("full", None, 0, batch_size=16)
    plan = jobs.memory_plan(BUNDLED, config, torch.device("cpu"), rows=rows)
    assert (len(rows), plan.longest_row, plan.job.packs) == (36, 90, False)
    assert memory_gib(plan) == "6.0 GiB" and memory_gib(jobs.memory_plan(BUNDLED, config, torch.device("cpu"))) == (
        "29.2 GiB"
    )
    assert replace(plan, room=Room(12 * GIB, 12 * GIB)).shortfall() is None
    wide = make_train_config("full", None, 0, batch_size=5000)
    assert (
        jobs.memory_plan(BUNDLED, wide, torch.device("cpu"), rows=rows).estimate
        == replace(plan, recipe=replace(config.recipe, batch_size=36)).estimate
    )


def memory_gib(plan) -> str:
    from cctk.core.lm.memory import gib

    return gib(plan.estimate.host(True))


def test_a_lora_arms_step_0_is_the_untouched_models_evaluation_and_a_given_one_is_not_computed_again(
    tiny_dir, data_dir, monkeypatch
):
    """A study hands its blind arm's evaluation (the untouched model on the same items and validation rows) to
    every trained arm as step 0 (``train(untouched=...)``). Computed, a LoRA arm's step 0 is that evaluation to the
    bit (its adapters' B starts at zero); given, it is step 0 as it is, and the model is scored once less."""
    from cctk.core.lm.models import load_model
    from cctk.core.lm.scoring import pad_id
    from cctk.krtest.measurement import train as kr_train
    from cctk.krtest.measurement.scoring import score, summarize

    inputs = read_inputs(data_dir / "questions.jsonl", data_dir / "corpus.txt", need_corpus=True, need_validation=True)
    items = list(inputs.items)
    config = make_train_config("lora", "ffn", seed=1, epochs=1, batch_size=2, eval_every=2, budget=20_000)
    model, tokenizer = load_model(str(tiny_dir))
    table = score(model, tokenizer, items)
    rows = corpus_rows(inputs.validation, tokenizer, config.max_tokens)
    blind = kr_train.Evaluation(0, summarize(table), perplexity(model, rows, pad_id(tokenizer)), math.nan, table)

    computed = kr_train.train(model, tokenizer, items, inputs.corpus, inputs.validation, config)
    first = computed.evaluations[0]
    pd.testing.assert_frame_equal(first.items, blind.items, check_exact=True)
    assert (first.summary, first.val_perplexity) == (blind.summary, blind.val_perplexity)

    scored = []
    monkeypatch.setattr(kr_train, "score", lambda *args: scored.append(args) or score(*args))
    given = kr_train.train(load_model(str(tiny_dir))[0], tokenizer, items, inputs.corpus, inputs.validation, config,
                           untouched=blind)  # fmt: skip
    assert given.evaluations[0] is blind and len(scored) == len(given.evaluations) - 1 == 1
    assert [e.record() for e in given.evaluations[1:]] == [e.record() for e in computed.evaluations[1:]]
    with pytest.raises(ValueError, match="is step 0, not step 2"):
        kr_train.train(model, tokenizer, items, inputs.corpus, inputs.validation, config, untouched=given.final)
