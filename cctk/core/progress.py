"""Progress display of a pipeline: one bar per fine-tuning arm (arm i of 13, epoch, the step's loss), then its line."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence, Sized
from typing import TYPE_CHECKING, NoReturn

from tqdm.auto import tqdm

if TYPE_CHECKING:
    import torch

    from .config import Recipe
    from .lm.finetune import OnStep


class Progress:
    def __init__(self, n_arms: int, echo: Callable[[str], None] = print) -> None:
        self.n_arms, self.echo = n_arms, echo
        self.bar: tqdm[NoReturn] | None = None  # the open arm's: a bar over no iterable, updated by hand
        self.label = ""
        self.started = 0.0
        self.steps = 0

    def arm(self, i: int, name: str, rows: Sized, recipe: Recipe) -> OnStep:
        """Open the bar of arm ``i``; returns the ``on_step(epoch, step, loss)`` callback."""
        self.label, self.started = f"arm {i}/{self.n_arms} {name}", time.perf_counter()
        self.steps = 0
        # A live bar on a terminal only (disable=None); a log gets one line per arm from close().
        bar = self.bar = tqdm(
            total=recipe.steps(len(rows)),
            desc=self.label,
            unit="step",
            file=sys.stderr,
            dynamic_ncols=True,
            leave=False,
            disable=None,
        )

        def on_step(epoch: int, step: int, loss: float | torch.Tensor) -> None:
            self.steps += 1  # the device step's loss is a tensor on the device: never read here, every step
            shown = f" loss {loss:.4f}" if isinstance(loss, float) else ""  # the step's
            bar.set_postfix_str(f"epoch {epoch + 1}/{recipe.epochs}{shown}", refresh=False)
            bar.update(1)

        return on_step

    def close(self, finished: bool = True, losses: Sequence[float] = ()) -> None:
        """End the arm's bar with its one line: its steps, the mean loss of its first and last epoch
        (``losses``, one an epoch: what the run records and table 11 shows) and its seconds; ``finished`` False
        (an error or a stop in the arm): the line says the arm was interrupted and after how many of its
        steps, never reads as done."""
        if self.bar is None:
            return
        seconds = time.perf_counter() - self.started  # the bar's own clock stops when it is disabled
        total = self.bar.total
        self.bar.close()
        self.bar = None
        if not finished:
            self.echo(f"{self.label}: interrupted after {self.steps} of {total} steps, {seconds:.1f} s")
        elif losses:
            last = f" -> {losses[-1]:.4f} (epoch {len(losses)})" if len(losses) > 1 else ""
            self.echo(f"{self.label}: {self.steps} steps, loss {losses[0]:.4f} (epoch 1){last}, {seconds:.1f} s")
        elif self.steps:
            self.echo(f"{self.label}: {self.steps} steps, {seconds:.1f} s")
