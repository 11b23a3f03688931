"""Core wing: where stored runs and figures are found: FLOORLAB_REFERENCE_DIR's folder when set, named
as in the package's reference/, whose copies fill in what that folder lacks; this module alone decides it."""
from __future__ import annotations

import os
from pathlib import Path

from floorlab.core import paths
from floorlab.core.environment import expand_folder
from floorlab.core.files import load_json
from floorlab.core.numbers import text
from floorlab.core.runs import Run

DEFAULT_REFERENCE = "h200-below-the-floor"
MAX_NAME_CHARS = 200  # a stored run's or figure's name; longer is no file name the system takes


REFERENCE_ENV = "FLOORLAB_REFERENCE_DIR"  # a folder of stored runs that take the place of the package's


def chosen_reference_dir() -> Path | None:
    """The folder FLOORLAB_REFERENCE_DIR names, or None when it is unset; a value that is not a
    readable folder raises NotADirectoryError or PermissionError in one line saying how to fix it."""
    named = os.environ.get(REFERENCE_ENV, "").strip()
    if not named:
        return None
    folder = expand_folder(named, REFERENCE_ENV)
    if not folder.is_dir():
        what = "a file" if folder.exists() else "nothing"
        raise NotADirectoryError(f"{REFERENCE_ENV}={named!r} names {what}, not a folder: point it at a "
                                 "folder of stored runs (h200-below-the-floor.json, ...) or unset it")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise PermissionError(f"{REFERENCE_ENV}={named!r} is a folder this user cannot read: "
                              f"allow reading it (chmod u+rx {str(folder)!r}) or unset the variable")
    return folder


def reference_dirs() -> list[Path]:
    """The folders stored runs are read from, first match first: FLOORLAB_REFERENCE_DIR's folder
    when set, then the package's reference/, which fills in what that folder lacks."""
    chosen = chosen_reference_dir()
    return ([chosen] if chosen is not None else []) + [Path(paths.REFERENCE_DIR)]


def _stored_name(name: str, suffix: str) -> str | None:
    """name without suffix, or None when it can name no stored file (too long, or a path)."""
    name = text(name, "name", hint=f"pass a stored run's or figure's name, e.g. {DEFAULT_REFERENCE!r}")
    name = name[: -len(suffix)] if name.endswith(suffix) else name
    return None if len(name) > MAX_NAME_CHARS or "/" in name or "\\" in name else name


def reference_path(name: str, suffix: str = ".json") -> Path | None:
    """The stored file <name><suffix> from the first folder of reference_dirs() that holds it, or None."""
    name = name[: -len(suffix)] if suffix and name.endswith(suffix) else name
    return next((p for folder in reference_dirs() if (p := folder / f"{name}{suffix}").is_file()), None)


def reference_names(prefix: str = "", suffix: str = ".json") -> list[str]:
    """Names (without suffix) of the stored files starting with prefix, in any folder, sorted."""
    return sorted({p.name[: -len(suffix)] for folder in reference_dirs() if folder.is_dir()
                   for p in folder.glob(f"{prefix}*{suffix}")})


def other_host_dirs() -> list[Path]:
    """The package's folders of runs measured on other hosts (reference/<host>/, named as above)."""
    home = Path(paths.REFERENCE_DIR)
    return sorted(p for p in home.iterdir() if p.is_dir() and p.name != "figures") if home.is_dir() else []


def every_stored_run(prefix: str = "", *, other_hosts: bool = False) -> dict[Path, Run]:
    """Every stored run whose name starts with prefix, by path, from every folder of reference_dirs()
    (and with other_hosts, of other_host_dirs()): a name in two folders is two runs here. Files not in
    the book's layout are left out."""
    found = {}
    for folder in reference_dirs() + (other_host_dirs() if other_hosts else []):
        for path in sorted(folder.glob(f"{prefix}*.json")) if folder.is_dir() else []:
            try:
                found[path] = Run.load(path)
            except (ValueError, KeyError, TypeError):  # a raw table (the kernel sweep), not a Run
                continue
    return found


def reference_json(name: str):
    """The object stored as reference <name>.json (a raw table, such as the kernel sweep), read from
    the first folder of reference_dirs() that holds it."""
    path = reference_path(name)
    if path is None:
        raise _missing("stored file", name, reference_dirs(), reference_names())
    return load_json(path)


def _missing(what: str, name: str, folders: list[Path], names: list[str], fix: str = "") -> FileNotFoundError:
    listed = ", ".join(names) if names else "none yet"
    where = " or ".join(str(f) for f in folders)
    return FileNotFoundError(f"No {what} named {name!r} in {where}. Available: {listed}. "
                             + (fix or "Pass one of those names, or record one and save it there."))


def reference_run(name: str = DEFAULT_REFERENCE, *, missing_ok: bool = False):
    """The stored reference run <name>.json, as a floorlab.core.runs.Run: from FLOORLAB_REFERENCE_DIR when that folder
    holds it, else from the package (lib/floorlab/reference/); None with missing_ok when none is stored."""
    plain = _stored_name(name, ".json")
    path = reference_path(plain) if plain else None
    if path is None:
        if missing_ok:
            return None
        raise _missing("reference run", plain or name, reference_dirs(), reference_names())
    try:
        return Run.load(path)
    except ValueError as err:  # a file stored before the Run layout, or in another one
        raise ValueError(f"reference run {path} cannot be read as a Run ({err}); until it is "
                         f"remade on that card, read its raw JSON with "
                         f"floorlab.core.files.load_json({str(path)!r})") from None


def figure_dirs() -> list[Path]:
    """The folders stored figures are read from: figures/ beside each folder of reference_dirs()."""
    chosen = chosen_reference_dir()
    return ([chosen / "figures"] if chosen is not None else []) + [Path(paths.REFERENCE_FIGURES_DIR)]


def reference_figure(name: str, *, missing_ok: bool = False) -> Path | None:
    """Path of the stored reference figure <name>.png, from the folder that holds the run it was drawn from (the longest
    stored run name that starts it), so a figure never shows another run's numbers."""
    plain = _stored_name(name, ".png")
    if plain is None:
        if missing_ok:
            return None
        raise _missing("reference figure", name, figure_dirs(), [])
    name = plain
    pairs = list(zip(reference_dirs(), figure_dirs()))
    run = max((n for n in reference_names() if name.startswith(f"{n}-")), key=len, default=None)
    home = next((pair for pair in pairs if run and (pair[0] / f"{run}.json").is_file()), None)
    for _, folder in [home] if home else pairs:
        if (folder / f"{name}.png").is_file():
            return folder / f"{name}.png"
    if missing_ok:
        return None
    fix = ""
    if home and home[0] != Path(paths.REFERENCE_DIR):
        fix = (f"Its run {run}.json comes from {REFERENCE_ENV}; draw its figures beside it with "
               f"{REFERENCE_ENV}={str(home[0])!r} python -m floorlab redraw")
    names = sorted({p.stem for folder in ([home[1]] if home else figure_dirs()) if folder.is_dir()
                    for p in folder.glob("*.png")})
    raise _missing("reference figure", name, [home[1]] if home else figure_dirs(), names, fix)


def stored_run(name: str):
    """The stored reference run of that name as a Run, or None while none is stored yet."""
    return reference_run(name, missing_ok=True)


def stored_figure(name: str) -> Path | None:
    """The stored reference figure of that name, or None while none is stored yet."""
    return reference_figure(name, missing_ok=True)
