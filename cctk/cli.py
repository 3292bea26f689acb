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


def main():
    cli(prog_name="cctk")
