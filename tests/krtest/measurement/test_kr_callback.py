"""KRTestCallback inside a plain Hugging Face ``Trainer.train()`` on a tiny model: the Trainer's logs, a real MLflow
store."""

import mlflow
import pytest
import torch
from builders import tiny_model

from cctk.core.errors import CctkError
from cctk.krtest import KRTestCallback
from cctk.krtest.generation.generate import make_dataset, write_dataset
from cctk.krtest.measurement.callback import METRICS
from cctk.krtest.measurement.items import passages
from cctk.krtest.measurement.scoring import score, summarize


def trainer_for(
    model, tokenizer, corpus: str, callback, tmp_path, max_steps: int, eval_steps: int | None = None, logging_steps=0
):
    from transformers import Trainer, TrainingArguments

    rows = [tokenizer(p)["input_ids"][:32] for p in passages(corpus)]
    rows = [r + [tokenizer.pad_token_id] * (32 - len(r)) for r in rows]
    data = [
        {"input_ids": torch.tensor(r), "labels": torch.tensor(r), "attention_mask": torch.ones(32, dtype=torch.long)}
        for r in rows
    ]
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        max_steps=max_steps,
        per_device_train_batch_size=2,
        learning_rate=3e-3,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        **({"logging_steps": logging_steps} if logging_steps else {"logging_strategy": "no"}),
        **({"eval_strategy": "steps", "eval_steps": eval_steps} if eval_steps else {}),
    )
    return Trainer(
        model=model,
        args=args,
        train_dataset=data,
        eval_dataset=data[:2] if eval_steps else None,
        processing_class=tokenizer,
        callbacks=[callback] if callback else [],
    )


def test_callback_logs_kr_histories_to_the_active_run(tokenizer, tracking_uri, tmp_path):
    data = make_dataset(2, entities=2, validation_entities=2)
    questions = write_dataset(data, tmp_path / "data")["questions.jsonl"]
    model = tiny_model("llama", len(tokenizer))
    before = summarize(score(model, tokenizer, list(data.items)))
    callback = KRTestCallback(questions, every=2)
    with mlflow.start_run() as run:
        trainer_for(model, tokenizer, data.corpus, callback, tmp_path, max_steps=5).train()
    client = mlflow.MlflowClient()
    histories = {k: sorted(client.get_metric_history(run.info.run_id, k), key=lambda m: m.step) for k in METRICS}
    assert all([m.step for m in h] == [0, 2, 4, 5] for h in histories.values())  # start, every 2, the last step
    assert [m.value for m in histories["kr_accuracy"]] == pytest.approx([s.accuracy for _, s in callback.history])
    assert [m.value for m in histories["kr_lo"]] == pytest.approx([s.lo for _, s in callback.history])
    assert histories["kr_accuracy"][0].value == before.accuracy  # step 0 is the untouched model
    assert histories["kr_mean_margin"][0].value == pytest.approx(before.mean_margin, abs=1e-5)
    assert histories["kr_mean_margin"][-1].value != pytest.approx(before.mean_margin, abs=1e-3)  # it trained
    final = summarize(score(model, tokenizer, list(data.items)))
    assert histories["kr_mean_margin"][-1].value == pytest.approx(final.mean_margin, abs=1e-5)
    names = [d.dataset.name for d in client.get_run(run.info.run_id).inputs.dataset_inputs]
    assert names == ["kr questions data"]  # data/questions.jsonl: the folder's name, not the file's twice


def kr_steps(trainer) -> list[tuple[int, float]]:
    return [(row["step"], row["kr_accuracy"]) for row in trainer.state.log_history if "kr_accuracy" in row]


def test_metrics_reach_the_trainers_log_history_without_mlflow(tokenizer, tmp_path):
    data = make_dataset(2, entities=2, validation_entities=2)
    callback = KRTestCallback(list(data.items), every=2)
    trainer = trainer_for(tiny_model("llama", len(tokenizer)), tokenizer, data.corpus, callback, tmp_path, max_steps=5)
    trainer.train()  # no MLflow run: the Trainer's logs carry the metrics to whatever report_to says
    assert kr_steps(trainer) == [(step, s.accuracy) for step, s in callback.history]
    assert [step for step, _ in kr_steps(trainer)] == [0, 2, 4, 5]
    last = [row for row in trainer.state.log_history if "kr_accuracy" in row][-1]
    assert set(METRICS) <= set(last) and last["kr_lo"] <= last["kr_accuracy"] <= last["kr_hi"]


def test_the_trainers_own_loss_logs_are_kept(tokenizer, tmp_path):
    """Trainer.log clears the Trainer's pending log of the step: scoring on a logging step must not take its loss."""
    data = make_dataset(2, entities=2, validation_entities=2)

    def losses(callback) -> list[tuple[int, float]]:
        model = tiny_model("llama", len(tokenizer))
        trainer = trainer_for(model, tokenizer, data.corpus, callback, tmp_path, max_steps=5, logging_steps=1)
        trainer.train()
        return [(row["step"], row["loss"]) for row in trainer.state.log_history if "loss" in row]

    plain = losses(None)
    assert [step for step, _ in plain] == [1, 2, 3, 4, 5]
    kept = losses(KRTestCallback(list(data.items), every=2))
    assert [step for step, _ in kept] == [1, 2, 3, 4, 5]  # steps 2 and 4 (scored) lost theirs before
    assert [loss for _, loss in kept] == pytest.approx([loss for _, loss in plain], rel=1e-6)  # each its own step's


def test_on_evaluate_scores_after_each_evaluation(tokenizer, tmp_path):
    data = make_dataset(2, entities=2, validation_entities=2)
    callback = KRTestCallback(list(data.items), every=1, on="evaluate")
    trainer = trainer_for(
        tiny_model("llama", len(tokenizer)), tokenizer, data.corpus, callback, tmp_path, max_steps=5, eval_steps=2
    )
    trainer.train()
    assert [step for step, _ in kr_steps(trainer)] == [0, 2, 4, 5]  # start, then after each evaluation
    evaluated = [row["step"] for row in trainer.state.log_history if "eval_loss" in row]
    assert evaluated == [2, 4, 5]  # the Trainer evaluates at the last step too: one score there, not two


def test_other_ranks_do_nothing_and_bad_arguments_fail(tokenizer):
    from types import SimpleNamespace

    data = make_dataset(2, entities=2, validation_entities=2)
    with pytest.raises(CctkError, match="every=0 is out of range"):
        KRTestCallback(list(data.items), every=0)
    with pytest.raises(CctkError, match="on='epoch': choose one of steps, evaluate, both"):
        KRTestCallback(list(data.items), on="epoch")
    callback = KRTestCallback(list(data.items), every=1, on="both")
    rank1 = SimpleNamespace(is_world_process_zero=False, global_step=1)
    for hook in (callback.on_train_begin, callback.on_step_end, callback.on_evaluate, callback.on_train_end):
        hook(None, rank1, None, model=None)  # no tokenizer, no model: a rank other than 0 never scores
    assert callback.history == [] and callback.tokenizer is None
