"""Part A's absorption check: a run whose models did not take up their corpora says so."""

from cctk.manuals.v2.design import build_study_inputs
from cctk.manuals.v2.parts import absorption_misses, headline


def test_a_run_that_absorbed_has_no_warning(study):
    assert absorption_misses(study.results) == [] and headline(study.results).absorbed is True
    assert not any(line.startswith("WARNING") for line in headline(study.results).lines())


def test_fabricated_answers_below_73_of_81_are_reported(study, make_table):
    from dataclasses import replace

    inputs = build_study_inputs(study.results.inputs.seed)
    fabricated, sums = inputs.targets["fabricated"], inputs.targets["correct"]
    choices = {p: int(fabricated[p]) if i < 72 else int(sums[p]) for i, p in enumerate(fabricated.index)}
    results = replace(
        study.results, measurements={**study.results.measurements, "m_random": make_table(choices)}, _cache={}
    )
    (miss,) = absorption_misses(results)
    assert miss.startswith("the fabricated answers model hits 72/81 fabricated answers, below 73/81")
    head = headline(results)
    assert head.absorbed is False and head.metrics()["absorbed"] == 0 and head.misses == (miss,)
    assert head.lines()[-1] == f"WARNING: {miss}"  # the console says it at the end of the run
