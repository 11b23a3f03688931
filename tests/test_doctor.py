"""`python -m floorlab doctor`: each problem gets a line saying how to fix it; exit 1 only when
something blocks the book; run times come from stored measurements."""
import pytest

from floorlab.core.plan import stored_cards
from floorlab.core.shapes import PRESETS
from floorlab.tools import doctor
from floorlab.tools.cli import main

ALL_INSTALLED = {"python": "3.11.7", **{name: "1.0" for name in doctor.REQUIRED + doctor.READING},
                 "triton": None}


def statuses(checks):
    return {c.name: c.status for c in checks}


def test_no_gpu_still_runs_the_book():
    [gpu] = doctor.gpu_checks(False, None, None)
    assert gpu.status == "warn" and "still runs" in gpu.found


def test_a_cuda_build_without_a_gpu_says_how_to_get_the_cpu_wheel():
    checks = doctor.gpu_checks(False, "13.0", None)
    build = next(c for c in checks if c.name == "torch build")
    assert build.status == "warn" and "several GB" in build.fix
    assert "--index-url https://download.pytorch.org/whl/cpu" in build.fix


def test_a_gpu_is_named():
    [gpu] = doctor.gpu_checks(True, "13.0", "NVIDIA H200")
    assert gpu.status == "ok" and "NVIDIA H200" in gpu.found


def test_memory_needs_count_weights_and_a_small_cache():
    for name, shape in PRESETS.items():
        assert shape.weight_bytes(2) < doctor.preset_need_bytes(name) < 1.2 * shape.weight_bytes(2)


def test_too_little_memory_blocks_only_the_chapters_model():
    need = doctor.preset_need_bytes(doctor.BOOK_PRESET)
    found = statuses(doctor.memory_checks(need - 1, "GPU"))
    assert found[f"memory {doctor.BOOK_PRESET}"] == "fail"
    roomy = statuses(doctor.memory_checks(need + 1, "GPU"))
    assert roomy[f"memory {doctor.BOOK_PRESET}"] == "ok"
    assert roomy["memory qwen3-8b"] == "warn"
    big = next(c for c in doctor.memory_checks(need + 1, "GPU") if c.name == "memory qwen3-8b")
    assert "--presets qwen3-0.6b" in big.fix


def test_missing_packages_fail_and_say_how_to_install():
    found = dict(ALL_INSTALLED, nbval=None)
    checks = doctor.version_checks(found, on_gpu=False)
    nbval = next(c for c in checks if c.name == "nbval")
    assert nbval.status == "fail" and "requirements.txt" in nbval.fix
    triton = next(c for c in checks if c.name == "triton")  # a CPU needs it too, for Triton's interpreter
    assert triton.status == "warn" and "interpreter" in triton.found and "triton" in triton.fix.lower()
    assert statuses(doctor.version_checks(ALL_INSTALLED, on_gpu=True))["triton"] == "warn"
    installed = next(c for c in doctor.version_checks(dict(ALL_INSTALLED, triton="3.9.0"), on_gpu=False)
                     if c.name == "triton")
    assert installed.status == "ok" and "3.9.0" in installed.found
    no_lab = statuses(doctor.version_checks(dict(ALL_INSTALLED, jupyterlab=None), on_gpu=True))
    assert no_lab["jupyterlab"] == "warn", "a machine that only builds or tests needs no JupyterLab"
    old_python = dict(ALL_INSTALLED, python="3.9.1")
    assert statuses(doctor.version_checks(old_python, on_gpu=False))["python"] == "fail"


def test_versions_of_this_machine_are_read():
    found = doctor.versions()
    assert found["python"] and found["torch"]


def test_run_times_come_from_stored_measurements():
    lines = "\n".join(doctor.time_lines(stored_cards()) + doctor.bench_lines())
    assert "python -m floorlab bench took" in lines and "NVIDIA H200" in lines
    for card in stored_cards().values():
        assert card["source"] and card["chapters_s"]
        assert all(seconds > 0 for seconds in card["chapters_s"].values())


@pytest.mark.parametrize("fail, code", [(False, 0), (True, 1)])
def test_exit_code_is_one_only_when_something_blocks(monkeypatch, capsys, fail, code):
    checks = [doctor.Check("gpu", "warn", "no GPU")]
    if fail:
        checks.append(doctor.Check("nbval", "fail", "not installed",
                                   "pip install -r requirements.txt"))
    monkeypatch.setattr(doctor, "run_checks", lambda: checks)
    assert main(["doctor"]) == code
    out = capsys.readouterr().out
    assert ("blocks the book: nbval" in out) == fail
    assert ("fix: pip install -r requirements.txt" in out) == fail


def test_doctor_runs_on_this_machine(capsys):
    assert main(["doctor"]) in (0, 1)
    out = capsys.readouterr().out
    assert "torch" in out and "memory qwen3-0.6b" in out


def test_the_report_prints_this_cards_plan_and_which_plans_ran_for_real():
    from floorlab.core.plan import KNOWN_CARDS, plan_for

    t4 = plan_for(KNOWN_CARDS["Colab T4"])
    text = doctor.report([doctor.Check("gpu", "ok", "Tesla T4")], stored_cards(), t4)
    assert str(t4).splitlines()[0] in text and "float16" in text
    assert "no, inferred from compute capability 7.5 alone" in text
    flat = " ".join(text.split())
    assert "Plans run on a real card: NVIDIA H200" in flat and "every other card's plan is inferred" in flat


def test_a_plan_that_cannot_be_read_is_reported_not_raised(monkeypatch):
    def broken(device=None):
        raise RuntimeError("CUDA driver too old")

    monkeypatch.setattr(doctor, "card_plan", broken)
    found = doctor.this_plan()
    assert isinstance(found, str) and "CUDA driver too old" in found
    assert found in doctor.report([], {}, found)


def test_doctor_prints_the_plan_of_this_machine(capsys):
    main(["doctor"])
    out = capsys.readouterr().out
    assert "what this card runs" in out and "Plans run on a real card" in " ".join(out.split())


def test_the_triton_range_the_errors_name_is_the_one_requirements_txt_asks_for():
    from pathlib import Path

    from floorlab.engine.kernels import TRITON_REQUIREMENT

    lines = (Path(__file__).resolve().parents[1] / "requirements.txt").read_text().splitlines()
    [line] = [line for line in lines if line.startswith("triton")]
    assert line.split(";")[0].strip() == TRITON_REQUIREMENT


TIMES = {"gpu": {"device": "NVIDIA H200", "kind": "cuda", "cpu_count": 16, "date": "2026-12-01T08:00:00",
                 "source": "test", "chapters_s": {"below-the-floor": 60.0, "serving": 30.0}},
         "cpu": {"device": "Some CPU", "kind": "cpu", "cpu_count": 2, "date": "2026-11-30T08:00:00",
                 "source": "test", "chapters_s": {"below-the-floor": 150.0}}}


def test_run_times_are_those_of_this_kind_of_machine_for_every_chapter_of_the_book():
    chapters = doctor.toc_chapters()
    assert chapters[0] == "below-the-floor" and "two-cards" in chapters and "gallery" in chapters
    cpu = "\n".join(doctor.time_lines(TIMES, "cpu", chapters))
    assert "Some CPU, 2 cores" in cpu and "NVIDIA H200" not in cpu
    assert "below-the-floor  2.5 min" in cpu
    for name in chapters:
        assert name in cpu, f"{name} is in _toc.yml but not in the doctor's times"
    assert "two-cards        not timed on this machine yet" in cpu
    gpu = "\n".join(doctor.time_lines(TIMES, "cuda", chapters))
    assert "NVIDIA H200" in gpu and "Some CPU" not in gpu and "serving          0.50 min" in gpu
    only_gpu = {"gpu": TIMES["gpu"]}
    assert "no chapter has been timed on a CPU" in "\n".join(doctor.time_lines(only_gpu, "cpu", chapters))


def test_the_report_heads_the_times_with_the_machine_kind_and_the_bench_apart():
    text = doctor.report([], TIMES, kind="cpu")
    assert "run time of each chapter, measured on a CPU (no CUDA GPU)" in text
    assert "bench" not in text.split("run time of the benchmark")[0].split("run time of each chapter")[1]
    assert all(len(line) <= 84 for line in text.splitlines())
