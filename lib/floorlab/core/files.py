"""Core wing: how the book writes a file: whole or not at all (write_whole: a synced temporary file, then
os.replace), and never at the cost of a measurement."""
from __future__ import annotations

import dataclasses
import json
import os
import stat
import tempfile
import uuid
from pathlib import Path

from floorlab.core.numbers import a_path

KEPT_PREFIX = "floorlab-kept-"  # the temporary folders that hold what could not be written where asked


def _why(err: OSError) -> str:
    return f"{type(err).__name__}: {err.strerror or err}"


def write_whole(path, write) -> Path:
    """Write path through write(stream) (a binary stream); returns the path."""
    path = a_path(path, "path", hint="pass where the file goes, e.g. figures/bar.png")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; pass a file path inside it, e.g. "
                                f"{path / ('file' + (path.suffix or '.json'))}")
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return path


def keep_somewhere(name: str, write) -> Path:
    """Write a file called name through write(stream) into a new temporary folder; returns its path."""
    folder = Path(tempfile.mkdtemp(prefix=KEPT_PREFIX))
    return write_whole(folder / Path(name).name, write)


def write_or_keep(path, write) -> tuple[Path, str]:
    """Write path whole, else into a temporary folder: (where it is, "" or a sentence saying why and where)."""
    path = Path(path)
    try:
        return write_whole(path, write), ""
    except OSError as err:
        first = _why(err)
    try:
        kept = keep_somewhere(path.name, write)
    except OSError as err:
        raise OSError(f"{path} could not be written ({first}), nor a copy in the temporary folder "
                      f"({_why(err)}); free some disk space and run again") from None
    return kept, (f"{path} could not be written ({first}); the file is kept at {kept} instead: "
                  f"copy it where you want it")


def unwritable_folder(folder) -> str:
    """Why no file can be written into folder (made first where missing), or "" when one can."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        return "it is a file, not a folder"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".floorlab-write-test-")
        os.close(handle)
        os.unlink(probe)
    except OSError as err:
        return f"it cannot be written ({_why(err)})"
    return ""


def folder_problem(folder, flag: str) -> str:
    """Why folder cannot take a command's output (flag names the option), or "" when it can."""
    folder = Path(folder)
    if folder.suffix.lower() in (".json", ".png", ".txt", ".csv") and not folder.is_dir():
        return (f"{flag} {folder} names a file, but {flag} takes a folder; pass the folder to write into, "
                f"e.g. {flag} {folder.with_suffix('')}")
    if folder.exists() and not folder.is_dir():
        return f"{flag} {folder} is a file; pass a folder, e.g. {flag} {folder.parent}"
    problem = unwritable_folder(folder)
    if problem:
        return (f"{flag} {folder}: {problem}; nothing was measured. Pass {flag} with a folder you can "
                "write to, or fix this one's permissions")
    return ""


def file_problem(path, flag: str, *, suffix: str = ".json") -> str:
    """Why path cannot take a command's output file (flag names the option), or "" when it can."""
    path = Path(path)
    if path.is_dir():
        return f"{flag} {path} is a folder; pass a file path such as {path / ('result' + suffix)}"
    if path.suffix.lower() != suffix:
        return f"{flag} {path} should end in {suffix}, e.g. {flag} {path.with_suffix(suffix)}"
    if path.exists() and not path.is_file():
        return f"{flag} {path} is not a regular file; pass a path to a {suffix} file"
    problem = unwritable_folder(path.parent)
    if problem:
        return (f"{flag} {path}: the folder {path.parent} will not take the file: {problem}; pass {flag} "
                "with a path in a folder you can write to, or fix this folder's permissions")
    return ""


class UnreadableFile(ValueError):
    """A file that is not read: not a regular file, or larger than the reader takes."""


def read_regular(path, max_bytes: int) -> bytes:
    """The bytes of path when it is a regular file of at most max_bytes; UnreadableFile saying why not.
    A pipe, device or folder is refused before it is opened, so reading never waits on a writer."""
    path = Path(path)
    try:
        info = path.stat()
    except OSError as err:
        raise UnreadableFile(f"it cannot be read ({_why(err)})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = ("a folder" if stat.S_ISDIR(info.st_mode) else "a named pipe" if stat.S_ISFIFO(info.st_mode)
                else "a device or socket")
        raise UnreadableFile(f"it is {kind}, not a regular file; only files are read")
    if info.st_size > max_bytes:
        raise UnreadableFile(f"it is {info.st_size / 1e6:.3g} MB, more than the {max_bytes / 1e6:.3g} MB read")
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(handle, "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):  # swapped for a pipe since the check
                raise UnreadableFile("it is not a regular file; only files are read")
            data = stream.read(max_bytes + 1)
    except OSError as err:
        raise UnreadableFile(f"it cannot be read ({_why(err)})") from None
    if len(data) > max_bytes:
        raise UnreadableFile(f"it grew past the {max_bytes / 1e6:.3g} MB read while it was read")
    return data


# ---------------------------------------------------------------- JSON, written whole

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


def _json_bytes(obj) -> bytes:
    """obj as pretty JSON with sorted keys, UTF-8; a record with to_dict() or a dataclass as its dict."""
    if hasattr(obj, "to_dict") and callable(obj.to_dict) and not isinstance(obj, type):
        obj = obj.to_dict()
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=_jsonable) + "\n").encode("utf-8")


def save_json(obj, path) -> Path:
    """Write obj as pretty JSON with sorted keys to path (parent folders created); returns the path."""
    data = _json_bytes(obj)
    return write_whole(path, lambda stream: stream.write(data))


def save_or_keep(obj, path) -> tuple[Path, str]:
    """save_json(obj, path); where path cannot be written, the JSON goes to a temporary folder instead."""
    data = _json_bytes(obj)
    return write_or_keep(path, lambda stream: stream.write(data))


def load_json(path):
    """The object stored as JSON at path."""
    path = a_path(path, "path", hint="pass the JSON file's path")
    if not path.is_file():
        raise FileNotFoundError(f"No JSON file at {path}; write one first with save_json(obj, path)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} holds no complete JSON ({err}); it was cut off or is not a "
                         "JSON file: write it again with save_json(obj, path)") from None
