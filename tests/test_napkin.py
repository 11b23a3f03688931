"""The napkin calculator (napkin.md): the numbers the build hands the page, and the page itself.

The fast tests check what floorlab.tools.napkin writes: the shapes are core.shapes' presets, and
each preset prices its run's own eager step exactly. The browser test opens the calculator in
the site that `built_site` built (the same build as test_site.py's), moves every input, and
checks each output against core.roofline computed here in Python; it also checks that the page
asks nothing of the network, and keeps a screenshot.
"""
import json
import shutil
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from floorlab.core import paths
from floorlab.core.prose import fmt_ms, fmt_times
from floorlab.core.reference import reference_run
from floorlab.core.roofline import decode_floor, predicted_ms
from floorlab.core.shapes import PRESETS, Qwen3Shape
from floorlab.tools import napkin

ROOT = Path(__file__).resolve().parents[1]
LAPTOP_WIDTH_PX = 1280
PHONE_WIDTH_PX = 390
REL = 1e-9  # the page and the library do the same double-precision arithmetic


def _data_from_js(text: str) -> dict:
    """The JSON object a napkin-data.js file assigns to window.FLOORLAB_NAPKIN."""
    head = f"window.{napkin.GLOBAL_NAME} = "
    start = text.index(head) + len(head)
    return json.loads(text[start:text.rindex(";")])


def test_the_pages_table_of_shapes_is_core_shapes(tmp_path):
    written = napkin.write_napkin_js(tmp_path / "napkin-data.js", figures_dir=tmp_path)
    shapes = _data_from_js(written.read_text(encoding="utf-8"))["shapes"]
    assert sorted(shapes) == sorted(PRESETS)
    for name, preset in PRESETS.items():
        rebuilt = Qwen3Shape(**shapes[name], name=name)
        assert replace(preset, rope_theta=rebuilt.rope_theta, rms_norm_eps=rebuilt.rms_norm_eps,
                       max_position_embeddings=rebuilt.max_position_embeddings) == rebuilt, name
        assert rebuilt.weight_bytes() == preset.weight_bytes()
        assert rebuilt.kv_bytes_per_token() == preset.kv_bytes_per_token()


def test_the_page_mirrors_every_field_the_byte_counts_read():
    """A field added to Qwen3Shape's byte counts must reach the page's table too."""
    script = (ROOT / "_static" / "napkin" / "napkin.js").read_text(encoding="utf-8")
    for field in napkin.SHAPE_FIELDS:
        assert f"s.{field}" in script or f'"{field}"' in script, field


def _eager_ms(preset: napkin.Preset) -> float:
    shape = PRESETS[preset.model]
    floor = decode_floor(shape, batch=preset.batch, prompt_tokens=preset.context_tokens,
                         bandwidths={"read": preset.bandwidth_gbps}).floor_ms
    return predicted_ms(floor, preset.kernels_per_layer * shape.num_layers, preset.dispatch_us)


def test_without_a_run_of_its_own_the_calculator_starts_from_the_stored_h200(tmp_path):
    presets = napkin.presets(figures_dir=tmp_path)
    first = presets[0]
    assert first.origin == "stored" and first.key == "h200"
    assert "NVIDIA H200" in first.label and "stored" in first.label
    assert first.note.startswith("A stored run, not the machine that built this site: NVIDIA H200")
    assert [p.key for p in presets][-1] == "laptop"
    # the preset prices the stored run's own eager step at what it measured
    assert _eager_ms(first) == pytest.approx(first.eager_ms, rel=1e-9)
    assert first.replay_us is not None and 0 < first.replay_us < first.dispatch_us


def test_a_run_of_this_machine_comes_first_under_its_own_name(tmp_path):
    run = reference_run(napkin.STORED_RUN)
    run.device = replace(run.device, name="A Test Card 9000")
    run.save(tmp_path / napkin.CHAPTER_RUN)
    first = napkin.presets(figures_dir=tmp_path)[0]
    assert first.origin == "yours" and first.key == "yours"
    assert first.label == "A Test Card 9000 (built this site)"
    assert first.note.startswith("The machine that built this site: A Test Card 9000, measured on 2026-")
    assert _eager_ms(first) == pytest.approx(run.row("eager").median_ms, rel=1e-9)


def test_a_broken_run_of_this_machine_is_passed_over(tmp_path):
    (tmp_path / napkin.CHAPTER_RUN).write_text("{\"layout\": 2, \"kind\": ")
    assert napkin.presets(figures_dir=tmp_path)[0].key == "h200"


def test_the_stored_cpu_card_has_no_replay(tmp_path):
    gallery = tmp_path / "gallery"
    gallery.mkdir()
    assert napkin.stored_cpu_run(gallery) is None
    stored = sorted((paths.RESULTS_DIR / "gallery").glob("cpu-*.json"))
    if not stored:
        pytest.skip("no CPU card is stored in results/gallery/")
    shutil.copy(stored[0], gallery / stored[0].name)
    cpu = napkin.preset_from_run(napkin.stored_cpu_run(gallery), "cpu", "stored")
    assert cpu.replay_us is None and cpu.replay_ms is None
    assert "(R)" not in cpu.label and "replayed no graph" in cpu.note
    assert _eager_ms(cpu) == pytest.approx(cpu.eager_ms, rel=1e-9)


def test_the_laptop_preset_is_the_laptop_studys_arithmetic():
    laptop = napkin.laptop_preset()
    assert (laptop.bandwidth_gbps, laptop.kernels_per_layer) == (380.0, 10.0)
    assert laptop.dispatch_us == pytest.approx(16.7, abs=0.05)  # the chapter's "about 17 µs"
    assert 0 < laptop.replay_us < 1.5


def test_the_napkin_files_reach_only_the_napkin_page():
    import importlib.util

    spec = importlib.util.spec_from_file_location("floorlab_site", ROOT / "_ext" / "floorlab_site.py")
    site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site)

    class Config:
        html_js_files = ["napkin/napkin.js", "other.js", ("napkin/napkin-data.js", {})]
        html_css_files = ["wide.css", "napkin/napkin.css"]

    config = Config()
    site._napkin_files_off_other_pages(None, config)
    assert config.html_js_files == ["other.js"] and config.html_css_files == ["wide.css"]


# ---- in the browser ----------------------------------------------------------------------

READ_PAGE_JS = """() => {
  const v = (id) => document.getElementById('napkin-' + id);
  const num = (id) => Number(v(id).value);
  const shape = {};
  for (const k of %s) shape[k] = num('shape-' + k);
  shape.tie_word_embeddings = v('shape-tie_word_embeddings').checked;
  const out = (id) => ({text: v('out-' + id).textContent, ...v('out-' + id).dataset});
  const bar = (cls) => {
    const g = document.querySelector('.napkin-bar .' + cls);
    if (!g) return null;
    const [floor, rest] = g.querySelectorAll('rect');
    return {ms: Number(g.dataset.ms), floorPx: floor.width.baseVal.value,
            restPx: rest.width.baseVal.value};
  };
  return {
    model: v('model').value, shape,
    batch: num('batch'), context: num('context'), bandwidth: num('bandwidth'),
    kernelsPerLayer: num('kernelsPerLayer'), dispatchUs: num('dispatchUs'), replayUs: num('replayUs'),
    floor: out('floor'), eager: out('eager'), replay: out('replay'),
    eagerBar: bar('napkin-bar-eager'), replayBar: bar('napkin-bar-replay'),
    problems: v('problems').textContent, source: v('source').textContent,
  };
}""" % json.dumps([f for f in napkin.SHAPE_FIELDS if f != "tie_word_embeddings"])


def _expected(seen: dict) -> dict:
    """What the library says for the inputs the page shows."""
    shape = Qwen3Shape(**seen["shape"], name=seen["model"])
    floor = decode_floor(shape, batch=int(seen["batch"]), prompt_tokens=int(seen["context"]),
                         bandwidths={"read": seen["bandwidth"]})
    kernels = seen["kernelsPerLayer"] * shape.num_layers
    eager = predicted_ms(floor.floor_ms, kernels, seen["dispatchUs"])
    replay = predicted_ms(floor.floor_ms, kernels, seen["replayUs"])
    return {"bytes": floor.bytes_per_step, "floor": floor.floor_ms, "eager": eager, "replay": replay}


def _check_outputs(seen: dict, what: str) -> None:
    """The page's outputs for the inputs it shows are the library's, to rounding."""
    assert not seen["problems"], f"{what}: {seen['problems']}"
    want = _expected(seen)
    if seen["model"] != "custom":
        assert Qwen3Shape(**seen["shape"], name=seen["model"]) == replace(
            PRESETS[seen["model"]], name=seen["model"]), f"{what}: the menu names the wrong shape"
    assert int(seen["floor"]["bytes"]) == want["bytes"], what
    assert float(seen["floor"]["ms"]) == pytest.approx(want["floor"], rel=REL), what
    assert seen["floor"]["text"] == fmt_ms(want["floor"]), what
    for path in ("eager", "replay"):
        ms, got = want[path], seen[path]
        assert float(got["ms"]) == pytest.approx(ms, rel=REL), f"{what}: {path}"
        assert float(got["multiple"]) == pytest.approx(ms / want["floor"], rel=REL), f"{what}: {path}"
        assert float(got["offBus"]) == pytest.approx((ms - want["floor"]) / ms, rel=REL, abs=1e-12), what
        assert got["text"] == f"{fmt_times(ms / want['floor'])} the floor", f"{what}: {path}"
        bar = seen[f"{path}Bar"]
        assert bar["ms"] == pytest.approx(ms, rel=REL), f"{what}: the {path} bar was not redrawn"
        drawn = bar["floorPx"] / (bar["floorPx"] + bar["restPx"])
        assert drawn == pytest.approx(want["floor"] / ms, abs=0.01) or bar["floorPx"] <= 1.5, what


# every input the reader can move, and a value to move it to
MOVES = [("batch", "8"), ("context", "4000"), ("bandwidth", "1000"), ("kernelsPerLayer", "5"),
         ("dispatchUs", "8.5"), ("replayUs", "1.2"), ("shape-num_layers", "48"),
         ("shape-hidden_size", "3072"), ("shape-intermediate_size", "8192"), ("shape-num_heads", "24"),
         ("shape-num_kv_heads", "4"), ("shape-head_dim", "96"), ("shape-vocab_size", "32000")]


@pytest.fixture()
def calculator(built_site, chromium):
    """The built napkin page in a tab with every request outside file:, data: and blob: refused."""
    html = built_site.html / "napkin.html"
    if not html.is_file():
        pytest.fail(f"napkin: not in the built site ({html}); see the build test for why", pytrace=False)
    tab = chromium.new_page(viewport={"width": LAPTOP_WIDTH_PX, "height": 900})
    refused = []

    def no_network(route):
        if urlsplit(route.request.url).scheme in ("file", "data", "blob"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    tab.route("**/*", no_network)
    tab.goto(html.as_uri(), wait_until="load")
    tab.wait_for_selector(".napkin-bar", timeout=10_000)
    yield tab, refused
    tab.close()


@pytest.mark.browser
def test_the_calculator_is_the_librarys_arithmetic(calculator, screenshots_dir):
    tab, refused = calculator
    read = lambda: tab.evaluate(READ_PAGE_JS)  # noqa: E731
    data = tab.evaluate("window.FLOORLAB_NAPKIN")
    presets = data["presets"]
    # it starts from the first preset, under that run's name
    assert tab.get_attribute(".napkin-preset[aria-pressed=true]", "data-preset") == presets[0]["key"]
    assert read()["source"].startswith(presets[0]["note"])
    for preset in presets:
        tab.click(f".napkin-preset[data-preset='{preset['key']}']")
        seen = read()
        assert seen["model"] == preset["model"] and seen["batch"] == preset["batch"]
        assert seen["bandwidth"] == pytest.approx(preset["bandwidth_gbps"], rel=1e-3)
        assert seen["dispatchUs"] == pytest.approx(preset["dispatch_us"], rel=5e-3)
        _check_outputs(seen, preset["key"])
    # the what-ifs: each changes one input as it says
    tab.click(f".napkin-preset[data-preset='{presets[0]['key']}']")
    before = read()
    tab.click(".napkin-whatif[data-whatif=bandwidth]")
    assert read()["bandwidth"] == pytest.approx(2 * before["bandwidth"], rel=1e-3)
    tab.click(".napkin-whatif[data-whatif=kernels]")
    assert read()["kernelsPerLayer"] == pytest.approx(before["kernelsPerLayer"] / 10, rel=1e-3)
    tab.click(".napkin-whatif[data-whatif=model]")
    seen = read()
    bigger = sorted((p for p in PRESETS.values() if p.param_count() > PRESETS[before["model"]].param_count()),
                    key=Qwen3Shape.param_count)
    assert seen["model"] == (bigger[0].name if bigger else before["model"])
    _check_outputs(seen, "after the three what-ifs")
    assert "now yours" in seen["source"]
    tab.click(f".napkin-preset[data-preset='{presets[0]['key']}']")
    tab.click(".napkin-shape-box summary")  # the model's sizes fold out
    for field, value in MOVES:
        before = read()
        tab.fill(f"#napkin-{field}", value)
        seen = read()
        assert seen != before, f"moving {field} changed nothing"
        _check_outputs(seen, f"after {field} = {value}")
    assert read()["model"] == "custom"
    tab.uncheck("#napkin-shape-tie_word_embeddings")
    _check_outputs(read(), "untied")
    tab.select_option("#napkin-model", "qwen3-8b")
    seen = read()
    assert seen["shape"]["num_layers"] == PRESETS["qwen3-8b"].num_layers
    _check_outputs(seen, "qwen3-8b from the menu")
    # the keyboard alone: focus a field and step it with the arrow keys
    tab.focus("#napkin-bandwidth")
    before = read()["bandwidth"]
    tab.keyboard.press("ArrowUp")
    seen = read()
    assert seen["bandwidth"] > before
    _check_outputs(seen, "bandwidth stepped with ArrowUp")
    # a value no step can have shows no numbers and says what to type
    tab.fill("#napkin-batch", "0")
    seen = read()
    assert "batch" in seen["problems"] and seen["floor"]["text"] == "—"
    tab.fill("#napkin-batch", "1")
    _check_outputs(read(), "batch back to 1")
    tab.fill("#napkin-bandwidth", "0")
    assert "read bandwidth: type a number above 0." in read()["problems"]
    tab.fill("#napkin-bandwidth", "380")
    _check_outputs(read(), "bandwidth back to 380 GB/s")
    tab.click(f".napkin-preset[data-preset='{presets[0]['key']}']")
    tab.click(".napkin-shape-box summary")  # folded again, as a reader first sees it
    tab.locator("#napkin").screenshot(path=screenshots_dir / "napkin-calculator.png")
    assert not refused, f"the calculator asked the network for {refused}"


@pytest.mark.browser
@pytest.mark.parametrize("width_px", [LAPTOP_WIDTH_PX, PHONE_WIDTH_PX])
def test_the_calculator_fits_the_content_column(calculator, width_px):
    tab, _ = calculator
    tab.set_viewport_size({"width": width_px, "height": 900})
    tab.evaluate("document.querySelector('.napkin-shape-box').open = true")
    fits = tab.evaluate("""() => {
      const box = document.getElementById('napkin');
      const article = box.closest('article') || document.body;
      const wide = Array.from(box.querySelectorAll('*'))
        .filter(e => e.getBoundingClientRect().right > box.getBoundingClientRect().right + 1)
        .map(e => e.tagName + '.' + (e.getAttribute('class') || ''));
      return {box: box.scrollWidth, client: box.clientWidth,
              column: article.getBoundingClientRect().width, wide};
    }""")
    assert fits["box"] <= fits["client"] + 1 and not fits["wide"], fits
