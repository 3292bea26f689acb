"""The command line of the benchmarks, ``python -m cctk.bench measure | train | pipeline | absorb | figures | exit |
paper | gpu | server`` (ratios measured in one process): one module of this package per command, whose docstring
says what it times against what.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import click

from ..cli.options import Folder, OneLineGroup, tracking_option

JSON_FILE = click.Path(dir_okay=False, path_type=Path)
JSON_OUT = click.option("--json-out", type=JSON_FILE, default=None, help="Also write the figures as JSON to this file.")


@click.group(cls=OneLineGroup)
def bench() -> None:
    """Speed benchmarks of cctk (ratios in one process; never asserted in tests)."""


def _report(result: Mapping[str, str | int | float | bool | None], json_out: Path | None) -> None:
    """One line per figure, names right-aligned; the same as JSON when asked."""
    width = max(map(len, result))
    for key, value in result.items():
        click.echo(f"{key:>{width}}: {value}")
    if json_out:
        json_out.write_text(json.dumps(result, indent=2) + "\n")


@bench.command("measure")
@click.option("--model", default="smollm2-135m-bundled", show_default=True)
@click.option(
    "--additions",
    type=click.IntRange(1, 81),
    default=81,
    show_default=True,
    help="Time the plain loop on the first N additions only (both sides use the same N).",
)
@JSON_OUT
def bench_measure(model: str, additions: int, json_out: Path | None) -> None:
    """Plain one-candidate loop vs ``measure``: seconds, speedup, largest |log-prob difference|."""
    from .measure import run

    _report(run(model, additions), json_out)


@bench.command("train")
@click.option("--model", default="smollm2-135m-bundled", show_default=True)
@click.option(
    "--steps", type=click.IntRange(min=1), default=12, show_default=True, help="Timed optimizer steps of each loop."
)
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=None, help="Examples per step  [default: the quick profile's]"
)
@JSON_OUT
def bench_train(model: str, steps: int, batch_size: int | None, json_out: Path | None) -> None:
    """Examples per second: a plain PyTorch loop vs ``fine_tune`` (float32, bf16) vs the compute limit."""
    from .train import profiles, run

    _report(run(model, steps, batch_size or profiles()["quick"].batch_size), json_out)


@bench.command("pipeline")
@click.option("--model", default="smollm2-135m-bundled", show_default=True)
@click.option("--profile", default="quick", show_default=True)
@click.option("--seed", default=None, help="seeds[0] of the run (fresh if omitted).")
@click.option(
    "--out",
    type=Folder(),
    default=None,
    help="Folder for the session and its tracking store [default: a temporary folder, removed].",
)
@click.option(
    "--figures/--no-figures",
    default=True,
    show_default=True,
    help="Pass --no-figures to cctk run: the wall time of the tables and reports alone.",
)
@JSON_OUT
def bench_pipeline(
    model: str, profile: str, seed: str | None, out: Path | None, figures: bool, json_out: Path | None
) -> None:
    """A whole pipeline as a user runs it (``cctk run`` in a child process): its wall time against the
    compute limit of its training, the GEMM peak measured here before and after it."""
    from .pipeline import run

    _report(run(model, profile, seed, out, figures), json_out)


@bench.command("figures")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Heatmaps saved each way.")
@JSON_OUT
def bench_figures(repeats: int, json_out: Path | None) -> None:
    """A heatmap saved as PNG, PDF and EPS: matplotlib's PostScript font box every time vs kept per font."""
    from .figures import run

    _report(run(repeats), json_out)


@bench.command("exit")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True, help="Processes each way.")
@JSON_OUT
def bench_exit(repeats: int, json_out: Path | None) -> None:
    """A process that imported what ``cctk run`` imports: its end as before (every object collected) vs now."""
    from .exit import run

    _report(run(repeats), json_out)


@bench.command("paper")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--width", type=click.Choice(["column", "page"]), default="column", show_default=True)
@JSON_OUT
def bench_paper(source: Path, width: str, json_out: Path | None) -> None:
    """A session's figures and tables in paper style, stage by stage (SOURCE: a session folder)."""
    from .paper import run

    _report(run(source, width), json_out)


@bench.command("gpu")
@click.option("--device", default=None, help="The device to check [default: cuda when available, else cpu].")
@JSON_OUT
def bench_gpu(device: str | None, json_out: Path | None) -> None:
    """First contact with a device: arithmetic, GEMM peaks, packed = padded, measure there, the memory
    estimate against measured peaks (shapes that do not fit reported, not run), syncs per step of every
    precision and optimizer, how launch-bound the manual's step is, a small card's message (random weights)."""
    import torch

    from ..core.errors import CctkError
    from .gpu import run

    try:
        result = run(device)
    except CctkError as error:
        raise click.UsageError(str(error)) from None
    except torch.OutOfMemoryError as error:  # a check outside the planned shapes: one line, not a traceback
        raise click.ClickException(f"out of memory on the device: {str(error).splitlines()[0][:200]}") from None
    _report(result, json_out)


@bench.command("absorb")
@click.option("--model", default="smollm2-135m-bundled", show_default=True)
@click.option("--seeds", required=True, help="Comma-separated seeds, or N to draw N fresh ones.")
@click.option("--profile", default="quick", show_default=True)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="A recipe value other than the profile's.")
@click.option("--json-out", type=JSON_FILE, default=None, help="Append one JSON line per seed.")
def bench_absorb(model: str, seeds: str, profile: str, sets: tuple[str, ...], json_out: Path | None) -> None:
    """Part A arms per seed (the pipeline's corpora and training): do they absorb with this recipe?

    One line per seed: each arm's hits on its own target (correct sums, fabricated answers) against the run's
    thresholds, its last-epoch loss and seconds. For choosing a quick recipe on evidence.
    """
    from ..core.config import parse_set, seeds_or_count
    from ..core.errors import CctkError
    from ..core.lm.models import check_available
    from ..manuals.configure import make_config
    from ..manuals.registry import DEFAULT, default
    from .absorb import part_a

    try:
        check_available(model)
        overrides = {}
        for text in sets:
            name, given = parse_set(text)
            if len(given) != 1:
                raise CctkError(f"--set {name}: one value per run of absorb, got {len(given)}")
            overrides[name] = given[0]
        values = seeds_or_count(seeds)
        recipe = make_config(model, profile, values, protocol=DEFAULT, **overrides).recipe
        plain = default().spec.model_name
    except CctkError as error:
        raise click.UsageError(str(error)) from None
    click.echo(f"{model}, profile {profile}: {recipe}")
    click.echo(f"seeds {', '.join(map(str, values))}" + (" (drawn fresh)" if len(seeds.split(",")) == 1 else ""))
    for seed in values:
        row = part_a(model, recipe, seed)
        arms = [(key, arm) for key, arm in row.items() if isinstance(arm, dict)]
        said = ", ".join(
            f"{plain(key)} {arm['hits']}/{arm['n']} (loss {arm['losses'][-1]:.3f}, {arm['seconds']:.0f} s)"
            for key, arm in arms
        )
        needs = " and ".join(str(arm["needed"]) for _, arm in arms)
        click.echo(f"seed {seed}: {said}: " + ("absorbed" if row["absorbed"] else f"NOT absorbed (needs {needs})"))
        if json_out:
            with json_out.open("a") as f:
                f.write(json.dumps({"model": model, "profile": profile, "recipe": asdict(recipe), **row}) + "\n")


@bench.command("server")
@click.option("--clients", type=click.IntRange(min=1), default=8, show_default=True, help="Client processes.")
@click.option("--seconds", type=click.FloatRange(min=1), default=60, show_default=True, help="How long each logs.")
@tracking_option("A running server's URL (default: one of its own).", dest="url")
@click.option("--auth/--no-auth", default=True, show_default=True, help="Its own server: MLflow's basic-auth on.")
@click.option(
    "--backend-store-uri",
    default=None,
    help="Its own server's store (default: SQLite in a temporary folder); PostgreSQL takes PGPASSWORD.",
)
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Its own server's.")
@click.option(
    "--auth-cache",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Its own server: seconds a checked password is trusted ([server.auth] cache_seconds).",
)
@JSON_OUT
def bench_server(
    clients: int,
    seconds: float,
    url: str | None,
    auth: bool,
    backend_store_uri: str | None,
    workers: int,
    auth_cache: int,
    json_out: Path | None,
) -> None:
    """Load check: clients logging metrics for a while; writes, lost writes, requests a second, p50/p99."""
    from .server import run

    _report(run(clients, seconds, url, auth, backend_store_uri, workers, auth_cache), json_out)
