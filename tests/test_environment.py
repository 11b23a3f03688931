"""Each FLOORLAB_* variable with a nonsense value gets one clear line naming it; yes/no variables take
the usual spellings; a folder that cannot be written sends the figures to one that can, and says so."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from floorlab.core import checks
from floorlab.core.environment import EnvironmentValueError, expand_folder, flag, writable_folder

LIB = Path(__file__).resolve().parents[1] / "lib"


@pytest.mark.parametrize("value", ["1", "true", "YES", " on ", "True"])
def test_yes_spellings(value):
    assert flag("FLOORLAB_X", {"FLOORLAB_X": value}) is True


@pytest.mark.parametrize("value", ["0", "false", "No", "off", ""])
def test_no_spellings(value):
    assert flag("FLOORLAB_X", {"FLOORLAB_X": value}) is False
    assert flag("FLOORLAB_X", {}) is False


@pytest.mark.parametrize("value", ["maybe", "2", "yes please", "-1", "y"])
def test_anything_else_is_refused_naming_the_variable(value):
    with pytest.raises(EnvironmentValueError, match="FLOORLAB_X=.* is not a yes or a no; set it to 1 or 0"):
        flag("FLOORLAB_X", {"FLOORLAB_X": value})


def test_show_answers_takes_the_spellings(monkeypatch):
    monkeypatch.setenv("FLOORLAB_SHOW_ANSWERS", "yes")
    assert checks.answers_shown(False)
    monkeypatch.setenv("FLOORLAB_SHOW_ANSWERS", "off")
    assert not checks.answers_shown(False)
    monkeypatch.setenv("FLOORLAB_SHOW_ANSWERS", "sometimes")
    with pytest.raises(EnvironmentValueError, match="FLOORLAB_SHOW_ANSWERS"):
        checks.answers_shown(False)


def test_a_home_folder_that_does_not_exist_is_named():
    with pytest.raises(EnvironmentValueError, match="FLOORLAB_FIGURES='~nosuchuser/x'.*write the folder out"):
        expand_folder("~nosuchuser/x", "FLOORLAB_FIGURES")


@pytest.mark.parametrize("value", ["~nosuchuser/x", "/etc/hostname/figures", "/dev/null"])
def test_import_floorlab_survives_a_nonsense_figures_folder(value, tmp_path):
    env = dict(os.environ, FLOORLAB_FIGURES=value, PYTHONPATH=str(LIB), TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", "import floorlab; print(floorlab.FIGURES_DIR)"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "floorlab-figures")
    lines = [line for line in done.stderr.splitlines() if "FLOORLAB_FIGURES" in line]
    assert len(lines) == 1 and str(tmp_path / "floorlab-figures") in lines[0]


def test_a_read_only_checkout_sends_figures_to_a_writable_folder(tmp_path, monkeypatch):
    said = []
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: not str(path).startswith(str(checkout)))
    folder = writable_folder("FLOORLAB_FIGURES", checkout / "figures", tmp_path / "elsewhere",
                             what="figures", environ={}, say=said.append)
    assert folder == tmp_path / "elsewhere"
    assert said == [f"{checkout / 'figures'} cannot be written, so figures go to {tmp_path / 'elsewhere'} "
                    "instead (set FLOORLAB_FIGURES to a folder you can write to, to choose another)."]


@pytest.mark.parametrize("show", ["no", "yes", None, 2, "False"])
def test_a_worked_answer_asked_for_with_text_is_refused_not_shown(show, capsys):
    with pytest.raises(ValueError, match="show_answer should be True or False"):
        with checks.worked_answer(show):
            print("THE ANSWER")
    assert "THE ANSWER" not in capsys.readouterr().out
