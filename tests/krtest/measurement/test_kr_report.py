"""The KR-Test study's figure: its perplexity axis read as numbers, as the loss chart's."""

import pandas as pd
import pytest

from cctk.krtest.measurement.report import curves_figure

BASELINES = pd.DataFrame(
    [
        {"arm": "blind baseline", "accuracy": 0.486, "lo": 0.418, "hi": 0.555},
        {"arm": "open-book baseline", "accuracy": 0.995, "lo": 0.974, "hi": 1.0},
    ]
)


def curves(perplexities: dict[str, list[float]]) -> pd.DataFrame:
    rows = [
        {"arm": arm, "step": 3 * i, "kr_accuracy": 0.5, "kr_lo": 0.43, "kr_hi": 0.57, "val_perplexity": value}
        for arm, values in perplexities.items()
        for i, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


def perplexity_labels(perplexities: dict[str, list[float]]) -> list[str]:
    """The labels the drawn figure's perplexity axis shows inside its view, major and minor, bottom to top."""
    fig = curves_figure(curves(perplexities), BASELINES, "a study")
    fig.canvas.draw()
    ax = fig.axes[1]
    low, high = ax.get_ylim()
    ticks = [*ax.get_yticklabels(), *ax.get_yticklabels(minor=True)]
    shown = {t.get_position()[1]: t.get_text() for t in ticks if t.get_text() and low <= t.get_position()[1] <= high}
    return [shown[y] for y in sorted(shown)]


@pytest.mark.parametrize(
    ("perplexities", "shown"),
    [
        # a one-epoch study of the bundled model: 30.6 down to 3.9 (under a decade); before: 5, 10, 20, 30 labelled
        # among unlabelled ticks at 4 and 6 to 9
        ({"full fine-tuning": [30.59, 3.86], "LoRA on FFN": [30.59, 7.4]}, ["5", "10", "20", "30"]),
        ({"full fine-tuning": [12.0, 6.1]}, ["6", "8", "10", "12"]),  # before: 10 alone
        ({"full fine-tuning": [300.0, 2.2]}, ["10", "100"]),  # over two decades the decades (before: 2, 3, 5 of each)
    ],
)
def test_the_perplexity_axis_labels_nice_numbers(perplexities, shown):
    assert perplexity_labels(perplexities) == shown
