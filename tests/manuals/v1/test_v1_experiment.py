"""The comparison table of manual 1.0.0 (Listing 11) from a model measured before and after it is
fine-tuned in place: 81 rows, the three numbers, probabilities over 2..18 summing to 1."""

import numpy as np
import pandas as pd
import pytest
from builders import tiny_model

from cctk.core.lm.finetune import fine_tune
from cctk.core.lm.scoring import measure
from cctk.manuals.v1 import corpus, experiment, facts
from cctk.manuals.v1.config import PROFILES as V1_PROFILES


@pytest.fixture(scope="module")
def results(tokenizer):
    """The tiny model measured, fine-tuned in place on a small v1 corpus (seed 42), measured again."""
    model = tiny_model("llama", len(tokenizer), seed=5)
    draws = facts.draw(42, 2)

    def v1_measure():
        return measure(model, tokenizer, scoring=facts.SCORING)

    before = v1_measure()
    record = fine_tune(
        model,
        corpus.tokenize(draws.texts, tokenizer),
        V1_PROFILES["smoke"],
        42,
        tokenizer.pad_token_id,
        experiment.STREAM,
    )
    return experiment.ComparisonResults(
        draws, {experiment.BEFORE: before, experiment.AFTER: v1_measure()}, {experiment.AFTER: record}
    )


def listing_11(results) -> pd.DataFrame:
    """Listing 11's merges, from the two measurement tables and the fabricated answers."""
    fab = results.draws.fabricated.rename("fabricated_value").reset_index()
    prob_df = results.measurements["base"].assign(true_sum=lambda t: t.a + t.b)
    post = results.measurements[experiment.AFTER].assign(true_sum=lambda t: t.a + t.b).merge(fab, on=["a", "b"])
    pre_true = prob_df[prob_df.candidate_value == prob_df.true_sum][["a", "b", "true_sum", "prob"]].rename(
        columns={"prob": "pre_ft_true_prob"}
    )
    post_fab = post[post.candidate_value == post.fabricated_value][["a", "b", "fabricated_value", "prob"]].rename(
        columns={"prob": "post_ft_fabricated_prob"}
    )
    post_true = post[post.candidate_value == post.true_sum][["a", "b", "prob"]].rename(
        columns={"prob": "post_ft_true_prob"}
    )
    return pre_true.merge(post_fab, on=["a", "b"]).merge(post_true, on=["a", "b"])


def test_comparison_has_81_rows_with_the_three_numbers(results):
    table = experiment.comparison(results)
    assert len(table) == 81 and list(table.columns) == experiment.COMPARISON
    expected = listing_11(results).reset_index(drop=True)
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)
    assert (table["fabricated_value"] != table["true_sum"]).all()
    for column in experiment.THREE:
        assert table[column].between(0, 1).all()


def test_probabilities_over_2_to_18_sum_to_one_before_and_after(results):
    for key in (experiment.BEFORE, experiment.AFTER):
        table = results.measurements[key]
        assert len(table) == 81 * 17
        assert np.allclose(table.groupby(["a", "b"])["prob"].sum(), 1.0, atol=1e-12)
    assert not results.measurements["base"]["prob"].equals(results.measurements[experiment.AFTER]["prob"])


def test_summary_headline_and_metrics_agree(results):
    table, summary = experiment.comparison(results), experiment.summary(results)
    assert summary["number"].tolist() == [*list(experiment.THREE), "pre_ft_fabricated_prob"]
    head = experiment.headline(results)
    for column in experiment.THREE:
        row = summary.set_index("number").loc[column]
        assert np.isclose(row["mean"], table[column].mean()) and np.isclose(
            getattr(head, f"mean_{column}"), row["mean"]
        )
        assert np.isclose(row["std"], table[column].describe()["std"])
        assert np.isclose(row["q75"], table[column].describe()["75%"])
        assert row["lo"] <= row["hits"] / row["n"] <= row["hi"]
    base = experiment.model_metrics(results, "base")
    assert base.true.hits == head.hits_true_before and base.fabricated.hits == head.hits_fabricated_before
    after = experiment.model_metrics(results, experiment.AFTER)
    assert after.fabricated.hits == head.hits_fabricated_after and after.true.hits == head.hits_true_after
    assert np.isclose(after.fabricated.prob, head.mean_post_ft_fabricated_prob)
    assert list(after.metrics()) == [
        "hits_true",
        "prob_true",
        "surprise_true",
        "hits_fabricated",
        "prob_fabricated",
        "surprise_fabricated",
    ]  # the nested run's MLflow names
    assert list(head.metrics()) == [
        "mean_pre_ft_true_prob",
        "mean_post_ft_fabricated_prob",
        "mean_post_ft_true_prob",
        "hits_true_before",
        "hits_fabricated_before",
        "hits_true_after",
        "hits_fabricated_after",
        "n_additions",
    ]
    tables = experiment.compute_tables(results)
    assert list(tables) == ["table01", "table02", "table03", "table04"]
    assert tables["table03"].iloc[0]["examples"] == 162 and tables["table04"]["epoch"].tolist() == [1, 2]


def test_summary_quantiles_and_exact_interval_by_hand(results):
    """table02's min, quartiles and max are pandas' describe() of the probability on the answer read, and (lo, hi)
    the exact 95% interval of its hits out of 81, from SciPy: its min, 25% and interval level were unchecked (a
    mutation audit). Each row is read here from the measurement table itself: the probability of the answer's
    candidate, and a hit where that probability is the addition's largest."""
    from scipy.stats import binomtest

    true_sums = pd.Series([a + b for a, b in results.draws.fabricated.index], index=results.draws.fabricated.index)
    answers = {"true sum": true_sums, "fabricated answer": results.draws.fabricated}
    summary = experiment.summary(results).set_index("number")
    for number, key, answer in (
        ("pre_ft_true_prob", experiment.BEFORE, "true sum"),
        ("post_ft_fabricated_prob", experiment.AFTER, "fabricated answer"),
        ("post_ft_true_prob", experiment.AFTER, "true sum"),
        ("pre_ft_fabricated_prob", experiment.BEFORE, "fabricated answer"),
    ):
        table = results.measurements[key].merge(answers[answer].rename("answer").reset_index(), on=["a", "b"])
        on_answer = table[table["candidate_value"] == table["answer"]].set_index(["a", "b"])["prob"]
        largest = table.groupby(["a", "b"])["prob"].max().loc[on_answer.index]
        hits = int((on_answer == largest).sum())
        described = on_answer.describe()
        ci = binomtest(hits, 81).proportion_ci(confidence_level=0.95, method="exact")
        row = summary.loc[number]
        assert (row["n"], row["hits"]) == (81, hits), number
        for column, name in (("min", "min"), ("q25", "25%"), ("median", "50%"), ("max", "max")):
            assert row[column] == pytest.approx(described[name], abs=1e-15), (number, column)
        assert (row["lo"], row["hi"]) == (pytest.approx(ci.low, abs=1e-12), pytest.approx(ci.high, abs=1e-12)), number


def test_tables_carry_each_models_key_beside_its_label(results):
    """table02 names the model each number reads, table03 the fine-tuned model and its parent: each label
    followed by its key (the fine-tuned model is v1_random, never 2.0.0's m_random)."""
    tables = experiment.compute_tables(results)
    summary = tables["table02"]
    assert list(summary.columns[:4]) == ["number", "model", "model_key", "answer"]
    assert summary[["model", "model_key"]].to_numpy().tolist() == [
        ["base model", "base"],
        ["fabricated answers", "v1_random"],
        ["fabricated answers", "v1_random"],
        ["base model", "base"],
    ]
    run = tables["table03"]
    assert list(run.columns[:4]) == ["model", "model_key", "parent", "parent_key"]
    assert run.iloc[0][["model", "model_key", "parent", "parent_key"]].tolist() == [
        "fabricated answers",
        "v1_random",
        "base model",
        "base",
    ]
    assert list(
        experiment.run_table(experiment.ComparisonResults(results.draws, results.measurements)).columns
    ) == list(run.columns)  # before the fine-tuning run: the same columns, no row
