"""Training progress on stderr: a tqdm bar per epoch on a terminal (tqdm is the optional `progress`
extra; without it, a plain `\\r` bar), and clean lines (no carriage returns) when stderr is a file or
a pipe. Each epoch's bar ends with its own newline, so the epoch summary printed after it is on a line
of its own."""
from __future__ import annotations

import sys
import time


class Progress:
    """update() once per step; end_epoch() before anything else is printed at an epoch's end."""

    LINE_EVERY_S = 10.0  # line mode: at most one line per this many seconds (plus each epoch's last step)

    def __init__(self, epochs: int, steps_per_epoch: int, time_limit: float | None = None, stream=None,
                 unit: str = "tok"):
        self.unit = unit  # what the rate counts: tok (targets), img, row
        self.stream = stream if stream is not None else sys.stderr
        self.epochs, self.n, self.time_limit = epochs, steps_per_epoch, time_limit
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self._tqdm = None
        if self.tty:
            try:
                from tqdm import tqdm
                self._tqdm = tqdm
            except ImportError:  # the optional `progress` extra is absent: a plain \r bar
                pass
        self._bar = None
        self._last_line = -float("inf")
        self._open = False

    def update(self, epoch: int, i: int, loss: float, tokens: int, elapsed: float, lr: float | None = None) -> None:
        """After step i (1-based) of epoch (0-based); lr: the step's effective learning rate, shown when given."""
        lr_s = f"lr {lr:.2e} " if lr is not None else ""
        rate = tokens / max(elapsed, 1e-9)
        done = (epoch + i / self.n) / self.epochs
        eta = elapsed / done - elapsed if done > 0 else 0.0
        if self.time_limit is not None:
            eta = max(0.0, min(eta, self.time_limit - elapsed))
        if self._tqdm is not None:
            if self._bar is None:
                self._bar = self._tqdm(total=self.n, desc=f"epoch {epoch + 1}/{self.epochs}", unit="step",
                                       file=self.stream, dynamic_ncols=True, leave=True)
            self._bar.set_postfix_str(f"loss {loss:.3f}, {lr_s}{rate:,.0f} {self.unit}/s", refresh=False)
            self._bar.update(1)
        elif self.tty:
            bar = "#" * int(20 * i / self.n) + "." * (20 - int(20 * i / self.n))
            self.stream.write(f"\repoch {epoch + 1}/{self.epochs} [{bar}] {i}/{self.n} loss {loss:.3f} "
                              f"{lr_s}{rate:,.0f} {self.unit}/s ETA {eta:4.0f}s ")
            self.stream.flush()
            self._open = True
        else:
            now = time.monotonic()
            if now - self._last_line >= self.LINE_EVERY_S or i == self.n or i == 1:
                self._last_line = now
                self.stream.write(f"epoch {epoch + 1}/{self.epochs} step {i}/{self.n} loss {loss:.3f} "
                                  f"{lr_s}{rate:,.0f} {self.unit}/s elapsed {elapsed:.0f}s ETA {eta:.0f}s\n")
                self.stream.flush()

    def end_epoch(self) -> None:
        """Finish the epoch's bar (its newline), so what is printed next starts a line of its own."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
