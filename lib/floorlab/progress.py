"""Progress bars for long measurements: shown while they run, gone when they finish."""
from __future__ import annotations


def progress_bar(items, *, label: str, total: int | None = None):
    """Iterate over items behind a progress bar labelled `label`; the bar disappears when done."""
    from tqdm.auto import tqdm  # a widget in JupyterLab, text in a terminal

    return tqdm(items, desc=str(label), total=total, leave=False)
