"""`python -m floorlab redraw`: every stored figure has its stored run and a recipe, and redraws on the CPU."""
from pathlib import Path

import pytest

from floorlab.core import paths
from floorlab.tools.cli import main as floorlab_main
from floorlab.tools.redraw import RECIPES, stored_without_recipe

STORED_PNGS = sorted(Path(paths.REFERENCE_FIGURES_DIR).glob("*.png"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# What the chapters' GPU branches draw, checked on the redrawn figures (y labels or panel titles).
BARS = {
    "h200-below-the-floor-stacked-bar": ["eager (cuda)", "graph replay"],
    "h200-fast-card-stacked-bar": ["eager (cuda)", "graph replay", "fused + graph"],
    "h200-kernels-stacked-bar": ["eager (cuda)", "graph replay", "fused + graph (stored bench)",
                                 "book kernels, no PDL",
                                 "book kernels + PDL"],
    "h200-prefill-stacked-bar": ["decode, eager (cuda)", "decode, graph replay", "prefill, 16 tokens",
                                 "prefill, 256 tokens", "prefill, 4096 tokens"],
    "h200-serving-stacked-bar": [f"{path}, batch {b}" for b in (1, 2, 4, 8, 16) for path in ("eager", "graph")],
}
PANELS = {  # the start of each timeline panel's title, top to bottom
    "h200-below-the-floor-timeline": ["eager ·", "graph replay ·"],
    "h200-bigger-models-timeline": ["graph replay, qwen3-0.6b ·", "graph replay, qwen3-8b ·"],
    "h200-kernels-timeline": ["triton replay ·", "triton replay, no PDL ·"],
    "h200-serving-timeline": ["graph, 8 live rows in bucket 8 ·", "graph, 5 live rows in bucket 8 ·"],
}


def test_figures_are_stored():
    assert len(STORED_PNGS) >= 17, f"expected the stored H200 figures, found {len(STORED_PNGS)}"


@pytest.mark.parametrize("png", STORED_PNGS, ids=lambda p: p.stem)
def test_every_stored_figure_has_its_run_and_a_recipe(png):
    assert png.stem not in stored_without_recipe(), (
        f"{png.name} has no recipe in floorlab/tools/redraw.py: add one to FIGURES")
    runs = RECIPES[png.stem].runs
    assert png.stem.startswith(runs[0] + "-"), f"{png.stem} is drawn from {runs[0]}, not its own chapter's run"
    for name in runs:
        assert (Path(paths.REFERENCE_DIR) / f"{name}.json").is_file(), f"{png.name} needs {name}.json"


def test_every_recipe_has_its_stored_figure():
    stored = {p.stem for p in STORED_PNGS}
    assert set(RECIPES) <= stored, f"recipes without a stored figure: {sorted(set(RECIPES) - stored)}"


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_recipe_redraws_its_figure_from_the_stored_run(name, tmp_path):
    path = tmp_path / f"{name}.png"
    fig = RECIPES[name].redraw(path)
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 20_000, f"{path.name} is only {len(data)} bytes"
    width, height = (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"))
    assert width >= 1000 and height >= 300, f"{path.name} is {width}×{height} px"
    axes = fig.axes
    if name in BARS:
        assert [t.get_text() for t in axes[0].get_yticklabels()] == BARS[name]
    if name in PANELS:
        titles = [ax.get_title(loc="left") for ax in axes]
        assert len(titles) == len(PANELS[name])
        for title, start in zip(titles, PANELS[name]):
            assert title.startswith(start), f"panel {title!r} should start with {start!r}"
    if "stacked-bar" in name or "timeline" in name:  # each says where and when it was measured
        texts = [t.get_text() for ax in axes for t in ax.texts]
        assert any("measured on NVIDIA H200, 20" in t for t in texts), texts


def test_the_command_writes_one_line_per_figure(tmp_path, capsys):
    assert floorlab_main(["redraw", "--out", str(tmp_path), "--only", "h200-kernels-gemv-sizes.png"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "h200-kernels-gemv-sizes.png").is_file()
    assert [line for line in out.splitlines() if line.endswith("(from h200-kernels)")] == [
        f"{tmp_path / 'h200-kernels-gemv-sizes.png'}  (from h200-kernels)"]


def test_the_command_refuses_an_unknown_name(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        floorlab_main(["redraw", "--out", str(tmp_path), "--only", "h200-kernels-stacked-bar", "h200-no-such"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "--only h200-no-such: no stored figure of that name" in err
    assert "h200-kernels-stacked-bar" in err.split("Pass one of:")[1]
    assert list(tmp_path.iterdir()) == [], "nothing is drawn when a name is refused"
