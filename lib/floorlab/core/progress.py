"""Core wing: progress bars for long measurements: shown while they run, gone when they finish."""
from __future__ import annotations

import time


def progress_bar(items, *, label: str, total: int | None = None):
    """Iterate over items behind a progress bar labelled `label`; the bar disappears when done."""
    from tqdm.auto import tqdm  # a widget in JupyterLab, text in a terminal

    return tqdm(items, desc=str(label), total=total, leave=False)


class Stages:
    """A progress bar over a run's stages; seconds holds each finished stage's wall-clock s."""

    def __init__(self, total: int, enabled: bool, *, label: str = "bench"):
        self.bar = progress_bar(None, label=label, total=total) if enabled else None
        self.seconds: dict[str, float] = {}
        self._label, self._start = None, time.perf_counter()

    def __call__(self, label: str) -> None:
        self._lap()
        self._label = label
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)

    def _lap(self) -> None:
        now = time.perf_counter()
        if self._label is not None:
            self.seconds[self._label] = now - self._start
        self._label, self._start = None, now

    def close(self) -> None:
        """Time the last stage and close the bar (filling the stages a run leaves out)."""
        self._lap()
        if self.bar is not None:
            self.bar.update(self.bar.total - self.bar.n)
            self.bar.close()
