"""Results as JSON: saving measurements, loading them, and the stored reference runs.

A reference run is a measurement made once on a named card and committed to
the package (floorlab/reference/<name>.json, floorlab/reference/figures/<name>.png), so a
reader without that card can see what it showed, labelled as such.
"""
from __future__ import annotations

import dataclasses
import json
import platform
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from floorlab import paths

DEFAULT_REFERENCE = "h200-below-the-floor"


def _jsonable(obj):
    """JSON stand-in for obj: dataclasses as dicts, paths and dtypes as strings, arrays as lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    kind = type(obj)
    if kind.__module__.startswith("torch") and kind.__name__ in ("dtype", "device", "Size"):
        return str(obj) if kind.__name__ != "Size" else list(obj)
    if hasattr(obj, "to_dict") and callable(obj.to_dict):
        return obj.to_dict()
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays and scalars, tensors
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    raise TypeError(
        f"save_json cannot store a {kind.__name__}; convert it to a dict, list, number or "
        "string first (dataclasses, paths, torch dtypes and numpy arrays are converted for you)"
    )


def save_json(obj, path) -> Path:
    """Write obj as pretty JSON with sorted keys to path (parent folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=_jsonable)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def load_json(path):
    """The object stored as JSON at path."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No JSON file at {path}; write one first with save_json(obj, path)")
    return json.loads(path.read_text(encoding="utf-8"))


def _available(folder: Path, suffix: str) -> list[str]:
    """Names (without suffix) of the files in folder ending in suffix, sorted."""
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(suffix)] for p in folder.iterdir() if p.name.endswith(suffix))


def _missing(what: str, name: str, folder: Path, names: list[str]) -> FileNotFoundError:
    listed = ", ".join(names) if names else "none yet"
    return FileNotFoundError(
        f"No {what} named {name!r} in {folder}. Available: {listed}. "
        f"Pass one of those names, or record one and save it there."
    )


def reference_run(name: str = DEFAULT_REFERENCE, *, missing_ok: bool = False):
    """The stored reference run lib/floorlab/reference/<name>.json, as a floorlab.runs.Run.

    missing_ok=True returns None when no run of that name is stored yet.
    """
    from floorlab.runs import Run

    folder = Path(paths.REFERENCE_DIR)
    name = name[: -len(".json")] if name.endswith(".json") else name
    path = folder / f"{name}.json"
    if not path.is_file():
        if missing_ok:
            return None
        raise _missing("reference run", name, folder, _available(folder, ".json"))
    try:
        return Run.load(path)
    except ValueError as err:  # a file stored before the Run layout, or in another one
        raise ValueError(f"reference run {path} cannot be read as a Run ({err}); until it is "
                         f"remade on that card, read its raw JSON with "
                         f"floorlab.results.load_json({str(path)!r})") from None


def reference_figure(name: str, *, missing_ok: bool = False) -> Path | None:
    """Path of the stored reference figure floorlab/reference/figures/<name>.png.

    missing_ok=True returns None when no figure of that name is stored yet.
    """
    folder = Path(paths.REFERENCE_FIGURES_DIR)
    name = name[: -len(".png")] if name.endswith(".png") else name
    path = folder / f"{name}.png"
    if not path.is_file():
        if missing_ok:
            return None
        raise _missing("reference figure", name, folder, _available(folder, ".png"))
    return path


def stored_run(name: str):
    """The stored reference run of that name as a Run, or None while none is stored yet."""
    try:
        return reference_run(name)
    except FileNotFoundError:
        return None


def stored_figure(name: str) -> Path | None:
    """The stored reference figure of that name, or None while none is stored yet."""
    try:
        return reference_figure(name)
    except FileNotFoundError:
        return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def run_stamp() -> dict:
    """When and with what software a run was made: UTC ISO date and versions, no machine names."""
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "floorlab": _version("floorlab"),
    }
