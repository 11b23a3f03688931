"""Model sizes: memory known before allocating, meta-device counts equal to the roofline's bytes,
one model at a time, and the fixed-cost model that carries one size to the others."""
import pytest
import torch

from floorlab.core import checks, memory, paths
from floorlab.core.bandwidth import Bandwidth, Bandwidths
from floorlab.core.memory import check_fits, model_bytes
from floorlab.core.prose import COLUMN
from floorlab.core.roofline import bytes_per_step
from floorlab.core.runs import Run, row_key
from floorlab.core.shapes import PRESETS, Qwen3Shape, get_shape
from floorlab.engine.meta import count_on_meta
from floorlab.studies import bigger_models as sizes
from floorlab.studies import bigger_models_checks
from floorlab.tools import doctor

TINY_A = Qwen3Shape(64, 128, 2, 4, 2, 16, 500, False, name="tiny-a")
TINY_B = Qwen3Shape(128, 256, 3, 4, 2, 32, 500, True, name="tiny-b")
MID_A = Qwen3Shape(1024, 3072, 4, 16, 8, 64, 32000, False, name="mid-a")  # about 230 MB in bf16
MID_B = Qwen3Shape(1024, 3072, 6, 16, 8, 64, 32000, False, name="mid-b")
HUGE = Qwen3Shape(16384, 65536, 4, 128, 8, 128, 20_000_000, False, name="huge")  # ~ 670 GB
FAST = 1e5  # GB/s: a stand-in bandwidth that puts every floor far below a measured step


def fake_bandwidths(gbps: float = FAST) -> Bandwidths:
    def one(kind):
        return Bandwidth(kind, gbps, gbps, gbps, 1, "stand-in")
    return Bandwidths(copy=one("copy"), read=one("read"))


def test_the_larger_shapes_are_qwen3_14b_and_32b():
    big, bigger = get_shape("qwen3-14b"), get_shape("qwen3-32b")
    assert round(big.param_count() / 1e9, 1) == 14.8  # the published sizes
    assert round(bigger.param_count() / 1e9, 1) == 32.8
    assert (big.num_layers, bigger.num_layers) == (40, 64)
    assert not big.tie_word_embeddings and not bigger.tie_word_embeddings


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_meta_counts_equal_the_roofline_bytes(name):
    shape = PRESETS[name]
    counted = count_on_meta(name, max_batch=2, max_context=64)
    assert counted.on_meta  # sizes only: nothing was allocated
    assert counted.params == shape.param_count()
    assert counted.weight_bytes == shape.weight_bytes(2)
    assert counted.cache_bytes == 2 * 64 * shape.kv_bytes_per_token(2)
    assert model_bytes(shape, max_batch=2, max_context=64) == counted.weight_bytes + counted.cache_bytes
    # the roofline streams every weight, except an untied input table beyond the looked-up row
    unread = 0 if shape.tie_word_embeddings else (shape.vocab_size - 1) * shape.hidden_size * 2
    kv = 33 * shape.kv_bytes_per_token(2)
    assert bytes_per_step(shape, 1, 33) == counted.weight_bytes - unread + kv


def test_doctor_counts_a_presets_memory_the_same_way():
    for name, shape in PRESETS.items():
        assert doctor.preset_need_bytes(name) == model_bytes(
            shape, max_batch=doctor.CACHE_ROWS, max_context=doctor.CACHE_TOKENS)


def test_a_model_too_big_says_how_many_gb_it_needs():
    fit = check_fits("qwen3-8b", "cuda", max_batch=1, max_context=128, free=10_000_000_000)
    need_gb = (PRESETS["qwen3-8b"].weight_bytes(2) + 128 * PRESETS["qwen3-8b"].kv_bytes_per_token(2)
               + memory.HEADROOM_BYTES) / 1e9
    assert not fit.ok and fit.where == "GPU"
    text = fit.message()
    assert f"needs {need_gb:.1f} GB" in text and "only 10.0 GB of GPU memory is free" in text
    assert "skipped before anything was allocated" in text and f"{need_gb:.1f} GB free" in text
    roomy = check_fits("qwen3-8b", "cuda", max_batch=1, max_context=128, free=100_000_000_000)
    assert roomy.ok and "it fits" in roomy.message()
    unknown = check_fits("qwen3-8b", "cpu", max_batch=1, max_context=128, free=None)
    assert unknown.where == "host"


def test_free_memory_is_read_on_this_machine():
    free = memory.free_bytes("cpu")
    assert free is None or free > 0
    assert check_fits(TINY_A, "cpu", max_batch=1, max_context=16).ok


@pytest.fixture(scope="module")
def cpu_run():
    return sizes.measure_sizes([TINY_B, TINY_A], device="cpu", bandwidths=fake_bandwidths(),
                               warmup=1, repeats=3, prompt_tokens=4, max_context=16)


def test_sizes_on_a_cpu_measure_eager_and_say_why_graphs_are_absent(cpu_run):
    assert cpu_run.kind == sizes.KIND and len(cpu_run.floors) == 2
    for shape in (TINY_A, TINY_B):
        eager = cpu_run.row(sizes.EAGER, shape.name)
        assert eager.x_floor > 1
        [graph] = [r for r in cpu_run.rows if r.path == sizes.GRAPH and r.preset == shape.name]
        assert graph.status == "absent" and "CUDA" in graph.note
        assert cpu_run.timelines[row_key(shape.name, 1, sizes.EAGER)].label == f"eager, {shape.name}"
    view = sizes.measured_sizes(cpu_run)
    assert view.presets == ["tiny-a", "tiny-b"]  # smallest first, whatever the order measured
    assert view.graph("tiny-a") is None and view.speedup("tiny-a") is None
    assert view.verdict("tiny-a") in ("operators", "dispatch", "bytes")
    assert [x for x, _ in view.points(sizes.EAGER)] == sorted([TINY_A.param_count(),
                                                               TINY_B.param_count()])
    assert "tiny-b" in sizes.format_sizes(view)
    with pytest.raises(ValueError, match="CUDA"):
        sizes.fit_cost_model(view)


def test_a_size_that_does_not_fit_is_skipped_before_anything_is_built(monkeypatch):
    monkeypatch.setattr(memory, "free_bytes", lambda device: 1_000_000)

    def refuse(*args, **kwargs):
        raise AssertionError("a model was built although it does not fit")

    monkeypatch.setattr(sizes, "build_model", refuse)
    run = sizes.measure_sizes([TINY_A], device="cpu", bandwidths=fake_bandwidths(), warmup=1,
                              repeats=1, prompt_tokens=4, max_context=16)
    assert len(run.floors) == 1  # the floor is arithmetic: it is there all the same
    assert {r.status for r in run.rows} == {"absent"}
    assert all("GB" in r.note and "skipped before anything was allocated" in r.note
               for r in run.rows)
    view = sizes.measured_sizes(run)
    assert view.presets == [] and [r.preset for r in view.not_measured] == ["tiny-a"]


@pytest.fixture
def stored_view(first_host_runs):
    """The first host's stored run of the chapter, whose numbers the tests below pin."""
    return sizes.stored_sizes()


def test_the_stored_run_stands_in_for_a_machine_without_graphs(stored_view):
    view = stored_view
    assert not view.source.here and isinstance(view.run, Run)
    assert view.presets == ["qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b"]  # smallest first
    for preset in view.presets:
        assert view.speedup(preset) > 1 and view.verdict(preset) == "dispatch"
        assert view.timeline(preset).kernels > 0
    assert all(len(line) <= COLUMN for line in sizes.format_sizes(view).splitlines())


def test_a_stored_run_is_read_back_as_the_run_it_was(cpu_run, tmp_path, monkeypatch):
    cpu_run.save(tmp_path / "stand-in.json")
    monkeypatch.setattr(paths, "REFERENCE_DIR", tmp_path)
    monkeypatch.setattr(sizes, "REFERENCE", "stand-in")
    view = sizes.stored_sizes()
    assert not view.source.here
    assert view.presets == ["tiny-a", "tiny-b"]
    assert view.eager("tiny-b").median_ms == cpu_run.row(sizes.EAGER, "tiny-b").median_ms
    assert isinstance(view.run, Run)


def test_the_cost_model_reproduces_the_replay_it_was_fitted_on(stored_view):
    model = sizes.fit_cost_model(stored_view)
    assert model.preset == "qwen3-8b"  # the largest size with a profiled replay
    replay = stored_view.timeline("qwen3-8b")
    assert model.kernels("qwen3-8b") == replay.kernels
    assert model.graph_ms("qwen3-8b") == pytest.approx(replay.busy_ms)
    assert model.eager_ms("qwen3-8b") == pytest.approx(stored_view.eager("qwen3-8b").issue.median_ms)
    order = sorted(PRESETS, key=lambda p: PRESETS[p].param_count())
    speedups = [model.speedup(p) for p in order]
    multiples = [model.graph_ms(p) / model.floor_ms(p) for p in order]
    assert speedups == sorted(speedups, reverse=True) and min(speedups) >= 1
    assert multiples == sorted(multiples, reverse=True) and min(multiples) > 1
    with pytest.raises(ValueError, match="pick one of"):
        sizes.fit_cost_model(stored_view, "qwen3-14b")


def test_at_the_layer_bytes_found_eager_is_the_threshold_times_a_replay(stored_view):
    model = sizes.fit_cost_model(stored_view)
    stream_ms = model.layer_bytes() / (model.bandwidth_gbps * 1e9) * 1e3
    fixed_ms = model.kernels_per_layer * model.overhead_us / 1e3
    assert model.issue_ms_per_layer / (stream_ms + fixed_ms) == pytest.approx(sizes.THRESHOLD)
    # the worked answer's predicted column applies the same rule to each shape's printed GB per layer
    assert model.layer_speedup(model.layer_bytes()) == pytest.approx(sizes.THRESHOLD)
    assert model.layer_speedup(1e15) == 1.0  # a layer that streams past the host's issue time: no gain
    assert model.layer_bytes(threshold=1e9) == 0.0  # a threshold no step reaches: every size


def test_the_graphs_matter_check_covers_starter_right_and_wrong(stored_view):
    model = sizes.fit_cost_model(stored_view)
    answer = bigger_models_checks.graphs_matter_answer(model, PRESETS, threshold=sizes.THRESHOLD)
    gb = answer.layer_bytes / 1e9
    assert bigger_models_checks.check_graphs_matter(None, None, answer) == checks.NOT_ATTEMPTED
    assert bigger_models_checks.check_graphs_matter(gb, answer.first_preset, answer).startswith("right")
    assert bigger_models_checks.check_graphs_matter(gb * 1.5, answer.first_preset, answer).startswith("not yet")
    assert bigger_models_checks.check_graphs_matter(gb, "qwen3-0.6b", answer).startswith("not yet")
    assert bigger_models_checks.check_graphs_matter("1.3 GB", answer.first_preset, answer).startswith("not yet")
    text = bigger_models_checks.answer_graphs_matter(model, answer, stored_view)
    assert f"{gb:.2f} GB per layer" in text and "qwen3-32b" in text


def test_a_cheap_host_names_the_first_size_where_graphs_stop_mattering():
    model = sizes.CostModel(preset="qwen3-8b", bandwidth_gbps=4300.0, kernels_per_layer=19.0,
                            overhead_us=3.0, issue_ms_per_layer=0.1)
    answer = bigger_models_checks.graphs_matter_answer(model, PRESETS, threshold=1.1)
    # (0.1 ÷ 1.1 − 19 × 3 µs) × 4300 GB/s = 0.146 GB: past qwen3-1.7b's 0.10, short of 4b's 0.20
    assert answer.first_preset == "qwen3-4b"
    assert bigger_models_checks.check_graphs_matter(answer.layer_bytes / 1e9, "Qwen3-4B", answer).startswith("right")


@pytest.mark.gpu
def test_sizes_on_a_gpu_replay_each_model_and_free_it_before_the_next():
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    run = sizes.measure_sizes([MID_A, MID_B], device="cuda", bandwidths=fake_bandwidths(),
                              warmup=2, repeats=5, prompt_tokens=4, max_context=16)
    for shape in (MID_A, MID_B):
        eager, graph = run.row(sizes.EAGER, shape.name), run.row(sizes.GRAPH, shape.name)
        assert eager.issue is not None and graph.bit_identical is True
        replay = run.timelines[row_key(shape.name, 1, sizes.GRAPH)]
        assert replay.kernels > 0 and replay.label == f"graph replay, {shape.name}"
    torch.cuda.synchronize()
    # each model holds over 200 MB; what may stay behind is the libraries' small workspaces
    kept = torch.cuda.memory_allocated() - before
    assert kept < MID_A.weight_bytes(2) / 2, f"{kept / 1e6:.0f} MB still allocated"
    view = sizes.measured_sizes(run)
    assert view.source.here and view.presets == ["mid-a", "mid-b"]
    assert all(view.speedup(p) > 0 for p in view.presets)


@pytest.mark.gpu
def test_a_size_too_big_for_the_gpu_is_skipped_without_allocating():
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    run = sizes.measure_sizes([HUGE], device="cuda", bandwidths=fake_bandwidths(), warmup=1,
                              repeats=1, prompt_tokens=4, max_context=16)
    assert torch.cuda.memory_allocated() == before
    assert {r.status for r in run.rows} == {"absent"}
    assert all("GB of GPU memory is free" in r.note for r in run.rows)


def test_the_stored_bench_prints_chosen_paths_without_its_targets():
    from floorlab.core.reference import reference_run
    from floorlab.tools.bench import format_summary

    text = format_summary(reference_run("h200-bench"), paths=("fused graph", "triton graph"),
                          targets=False)
    lines = text.splitlines()
    assert [line.split()[0] for line in lines] == ["path", "fused", "triton"]
    assert "targets" not in text and all(len(line) <= COLUMN for line in lines)


def test_a_stored_sizes_run_keeps_the_floor_policy_and_its_graphs():
    """Runs once the H200 run of the chapter is stored (lib/floorlab/reference/<REFERENCE>.json)."""
    from floorlab.core.reference import reference_run
    from floorlab.core.roofline import decode_floor

    try:
        run = reference_run(sizes.REFERENCE)
    except FileNotFoundError:
        pytest.skip(f"no stored {sizes.REFERENCE} run yet")
    assert run.kind == sizes.KIND and run.on_gpu
    for floor in run.floors:
        assert floor == decode_floor(get_shape(floor.preset), batch=floor.batch,
                                     prompt_tokens=floor.visible_tokens - 1,
                                     bandwidths=run.bandwidths, cache_tokens=floor.cache_tokens)
    view = sizes.stored_sizes()
    assert len(view.presets) >= 2
    for preset in view.presets:
        assert view.graph(preset).bit_identical is True and view.timeline(preset).kernels > 0
    assert sizes.fit_cost_model(view).overhead_us > 0


# ---- the stored H200 run: noise said where it is printed, checks that name their mistakes ----

def test_a_noisy_eager_step_is_starred_to_two_figures_and_its_speedup_is_a_band(stored_view):
    text = sizes.format_sizes(stored_view)
    lines = text.splitlines()
    assert all(len(line) <= COLUMN for line in lines)
    by_preset = {line.split()[0]: line for line in lines if line.startswith("qwen3")}
    assert "14.3 ms (51.2×)" in by_preset["qwen3-0.6b"] and "*" not in by_preset["qwen3-0.6b"]
    assert "39 ms (49×)*" in by_preset["qwen3-1.7b"] and "39.4" not in by_preset["qwen3-1.7b"]
    assert "2.4-11×" in by_preset["qwen3-8b"] and "3.97" not in by_preset["qwen3-8b"]
    notes = [line for line in lines if line.startswith("* noisy")]
    for preset, share in (("qwen3-1.7b", "76%"), ("qwen3-4b", "99%"), ("qwen3-8b", "208%")):
        assert any(preset in note and share in note for note in notes), (preset, notes)
    assert len(notes) == 3  # the replays and the 0.6B eager step are steady


def test_a_speedup_band_spans_the_two_spreads_only_when_one_is_noisy(stored_view):
    assert stored_view.speedup_band("qwen3-0.6b") is None  # 9% and 0%: the median says it
    low, high = stored_view.speedup_band("qwen3-8b")
    eager, graph = stored_view.eager("qwen3-8b").timing, stored_view.graph("qwen3-8b").timing
    assert low == pytest.approx(eager.p10_ms / graph.p90_ms) and high == pytest.approx(eager.p90_ms / graph.p10_ms)
    assert low < stored_view.speedup("qwen3-8b") < high


def test_the_stored_eager_steps_cannot_be_told_apart_but_the_replays_can(stored_view):
    from floorlab.core.timing import compare

    eager = compare(stored_view.eager("qwen3-8b"), stored_view.eager("qwen3-0.6b"))
    assert not eager.meaningful and eager.ratio == pytest.approx(1.68, abs=0.01)
    replay = compare(stored_view.graph("qwen3-8b"), stored_view.graph("qwen3-0.6b"))
    assert replay.meaningful
    prices = [stored_view.fixed_us_per_kernel(p) for p in ("qwen3-0.6b", "qwen3-8b")]
    assert all(2.5 < us < 3.5 for us in prices)  # a few µs per kernel at either end


def test_the_bench_saw_the_same_engine_at_0_8_of_its_small_eager_step(first_host_runs):
    from floorlab.core.reference import reference_run
    from floorlab.core.timing import compare

    bench = reference_run("h200-bench")
    change = compare(bench.row(sizes.BENCH_EAGER, "qwen3-8b", 1), bench.row(sizes.BENCH_EAGER, "qwen3-0.6b", 1))
    assert change.meaningful and change.ratio == pytest.approx(0.80, abs=0.01)


def test_graphs_matter_names_the_forgotten_fixed_cost_and_reads_numpy(stored_view):
    np = pytest.importorskip("numpy")
    model = sizes.fit_cost_model(stored_view)
    answer = bigger_models_checks.graphs_matter_answer(model, PRESETS, threshold=sizes.THRESHOLD,
                                                issue=stored_view.eager(model.preset).issue)
    gb = answer.layer_bytes / 1e9
    for right in (gb, np.float64(gb), np.float32(gb), round(gb, 2)):
        assert bigger_models_checks.check_graphs_matter(right, "none", answer).startswith("right"), right
    # the hint's own arithmetic, from the printed numbers: (issue ÷ threshold − kernels × µs) × GB/s
    fixed_ms = model.kernels_per_layer * model.overhead_us / 1e3
    hinted = (model.issue_ms_per_layer / sizes.THRESHOLD - fixed_ms) * model.bandwidth_gbps / 1e3
    assert bigger_models_checks.check_graphs_matter(hinted, "none", answer).startswith("right")
    bare = answer.wrong_gb[bigger_models_checks.NO_FIXED_COST]
    assert abs(bare / gb - 1) < 0.12  # close enough that 10% alone would nearly let it through
    verdict = bigger_models_checks.check_graphs_matter(bare, "none", answer)
    assert verdict.startswith("not yet") and bigger_models_checks.NO_FIXED_COST in verdict


def test_the_graphs_matter_answer_carries_the_noisy_issue_time_as_a_band(stored_view):
    model = sizes.fit_cost_model(stored_view)
    issue = stored_view.eager(model.preset).issue
    assert issue.noisy
    answer = bigger_models_checks.graphs_matter_answer(model, PRESETS, threshold=sizes.THRESHOLD, issue=issue)
    (low_gb, low_first), (high_gb, high_first) = answer.band["p10"], answer.band["p90"]
    assert low_gb < answer.layer_bytes / 1e9 < high_gb
    assert low_first == high_first == answer.first_preset == "none"
    text = bigger_models_checks.answer_graphs_matter(model, answer, stored_view)
    assert f"{low_gb:.2f} GB" in text and f"{high_gb:.2f} GB" in text and "under this model" in text
    assert "the host pays per layer" not in text.lower()
    steady = bigger_models_checks.graphs_matter_answer(model, PRESETS, threshold=sizes.THRESHOLD)
    assert steady.band == {}


def test_the_32b_multiple_names_the_fitted_presets_kernels(stored_view):
    np = pytest.importorskip("numpy")
    model = sizes.fit_cost_model(stored_view)
    right = model.graph_ms("qwen3-32b") / model.floor_ms("qwen3-32b")
    wrong = model.multiple_mistakes("qwen3-32b")
    [(mistake, value)] = wrong.items()
    assert "qwen3-8b" in mistake and abs(value - right) / right > 0.05
    # the hint's arithmetic: floor = bytes ÷ bandwidth, plus kernels per layer × layers × µs
    floor_ms = bytes_per_step(get_shape("qwen3-32b"), 1, 33) / (model.bandwidth_gbps * 1e6)
    hinted = (floor_ms + model.kernels_per_layer * 64 * model.overhead_us / 1e3) / floor_ms
    for answer in (right, np.float64(right), hinted):
        verdict = checks.check_number(answer, right, rel=0.05, hint="h", wrong=wrong)
        assert verdict.startswith("right"), verdict
    verdict = checks.check_number(value, right, rel=0.05, hint="h", wrong=wrong)
    assert verdict.startswith("not yet") and mistake in verdict
    [same] = model.multiple_mistakes("qwen3-8b").values()  # the fitted preset: no mistake to make
    assert same == pytest.approx(model.graph_ms("qwen3-8b") / model.floor_ms("qwen3-8b"))


def test_the_stored_sizes_are_named_as_stored_and_the_bench_growth_is_set_against_the_layers():
    from floorlab.core.reference import reference_run
    from floorlab.studies.bigger_models_readings import read_sizes

    reading = read_sizes(sizes.stored_sizes(), reference_run("h200-bench"))
    assert "this run" not in (reading.floor_wins + reading.gain + reading.replay)
    assert reading.floor_wins.startswith("On the stored run") and reading.gain.startswith("On the stored run")
    assert "than the layers' 1.29×" in reading.bench or "about the layers' 1.29×" in reading.bench


@pytest.mark.parametrize("growth, words", [
    ((3.24, 3.0, 3.5), "more than the layers' 1.29× alone"),
    ((1.0, 0.98, 1.02), "less than the layers' 1.29×"),
    ((1.3, 1.1, 1.5), "about the layers' 1.29×"),
])
def test_an_eager_growth_is_set_against_the_layers_every_way(growth, words):
    from floorlab.core.timing import Band
    from floorlab.studies.bigger_models_readings import against_layers

    assert words in against_layers(Band(*growth), (28, 36))


def test_the_price_per_kernel_and_equal_layers_are_read_from_a_simulated_run():
    import copy

    from floorlab.studies.bigger_models_readings import read_sizes

    view = sizes.stored_sizes()
    steady = read_sizes(view)
    assert "Within the 10%" in steady.price or "more than the 10%" in steady.price
    first, second = view.presets[:2]
    assert get_shape(first).num_layers == get_shape(second).num_layers  # 0.6B and 1.7B: 28 layers each
    same = copy.deepcopy(view)
    same.run.find("eager", second, 1).timing = copy.deepcopy(view.eager(first).timing)
    assert "have 28 layers, yet" not in read_sizes(same).eager
    slower = copy.deepcopy(view)
    timing = slower.run.find("eager", second, 1).timing
    for field in ("median_ms", "p10_ms", "p90_ms", "min_ms", "max_ms"):
        setattr(timing, field, getattr(view.eager(first).timing, field) * 3)
    assert f"Both {first} and {second} have 28 layers, yet" in read_sizes(slower).eager
