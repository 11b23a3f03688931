"""Every file the book writes is whole or absent: a write that fails leaves the old file byte-identical."""
import subprocess
import sys
import textwrap

import pytest

from floorlab.core import files
from floorlab.core.files import load_json, save_json


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_writer_failing_halfway_leaves_the_old_file(tmp_path):
    target = tmp_path / "run.json"
    save_json({"rows": [1, 2, 3]}, target)
    before = target.read_bytes()

    def half(stream):
        stream.write(b'{"rows": [')
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        files.write_whole(target, half)
    assert target.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_an_unstorable_object_leaves_the_old_json(tmp_path):
    target = tmp_path / "run.json"
    save_json({"a": 1}, target)
    before = target.read_bytes()
    with pytest.raises(TypeError):
        save_json({"a": object()}, target)
    assert target.read_bytes() == before


def test_a_png_that_fails_halfway_leaves_the_old_png(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from floorlab.figures import style

    fig = Figure()
    fig.add_subplot().plot([0, 1], [0, 1])
    target = tmp_path / "bar.png"
    style.save_png(fig, target)
    before = target.read_bytes()
    assert before.startswith(b"\x89PNG")

    def broken(self, stream, **kwargs):
        stream.write(b"\x89PNG half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", broken)
    with pytest.raises(OSError):
        style.save_png(fig, target)
    assert target.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_a_file_size_limit_leaves_the_old_file(tmp_path):
    """ulimit -f in a child process: the disk refuses the write partway, the old file stays."""
    target = tmp_path / "run.json"
    save_json({"small": True}, target)
    before = target.read_bytes()
    code = textwrap.dedent(f"""
        import signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        from floorlab.core.files import save_json
        try:
            save_json({{"big": "x" * 200_000}}, {str(target)!r})
        except OSError:
            sys.exit(3)
        sys.exit(0)
    """)
    done = subprocess.run(["bash", "-c", f'ulimit -f 16; exec "{sys.executable}" -c "$0"', code],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert target.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_write_or_keep_keeps_what_cannot_go_where_asked(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    where, note = files.write_or_keep(blocked / "run.json", lambda s: s.write(b"{}\n"))
    assert where.read_bytes() == b"{}\n"
    assert files.KEPT_PREFIX in str(where) and str(where) in note
    where.unlink()
    where.parent.rmdir()


def test_a_folder_named_like_a_file_is_refused(tmp_path):
    assert "names a file" in files.folder_problem(tmp_path / "x.json", "--out")
    assert not (tmp_path / "x.json").exists()
    assert files.folder_problem(tmp_path / "out", "--out") == ""
    assert "is a folder" in files.file_problem(tmp_path, "--out")
    assert "end in .json" in files.file_problem(tmp_path / "x.txt", "--out")
    assert load_json(save_json([1], tmp_path / "a.json")) == [1]
