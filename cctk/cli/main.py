"""The ``cctk`` command line. Every command checks its input before any work and fails in one line."""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from ..core.config import AUTO, field_type, recipe_fields
from ..core.errors import CctkError, Terminated
from ..core.labels import counted
from ..manuals import registry
from ..manuals.configure import Option, command_options
from ..manuals.manual import AnyManual, Resumable
from ..store.tracking import NotEnded, Unreachable
from .krtest import krtest
from .options import DEVICE, MODEL, RUN_TRACKING, TRACKING, Folder, Given, OneLineGroup, RunIds, out_option
from .server import server, ui

if TYPE_CHECKING:
    from click.decorators import FC

    from ..pipeline.sweep import Grid, Sweep
    from ..store.tracking import Store

# What a recipe option (int, float, str or a choice's str) or a manual's option (a switch, float or str) is read as
OptionValue = str | int | float | bool

RETRIES = 3  # cctk.pipeline.sweep.RETRIES (the CLI imports the pipeline only when a command runs)

MANUALS = registry.every()  # the manuals of the registry: --protocol's choices, their options and profiles
DEFAULT = registry.default()  # what ``cctk run`` runs without --protocol
PROFILES = dict.fromkeys(name for m in MANUALS for name in m.spec.profiles)  # every manual's, each once


# The shell's codes for a process its signal stopped (128 + the signal), which scripts and CI test for.
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


class _Group(OneLineGroup):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (NotEnded, Unreachable) as error:  # runs the store would not end: said, then the command ends as
            leaving = error.leaving  # it was ending (stopped: 130 or 143)
            if leaving is None:
                raise click.ClickException(str(error)) from None
            click.echo(f"Error: {error}", err=True)
            if isinstance(leaving, KeyboardInterrupt):
                raise _stopped(leaving) from None
            if isinstance(leaving, CctkError):
                raise click.ClickException(str(leaving)) from None
            raise leaving from None
        except CctkError as error:
            raise click.ClickException(str(error)) from None
        except KeyboardInterrupt as stop:  # every `finally` has run: the runs ended KILLED
            raise _stopped(stop) from None


def _stopped(stop: KeyboardInterrupt) -> SystemExit:
    """Say how the command was stopped; the exit code the shell gives a process its signal stopped."""
    terminated = isinstance(stop, Terminated)
    click.echo("Stopped (SIGTERM)." if terminated else "Interrupted (Ctrl-C).", err=True)
    return SystemExit(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)


@click.group(cls=_Group)
@click.version_option(package_name="cctk", prog_name="cctk")  # the same line however it is started
def cli() -> None:
    """Fine-tune small causal LMs on arithmetic corpora and measure what they take from them."""


@cli.command(short_help="List the model roster and what each model needs.")
@click.option(
    "--fits",
    is_flag=True,
    help="Instead: what the roster needs on the GPUs people have, from "
    "cctk's memory estimate (a Markdown table; docs/gpus.md's).",
)
@click.option("--profile", default="paper", show_default=True, help="With --fits: the recipe.")
def models(fits: bool, profile: str) -> None:
    """List the model roster and what each model needs."""
    from click.core import ParameterSource

    from ..core.lm.models import ROSTER

    if not fits and click.get_current_context().get_parameter_source("profile") is not ParameterSource.DEFAULT:
        raise CctkError("--profile is the recipe of --fits' table; the roster alone has none")
    if fits:
        _fits_table(profile)
        return
    width = max(len(k) for k in ROSTER)
    click.echo(f"{'key':<{width}}  {'needs':<10}  source")
    for spec in ROSTER.values():
        click.echo(f"{spec.key:<{width}}  {spec.needs:<10}  {spec.source}")
    click.echo("Any Hub id (owner/name) or local model directory works too.")


def _fits_table(profile: str) -> None:
    from ..core.lm.memory import CARDS, fits_table
    from ..core.lm.models import roster_shapes

    profiles = DEFAULT.spec.profiles
    if profile not in profiles:
        raise CctkError(f"unknown profile {profile!r}; choose one of: {', '.join(profiles)}")
    shapes = roster_shapes()
    header = ["model", "parameters", "peak, as is", *CARDS]
    click.echo("| " + " | ".join(header) + " |")
    click.echo("|" + " --- |" * len(header))
    for row in fits_table(shapes, profiles[profile]):
        click.echo("| " + " | ".join(row) + " |")


def recipe_options(command: FC) -> FC:
    """One ``--<name>`` override per field of ``cctk.core.config.Recipe``, typed and documented from it."""
    for spec in reversed(recipe_fields()):
        kind = click.Choice(spec.metadata["choices"]) if "choices" in spec.metadata else field_type(spec.name)
        command = click.option(
            f"--{spec.name.replace('_', '-')}",
            spec.name,
            type=kind,
            default=None,
            help=f"Override: {spec.metadata['help']}.",
        )(command)
    return command


def manual_options(command: FC) -> FC:
    """One ``--<name>`` per option of a manual of the registry (``cctk.manuals.configure.command_options``), each
    once; a run or sweep passes those given to its manual, which refuses one it does not take."""
    seen: dict[str, Option] = {}
    for manual in MANUALS:
        for option in command_options(manual.spec):
            seen.setdefault(option.name, option)
    for option in reversed(seen.values()):
        what = f"a value such as {option.metavar}" if option.metavar else "a value"
        typed = Given(what) if option.kind is str else option.kind
        kind = {"is_flag": True} if option.flag else {"type": typed, "metavar": option.metavar}
        command = click.option(option.flag_name, option.name, default=None, help=option.help, **kind)(command)
    return command


PROTOCOL = Given("a protocol (" + ", ".join(m.spec.name for m in MANUALS) + ")")


def _protocol_help() -> str:
    return " or ".join(f"{m.spec.name} ({m.spec.label}: {m.spec.about})" for m in MANUALS) + "."


@cli.command(short_help="Measure one model on every candidate of every addition.")
@MODEL
@out_option("Folder for measurement.csv and the heatmap.")
@TRACKING
@DEVICE
def measure(model: str, out: Path, tracking: str | None, device: str | None) -> None:
    """Measure one model on every candidate of every addition."""
    from ..pipeline import measure as measure_job

    measure_job.run(model, out, tracking, echo=click.echo, device=device)


@cli.command("run", short_help="Run a manual's whole experiment for one model.")
@click.option("--protocol", type=PROTOCOL, default=registry.DEFAULT, show_default=True, help=_protocol_help())
@MODEL
@click.option(
    "--profile",
    default=AUTO,
    show_default=True,
    help=f"{AUTO} (paper on a CUDA device, quick on a CPU), {', '.join(PROFILES)}; "
    "each protocol has its own recipes under these names.",
)
@click.option(
    "--seed",
    "seed",
    default=None,
    help="seeds[0] (or all seeds, comma-separated); fresh ones if omitted. "
    + " ".join(
        f"Under --protocol {m.spec.name}: one seed, {m.spec.seed} if omitted."
        for m in MANUALS
        if m.spec.seed is not None
    ),
)
@click.option(
    "--out",
    type=Folder(),
    default=Path("outputs"),
    show_default=True,
    help="Folder that receives the session folder.",
)
@TRACKING
@DEVICE
@recipe_options
@manual_options
@click.option(
    "--system-metrics/--no-system-metrics",
    default=True,
    show_default=True,
    help="Log CPU, memory (and GPU) use of the pipeline to its MLflow run.",
)
@click.option(
    "--figures/--no-figures",
    default=True,
    show_default=True,
    help="Draw the figures (--no-figures: tables and reports only; `cctk report` draws them later).",
)
@click.option(
    "--resume",
    "resume_id",
    default=None,
    metavar="RUN_ID",
    help="Continue an interrupted pipeline run (its own settings are used).",
)
def run_command(
    protocol: str,
    model: str,
    profile: str,
    seed: str | None,
    out: Path,
    tracking: str | None,
    device: str | None,
    system_metrics: bool,
    figures: bool,
    resume_id: str | None,
    **values: OptionValue | None,
) -> None:
    """Run a manual's whole experiment for one model: manual 2.0.0 by default (Parts A-D and the synthesis), or
    another with --protocol (v1: the 1.0.0 pipeline, base model fine-tuned in place on fabricated answers)."""
    from ..core.config import parse_seeds
    from ..core.lm.device import resolve as resolve_device
    from ..manuals.configure import configure
    from ..pipeline import stages as pipeline

    manual = registry.get(protocol)  # the command line's edge: the name resolved once
    given = {name: value for name, value in values.items() if value is not None}
    _check_resume_id(resume_id, "RUN_ID")
    if resume_id:
        _check_resume_given(click.get_current_context())
    if seed is not None and not seed.strip():  # an unset variable in a script: fresh seeds were not asked for
        raise CctkError("--seed is empty: give seeds, or leave --seed out to draw fresh ones")
    _check_manual_options(manual, given, seed, resume_id)
    where = pipeline.Where(out, tracking, device)
    options = pipeline.Options(echo=click.echo, system_metrics=system_metrics, figures=figures)
    if resume_id:
        pipeline.resume(resume_id, where, options)
        return
    config = configure(manual, model, profile, parse_seeds(seed), device=str(resolve_device(device)), **given)
    pipeline.run(config, where, options)


def _check_resume_id(resume_id: str | None, metavar: str) -> None:
    """``--resume ''`` (an unset variable in a script) would start a new run where one was to go on: refused."""
    if resume_id is not None and not resume_id.strip():
        raise CctkError(f"--resume needs the {metavar} of the run to continue, got an empty one")


# What `cctk run --resume` takes besides the run: where it works (its folder, store, device) and how (system
# metrics, figures); --protocol, which a manual that does not resume refuses in its own words. The rest (the
# model, profile, seeds, recipe values, options) is the run's own.
RESUME_TAKES = ("resume_id", "out", "tracking", "device", "system_metrics", "figures", "protocol")


def _check_resume_given(ctx: click.Context) -> None:
    """A setting of the run given again with ``--resume`` (``--seed 5``, ``--model X``, ``--learning-rate``) would be
    ignored, the run going on with its own: refused in one line (as ``cctk sweep --resume`` refuses its settings)."""
    for param in ctx.command.params:
        name = param.name or ""
        if name in RESUME_TAKES or ctx.get_parameter_source(name) in (None, ParameterSource.DEFAULT):
            continue
        flag = max(param.opts, key=len)
        raise CctkError(
            f"--resume continues a run with the options it was started with (its model, profile, seeds, recipe "
            f"values and parts); leave out {flag}"
        )


# A sweep's own settings, which --resume keeps: given again, they are refused rather than ignored.
SWEEP_SETTINGS = ("models", "seeds", "sets", "profile", "executor", "out", "figures")


def _check_manual_options(
    manual: AnyManual, given: dict[str, OptionValue], seed: str | None, resume_id: str | None
) -> None:
    """An option the chosen manual does not take, a second seed where it takes one, or a resume of a manual that
    does not resume: one line rather than being ignored (a resume given its manual's options, or any other setting
    of the run, is refused before, by ``_check_resume_given``)."""
    spec = manual.spec
    own = {o.name for o in command_options(spec)}
    for name in given:
        others = [m.spec for m in MANUALS if name in {o.name for o in command_options(m.spec)}]
        if name not in own and others:
            owners = ", ".join(f"{o.label} (--protocol {o.name})" for o in others)
            raise CctkError(f"--{name.replace('_', '-')} has no meaning under --protocol {spec.name}: it is {owners}'s")
    if resume_id and not isinstance(manual, Resumable):
        raise CctkError(
            f"--resume continues the pipelines of a manual that resumes; a protocol {spec.name} run is "
            "short: start it again"
        )
    if spec.seed is not None and seed is not None and "," in str(seed):
        raise CctkError(f"--protocol {spec.name} takes one seed ({spec.seed} if omitted), got {seed!r}")


@cli.command("sweep", short_help="Run a grid of pipelines over models, seeds and recipe values.")
@click.option("--models", default=None, help="Models, comma-separated (roster keys, Hub ids, model directories).")
@click.option("--seeds", default=None, help="N (draw N fresh seeds) or S1,S2,... (these seeds).")
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="NAME=V1,V2",
    help="A recipe value and the values it takes (repeatable): the grid is their product.",
)
@click.option("--profile", default=AUTO, show_default=True, help="Profile of every cell.")
@click.option(
    "--protocol",
    type=PROTOCOL,
    default=registry.DEFAULT,
    show_default=True,
    help="The manual every cell runs: " + _protocol_help(),
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local: cells one after another in this process; ray: Ray tasks.",
)
@click.option(
    "--address",
    default=None,
    metavar="HOST:PORT",
    help="A Ray cluster's head (as `ray start --head` prints it; default: a local Ray instance). Needs a "
    "tracking server every machine reaches (--tracking); the cells keep their files in MLflow.",
)
@click.option("--cpus-per-cell", type=float, default=1.0, show_default=True, help="Ray CPUs each cell takes.")
@click.option(
    "--gpus-per-cell",
    type=float,
    default=None,
    help="Ray GPUs each cell takes, 0 to 1 (a fraction shares a GPU) [default: 1 where the cluster, or "
    "without --address this machine, has a GPU, else 0].",
)
@click.option(
    "--retries",
    type=int,
    default=None,
    help=f"Ray: times a cell is tried again where its worker or node is lost, the attempt resuming its run "
    f"[default: {RETRIES}, Ray's own].",
)
@click.option(
    "--out",
    type=Folder(),
    default=Path("outputs"),
    show_default=True,
    help="Folder that receives the cells' session folders (not with --address: there MLflow holds them).",
)
@TRACKING
@click.option(
    "--figures/--no-figures",
    default=True,
    show_default=True,
    help="Draw each cell's figures (--no-figures: `cctk report` or `cctk compare` draw later).",
)
@click.option(
    "--resume",
    "resume_id",
    default=None,
    metavar="SWEEP_ID",
    help="Continue an interrupted sweep: finished cells are kept, an interrupted one is resumed (on the "
    "cluster at --address, where given).",
)
@manual_options
@click.pass_context
def sweep_command(
    ctx: click.Context,
    /,  # pass_context hands ctx in first; **values could otherwise take a "ctx" too (mypy's reading of it)
    models: str | None,
    seeds: str | None,
    sets: tuple[str, ...],
    profile: str,
    protocol: str,
    executor: str,
    address: str | None,
    cpus_per_cell: float,
    gpus_per_cell: float | None,
    retries: int | None,
    out: Path,
    tracking: str | None,
    figures: bool,
    resume_id: str | None,
    **values: OptionValue | None,
) -> None:
    """Run a grid of pipelines over models, seeds and recipe values (an MLflow sweep run); every cell runs one
    manual (--protocol) with the same options."""
    from ..pipeline import sweep
    from ..pipeline.stages import sweep_cell
    from ..store import tracking as tracking_module

    _check_resume_id(resume_id, "SWEEP_ID")
    if resume_id:
        kept = [n for n in SWEEP_SETTINGS if ctx.get_parameter_source(n) is not click.core.ParameterSource.DEFAULT]
        if kept:
            option = {"sets": "set"}.get(kept[0], kept[0])
            raise CctkError(f"--resume continues a sweep with the settings it was started with; leave out --{option}")
    if not resume_id:
        sweep.check_executor(executor, address)
        if retries is not None and executor == "local":
            raise CctkError("--retries is for --executor ray (Ray tries a lost cell again)")
    if address:  # a cluster's workers reach a tracking server, never this machine's files
        sweep.check_cluster_store(tracking_module.resolve(tracking).tracking_uri)
        if ctx.get_parameter_source("out") is not click.core.ParameterSource.DEFAULT:
            raise CctkError(
                "--out names a folder here; with --address each cell keeps its files in MLflow: leave it out"
            )
        sweep.check_cluster(address)  # something answers there, before the store is touched
    per_cell = sweep.per_cell(cpus_per_cell, gpus_per_cell)
    given = {name: value for name, value in values.items() if value is not None}
    if resume_id:
        if ctx.get_parameter_source("protocol") is not click.core.ParameterSource.DEFAULT:
            given["protocol"] = protocol
        store, plan = _reopened_sweep(resume_id, given, address, retries, tracking)
    else:
        grid = _grid(models, seeds, sets, profile, protocol, given, here=executor == "local")
        store, plan = _new_sweep(grid, executor, address, retries, out, tracking, figures)
    if plan.address:
        sweep.check_artifacts(store)
    sweep.execute(store, plan, sweep_cell, echo=click.echo, per_cell=per_cell)


def _grid(
    models: str | None,
    seeds: str | None,
    sets: tuple[str, ...],
    profile: str,
    protocol: str,
    given: dict[str, Any],  # Any: unpacked into parse_grid, whose device: str mypy would hold every value to
    here: bool = False,
) -> Grid:
    """A new sweep's grid, every cell checked: its models, seeds and recipe values, its manual and options, and
    where its cells run ``here`` (a local sweep), each on this machine (``_check_cells_here``)."""
    from ..pipeline import sweep

    if not models or not seeds:
        raise CctkError("cctk sweep needs --models and --seeds (or --resume SWEEP_ID)")
    manual = registry.get(protocol)  # the command line's edge: the name resolved once
    _check_manual_options(manual, given, None, None)
    grid = sweep.parse_grid(models, seeds, sets, profile, protocol=protocol, **given)
    if here:
        _check_cells_here(grid, manual)
    return grid


def _check_cells_here(grid: Grid, manual: AnyManual) -> None:
    """A local sweep's cells run on this machine: each one's recipe and memory checked on its device as
    ``cctk run`` checks a run's (an 8-bit optimizer not installed, fp16 on a CPU, a batch that does not fit),
    before the sweep's run exists, rather than as a cell FAILED."""
    from ..core.lm.device import resolve as resolve_device
    from ..manuals.configure import configure
    from ..pipeline.stages import check_device

    device = str(resolve_device(None))
    for cell in grid.cells():
        config = configure(manual, cell.model, grid.profile, (cell.seed,), device=device, **dict(cell.overrides))
        check_device(config, manual, None)


def _new_sweep(
    grid: Grid,
    executor: str,
    address: str | None,
    retries: int | None,
    out: Path,
    tracking: str | None,
    figures: bool,
) -> tuple[Store, Sweep]:
    """A new sweep of ``grid``, every check before the store is touched."""
    from ..pipeline import sweep
    from ..store import tracking as tracking_module
    from ..store.session import check_out

    if not address:
        check_out(out)
    store = tracking_module.connect(tracking)
    retries = sweep.RETRIES if retries is None else retries
    return store, sweep.open_sweep(store, grid, out, executor, address, figures, retries)


def _reopened_sweep(
    resume_id: str, given: dict[str, OptionValue], address: str | None, retries: int | None, tracking: str | None
) -> tuple[Store, Sweep]:
    """An interrupted sweep, read back; ``address``: the cluster it goes on with (default: its own). ``given``:
    the manual and its options given on the command line, refused (the sweep's cells keep their own)."""
    from ..pipeline import sweep
    from ..store import tracking as tracking_module

    if given:
        first = next(iter(given)).replace("_", "-")
        raise CctkError(
            f"--resume continues a sweep with the manual and options it was started with; leave out --{first}"
        )
    store = tracking_module.connect(tracking, create=False, writes=True)  # the sweep's store exists: none made
    plan = sweep.reopen_sweep(store, resume_id, address, retries)
    sweep.check_executor(plan.executor, plan.address)
    if plan.address:
        sweep.check_cluster_store(plan.tracking_uri)
    return store, plan


@cli.command("compare", short_help="Finished runs side by side: across seeds and models, pooled tests.")
@click.option("--sweep", "sweep_id", default=None, metavar="SWEEP_ID", help="Compare the finished cells of a sweep.")
@click.option(
    "--runs",
    type=RunIds(),
    default=None,
    metavar="ID1,ID2,...",
    help="Compare these pipeline runs, or these KR-Test runs (evals, trains, studies, seed sweeps).",
)
@out_option("Folder for the tables, figures and compare.html.")
@TRACKING
@click.option("--no-log", is_flag=True, help="Log no MLflow run of the comparison (a reader who may not write).")
def compare_command(
    sweep_id: str | None, runs: list[str] | None, out: Path, tracking: str | None, no_log: bool
) -> None:
    """Finished pipelines side by side: across seeds, across models, pooled tests, implausibility."""
    from ..compare import job
    from ..krtest.commands import compare as kr
    from ..store import tracking as tracking_module

    if bool(sweep_id) == bool(runs):  # before the store is looked for
        raise CctkError("cctk compare needs --sweep ID or --runs ID1,ID2,... (one of them)")
    store = tracking_module.connect(tracking, create=False, writes=not no_log)  # never a new, empty store
    if runs and not sweep_id and kr.is_kr(store, runs):  # KR-Test runs: their own tables (cctk.krtest.commands.compare)
        kr.compare(store, runs, out, echo=click.echo, log=not no_log)
        return
    compared, run_id = job.run(store, sweep_id, runs, out, tracking, echo=click.echo, log=not no_log)
    click.echo(
        f"{counted(len(compared.tables), 'table')} and {counted(len(compared.figures), 'figure')} in "
        f"{compared.folder}; " + (f"MLflow run {run_id}" if run_id else "no MLflow run (--no-log)")
    )
    if run_id:
        click.echo(store.link(run_id))


@cli.command(short_help="Draw a run's figures, tables and reports again, without a model.")
@click.argument("source")
@RUN_TRACKING
@out_option(
    "Render into OUT/<session> (a copy) instead of the session folder itself; with --style paper, "
    "the folder that receives the figures and captions (required).",
    default=None,
)
@click.option(
    "--style",
    type=click.Choice(["report", "paper"]),
    default="report",
    show_default=True,
    help="report: every figure, table and report as a run writes them; paper: the figures alone at a "
    "journal's width, titles and notes in captions.tex / captions.md (docs/paper.md).",
)
@click.option(
    "--width",
    type=click.Choice(["column", "page"]),
    default=None,
    help="With --style paper: column (3.3 in, the default) or page (6.9 in).",
)
@click.option(
    "--only",
    default=None,
    metavar="NAMES",
    help="With --style paper: these figures alone, comma-separated file names (synthesis, 24_synthesis), "
    "their captions replaced in OUT's caption files: a re-render of one figure in seconds.",
)
def report(
    source: str, tracking: str | None, out: Path | None, style: str, width: str | None, only: str | None
) -> None:
    """Re-render every figure, table and report of a run from its saved measurements (no model).

    SOURCE is a session folder or the MLflow run id of a pipeline (its artifacts are downloaded).
    """
    from .. import results
    from ..outputs import rerender

    if style == "report" and width is not None:
        raise CctkError("--width sets the width of paper figures: use it with --style paper")
    if style == "report" and only is not None:
        raise CctkError("--only re-renders figures in paper style: use it with --style paper (or cctk export --only)")
    if style == "paper" and out is None:
        raise CctkError("cctk report --style paper needs --out DIR, the folder for the figures and captions")
    start = time.perf_counter()
    folder = results.session_folder(source, tracking)
    if style == "paper":
        from ..outputs import paper

        assert out is not None  # --style paper without --out was refused above
        drawn = paper.figures(folder, out, width or "column", _names(only))
        click.echo(
            f"{len(drawn.figures)} figures in paper style ({width or 'column'} width) and their captions "
            f"in {time.perf_counter() - start:.1f} s: {drawn.folder}"
        )
        return
    done = rerender(folder, out)
    cached = out is None and Path(folder) != Path(source)  # a run id's artifacts, re-rendered where they were cached
    click.echo(
        f"re-rendered {counted(done.figures, 'figure')}, {counted(done.tables, 'table')} and the reports of "
        f"{done.session} in {time.perf_counter() - start:.0f} s: {done.layout.folder}"
        + (f" (the cache's copy of run {source}; --out DIR writes them there)" if cached else "")
    )


@cli.command("export", short_help="A run as a paper's parts: LaTeX tables, figures, paper.tex.")
@click.argument("source")
@click.option(
    "--latex",
    "latex_dir",
    type=Folder(),
    required=True,
    help="Folder for the LaTeX tables, the paper-style figures, captions.tex and paper.tex.",
)
@click.option(
    "--width",
    type=click.Choice(["column", "page"]),
    default="column",
    show_default=True,
    help="Width of the figures: column (3.3 in, a two-column paper.tex) or page (6.9 in).",
)
@RUN_TRACKING
@click.option(
    "--only",
    default=None,
    metavar="NAMES",
    help="These figures and tables alone, comma-separated (synthesis, 24_synthesis, table09, 'synthesis shares'), "
    "their captions replaced in the folder's caption files and paper.tex: a re-render of one in seconds.",
)
def export_command(source: str, latex_dir: Path, width: str, tracking: str | None, only: str | None) -> None:
    """A run as a paper's parts: every table as booktabs LaTeX, every figure in paper style, their captions
    and a paper.tex that compiles (pdflatex paper.tex in the folder). SOURCE as for cctk report."""
    from .. import results
    from ..outputs import paper

    start = time.perf_counter()
    done = paper.export(results.session_folder(source, tracking), latex_dir, width, _names(only))
    seconds = time.perf_counter() - start
    if only is None:
        click.echo(
            f"{counted(len(done.tables), 'table')}, {counted(len(done.figures), 'figure')} and paper.tex in "
            f"{done.folder} in {seconds:.1f} s (compile there: pdflatex paper.tex)"
        )
        return
    names = [f.stem for f in done.figures] + [t.name for t in done.tables]
    updated = " (captions replaced in captions.tex, captions.md and paper.tex)" if done.figures else ""
    click.echo(
        f"re-rendered {', '.join(names)} in {done.folder} in {seconds:.1f} s"
        + (f"; {done.note}" if done.note else updated)
    )


def _names(only: str | None) -> tuple[str, ...]:
    """``--only a,b`` -> ``("a", "b")``; nothing given: every figure and table."""
    if only is None:
        return ()
    names = tuple(word.strip() for word in only.split(",") if word.strip())
    if not names:
        raise CctkError("--only needs the names of figures or tables, comma-separated (e.g. --only synthesis,table09)")
    return names


@cli.command(short_help="BibTeX for cctk and for a run.")
@click.argument("run", required=False)
@RUN_TRACKING
def cite(run: str | None, tracking: str | None) -> None:
    """BibTeX for cctk (version, year) and, given RUN (a session folder or a pipeline's run id), for that
    run (run id, date, model and its hash, seed, commit)."""
    from .. import results
    from ..store import citation, session

    info = session.read_run_info(results.session_folder(run, tracking)) if run else None  # errors before output
    click.echo(citation.tool_bibtex())
    if info is not None:
        click.echo(citation.run_bibtex(info))


cli.add_command(krtest)
cli.add_command(server)
cli.add_command(ui)


def main(args: list[str] | None = None) -> None:
    """``cctk`` (``args``: the command line after it, else ``sys.argv``'s)."""
    from ..core.errors import stop_on_sigterm

    stop_on_sigterm()  # SIGTERM ends runs KILLED and lets every `finally` run, as Ctrl-C does
    try:
        cli(args=args, prog_name="cctk")
    finally:
        # The command is done (its runs ended, its files closed; atexit's handlers still run after this). What
        # is left is the interpreter's last garbage collection over every object torch, Transformers and MLflow
        # made, which frees nothing a user sees and cost 1.1-2.2 s of CPU at every exit here: those objects are
        # frozen out of it (docs/speed.md, "The exit").
        gc.freeze()
