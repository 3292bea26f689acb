"""The ``cctk`` command line. Every command checks its input before any work and fails in one line."""
from __future__ import annotations

from pathlib import Path

import click

from .errors import CctkError


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CctkError as error:
            raise click.ClickException(str(error)) from None


@click.group(cls=_Group)
@click.version_option(package_name="cctk")
def cli():
    """Fine-tune small causal LMs on arithmetic corpora and measure what they take from them."""


@cli.command()
def models():
    """List the model roster and what each model needs."""
    from .models import ROSTER

    width = max(len(k) for k in ROSTER)
    click.echo(f"{'key':<{width}}  {'needs':<10}  source")
    for spec in ROSTER.values():
        click.echo(f"{spec.key:<{width}}  {spec.needs:<10}  {spec.source}")
    click.echo("Any Hub id (owner/name) or local model directory works too.")


@cli.command()
@click.option("--model", "model", default="smollm2-135m-bundled", show_default=True,
              help="Roster key, Hub id or local directory.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for measurement.csv and the heatmap.")
@click.option("--tracking", default=None, help="Tracking configuration name or URI (default: embedded).")
def measure(model, out, tracking):
    """Measure one model on every candidate of every addition."""
    from . import measure_job

    measure_job.run(model, out, tracking, echo=click.echo)


@cli.command("run")
@click.option("--model", default="smollm2-135m-bundled", show_default=True, help="Roster key, Hub id or local directory.")
@click.option("--profile", default="quick", show_default=True, help="paper, quick or smoke.")
@click.option("--seed", "seed", default=None, help="seeds[0] (or all seeds, comma-separated); fresh ones if omitted.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("outputs"), show_default=True,
              help="Folder that receives the session folder.")
@click.option("--tracking", default=None, help="Tracking configuration name or URI (default: embedded).")
@click.option("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available).")
@click.option("--repeats", type=int, default=None, help="Override: repeats of each example in a corpus.")
@click.option("--epochs", type=int, default=None, help="Override: epochs of every fine-tuning run.")
@click.option("--learning-rate", type=float, default=None, help="Override: AdamW learning rate.")
@click.option("--batch-size", type=int, default=None, help="Override: examples per optimizer step.")
@click.option("--grad-clip", type=float, default=None, help="Override: gradient-norm clipping.")
@click.option("--weight-decay", type=float, default=None, help="Override: AdamW weight decay.")
@click.option("--schedule", type=click.Choice(["constant", "linear"]), default=None,
              help="Override: learning rate constant, or decaying linearly to 0.")
@click.option("--warmup", type=float, default=None, help="Override: share of steps of linear warm-up (0 = none).")
@click.option("--holdout", type=float, default=0.3, show_default=True, help="Share of additions held out.")
@click.option("--resume", "resume_id", default=None, metavar="RUN_ID",
              help="Continue an interrupted pipeline run (its own settings are used).")
def run_command(model, profile, seed, out, tracking, device, holdout, resume_id, **recipe):
    """Run the whole 2.0.0 experiment for one model (Parts A-D and the synthesis)."""
    from . import pipeline
    from .config import make_config, parse_seeds

    if resume_id:
        pipeline.resume(resume_id, out, tracking, device, echo=click.echo)
        return
    config = make_config(model, profile, parse_seeds(seed), holdout, **recipe)
    pipeline.run(config, out, tracking, device, echo=click.echo)


@cli.command()
@click.argument("source")
@click.option("--tracking", default=None, help="Tracking configuration name or URI, for a run id (default: embedded).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Render into OUT/<session> (a copy) instead of the session folder itself.")
def report(source, tracking, out):
    """Re-render every figure, table and report of a run from its saved measurements (no model).

    SOURCE is a session folder or the MLflow run id of a pipeline (its artifacts are downloaded).
    """
    import shutil
    import time

    from . import results
    from .outputs import rebuild, write_all
    from .outputs.session import load_info

    folder = results.session_folder(source, tracking)
    if out is not None:
        target = Path(out) / load_info(folder)["session"]
        (target / "measurements").mkdir(parents=True, exist_ok=True)
        shutil.copy2(folder / results.RUN_INFO, target / results.RUN_INFO)
        for csv in (folder / "measurements").glob("*.csv"):
            shutil.copy2(csv, target / "measurements" / csv.name)
        folder = target
    start = time.perf_counter()
    outcome, tables, config, run = rebuild(folder)
    write_all(outcome, tables, config, run, folder)
    click.echo(f"re-rendered 25 figures, 11 tables and the reports of {run['session']} in "
               f"{time.perf_counter() - start:.0f} s: {folder}")


@cli.command()
@click.option("--config", "config_name", default="server", show_default=True,
              help="A configuration of mlruns_config/ with a [server] table (server, postgres).")
@click.option("--host", default=None, help="Address to bind (default: the configuration's, 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default: the configuration's).")
def server(config_name, host, port):
    """Start an MLflow tracking server (loopback unless told otherwise) on a configured backend."""
    from .server import launch, server_command

    raise SystemExit(launch(server_command(config_name, host, port), echo=click.echo))


@cli.command()
@click.option("--config", "config_name", default="embedded", show_default=True, help="Tracking configuration.")
@click.option("--port", type=int, default=5000, show_default=True)
def ui(config_name, port):
    """Open the MLflow UI on the configured store (the embedded SQLite store by default)."""
    from .server import launch, ui_command

    click.echo(f"MLflow UI at http://127.0.0.1:{port} (Ctrl-C to stop)")
    raise SystemExit(launch(ui_command(config_name, port=port), echo=click.echo))


from .krtest.cli import krtest  # noqa: E402  (KR-Test, seed 003)
cli.add_command(krtest)


def main():
    cli(prog_name="cctk")
