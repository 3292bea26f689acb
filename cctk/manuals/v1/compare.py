"""Manual 1.0.0 across runs (``cctk compare``): its three numbers over seeds. Pure: runs in, a ``Comparison`` out."""

from __future__ import annotations

import pandas as pd

from ...core.stats import t_interval
from ..pooled import Comparison, PooledRun, grouped, stacked
from .experiment import ComparisonResults

TITLE = "Protocol 1.0.0: the three numbers across seeds"
CAPTION = (
    "Protocol 1.0.0 runs across seeds: for each base model and each of the three numbers "
    "(probability of the true sum before fine-tuning, of the fabricated value after, of the "
    "true sum after) and, as a check, the base model's probability of the fabricated value (table 2's fourth "
    "row), the mean over runs of the run's mean over the 81 additions, with a "
    "Student's t 95% interval over runs (clipped to [0, 1]; none for one run), and the hits "
    "(top choice is that answer) summed over runs."
)


def compare(runs: list[PooledRun[ComparisonResults]]) -> Comparison:
    """The three numbers across runs, as the one table of the comparison (none when no run gives a row)."""
    table = three_numbers(runs)
    if not len(table):
        return Comparison()
    return Comparison(
        {"v1_three_numbers": table}, {"v1_three_numbers": CAPTION}, table_titles={"v1_three_numbers": TITLE}
    )


def three_numbers(runs: list[PooledRun[ComparisonResults]]) -> pd.DataFrame:
    """Per group and number (pre-fine-tuning true sum, post-fine-tuning fabricated value, post-fine-tuning true
    sum, and the check row of each run's table02: pre-fine-tuning fabricated value), the mean over runs of each
    run's mean probability over the 81 additions with a t interval over runs, and the hits summed over runs."""
    rows = []
    for label, mine in grouped(runs):
        for number, part in stacked(mine, "table02").groupby("number", sort=False):
            mean, lo, hi = t_interval(part["mean"])
            rows.append(
                {
                    **label,
                    "number": number,
                    "runs": part["run_id"].nunique(),
                    "mean": mean,
                    "mean_lo": lo,  # the mean's t interval, not the hits' (lo, hi beside hits / n would say so)
                    "mean_hi": hi,
                    "hits": int(part["hits"].sum()),
                    "n": int(part["n"].sum()),
                }
            )
    return pd.DataFrame(rows)
