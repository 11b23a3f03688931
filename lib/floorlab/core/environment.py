"""Core wing: the book's environment variables (FLOORLAB_*), each read in one place."""
from __future__ import annotations

import os
import sys
from pathlib import Path

YES, NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


class EnvironmentValueError(ValueError):
    """A FLOORLAB_* variable whose value means nothing; the message names it and says what to set."""


def flag(name: str, environ=None) -> bool:
    """The yes/no variable name: True for 1/true/yes/on, False for 0/false/no/off or unset."""
    raw = (os.environ if environ is None else environ).get(name)
    value = (raw or "").strip().lower()
    if value in YES:
        return True
    if value in NO:
        return False
    raise EnvironmentValueError(f"{name}={raw!r} is not a yes or a no; set it to 1 or 0 (true/false, "
                                f"yes/no and on/off work too), or unset it")


def expand_folder(text: str, name: str) -> Path:
    """The path a variable's text names, ~ expanded; EnvironmentValueError when it names none."""
    if "\x00" in text:
        raise EnvironmentValueError(f"{name} holds a NUL character; set it to a folder path, or unset it")
    try:
        return Path(text.strip()).expanduser()
    except RuntimeError as err:  # ~nosuchuser, or no home folder at all
        raise EnvironmentValueError(f"{name}={text!r}: {str(err).rstrip('.')}; write the folder out in full "
                                    f"(e.g. {name}=/tmp/floorlab), or unset it") from None


def _writable(folder: Path) -> bool:
    """Whether files can be made in folder, or in the nearest folder above it where it is missing."""
    for place in (folder, *folder.parents):
        if place.exists():
            return place.is_dir() and os.access(place, os.W_OK | os.X_OK)
    return False


def writable_folder(name: str, default: Path, fallback: Path, *, what: str = "files", environ=None,
                    say=None) -> Path:
    """The folder the variable name gives (default when unset), or fallback where that cannot be used."""
    say = say or (lambda line: print(line, file=sys.stderr))
    raw = (os.environ if environ is None else environ).get(name, "")
    try:
        folder = expand_folder(raw, name) if raw.strip() else Path(default)
    except EnvironmentValueError as err:
        say(f"{err}. Until then {what} go to {fallback}.")
        return Path(fallback)
    if _writable(folder):
        return folder
    why = "is not a folder" if folder.exists() and not folder.is_dir() else "cannot be written"
    say(f"{folder} {why}, so {what} go to {fallback} instead (set {name} to a folder you can write "
        "to, to choose another).")
    return Path(fallback)
