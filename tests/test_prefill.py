"""Prefill arithmetic (FLOPs, bytes, intensity, knees), the stream of shapes, and the sweeps.

Arithmetic is checked against counts made by hand; measurements only for structure, never
for speed, on a tiny model. The gpu-marked tests run the CUDA paths on a real card.
"""
import math

import pytest
import torch

from floorlab.core.bandwidth import MatmulRate, measure_bandwidths, measure_matmul_tflops
from floorlab.core.intensity import (
    fixed_cost_knee_tokens,
    flops_per_token,
    intensity,
    knee_intensity,
    observed_knee_tokens,
    prefill_bound_ms,
    prefill_flops,
    roofline_knee_tokens,
)
from floorlab.core.roofline import bytes_per_step, decode_floor, floor_ms, prefill_bytes
from floorlab.core.runs import Run
from floorlab.core.shapes import Qwen3Shape, get_shape
from floorlab.engine.model import build_model, with_context
from floorlab.studies.prefill import (
    ContextPoint,
    Knees,
    PrefillPoint,
    find_knees,
    format_contexts,
    format_sweep,
    kv_share,
    measure_decode_contexts,
    measure_prefill,
    padded_share,
    powers_of_two,
    prompt_stream,
    random_prompt,
    stored_contexts,
    stored_sweep,
    stream_shapes,
)

SMALL = get_shape("qwen3-0.6b")
TINY = Qwen3Shape(64, 128, 2, 4, 2, 16, 100, True, name="tiny")
BANDWIDTHS = {"copy": 4000.0, "read": 4300.0}


# ---- the arithmetic ---------------------------------------------------------------------

def test_matmul_params_are_the_layers_matrices_and_the_head():
    layer = 1024 * (16 + 2 * 8) * 128 + 16 * 128 * 1024 + 3 * 1024 * 3072
    assert SMALL.matmul_param_count() == 28 * layer + 151936 * 1024
    # everything but the norms: the tied table is the head
    norms = 28 * (2 * 1024 + 2 * 128) + 1024
    assert SMALL.matmul_param_count() == SMALL.param_count() - norms


def test_an_untied_input_table_does_no_arithmetic():
    big = get_shape("qwen3-8b")
    table = big.vocab_size * big.hidden_size
    assert big.matmul_param_count() < big.param_count() - table + 1


def test_flops_per_token_adds_attention_per_visible_token():
    base = flops_per_token(SMALL, 0)
    assert base == 2 * SMALL.matmul_param_count()
    per_token = 4 * 28 * 16 * 128
    assert flops_per_token(SMALL, 100) - base == 100 * per_token


def test_prefill_flops_count_the_causal_triangle():
    per_token = 4 * TINY.num_layers * TINY.num_heads * TINY.head_dim
    matmul = 2 * TINY.matmul_param_count()
    assert prefill_flops(TINY, 1) == flops_per_token(TINY, 1)
    assert prefill_flops(TINY, 3) == 3 * matmul + per_token * (1 + 2 + 3)
    assert prefill_flops(TINY, 3, batch=2) == 2 * prefill_flops(TINY, 3)
    assert prefill_flops(TINY, 5) == sum(flops_per_token(TINY, t + 1) for t in range(5))


def test_prefill_bytes_read_the_weights_once_and_write_the_cache():
    n = 256
    assert prefill_bytes(SMALL, n) == SMALL.weight_bytes() + n * 114_688
    assert prefill_bytes(SMALL, 1) == bytes_per_step(SMALL, 1, 1)
    big = get_shape("qwen3-8b")  # an untied table: only the gathered rows
    assert prefill_bytes(big, n) == big.streamed_weight_bytes(n) + n * big.kv_bytes_per_token()


@pytest.mark.parametrize("bad", [0, -1, 2.5])
def test_prefill_refuses_prompts_that_are_not_whole_and_positive(bad):
    with pytest.raises(ValueError, match="prompt_tokens"):
        prefill_bytes(SMALL, bad)
    with pytest.raises(ValueError, match="prompt_tokens"):
        prefill_flops(SMALL, bad)


def test_a_bf16_prefill_does_about_one_flop_per_byte_per_token():
    for n in (1, 16, 256):
        assert intensity(prefill_flops(SMALL, n), prefill_bytes(SMALL, n)) == pytest.approx(n, rel=0.03)


def test_knee_is_peak_over_bandwidth():
    assert knee_intensity(800.0, 4000.0) == pytest.approx(200.0)
    with pytest.raises(ValueError, match="measured"):
        knee_intensity(0.0, 4000.0)


def test_roofline_knee_is_the_first_compute_bound_prompt():
    n = roofline_knee_tokens(SMALL, peak_tflops=800.0, bandwidth_gbps=4000.0)
    knee = knee_intensity(800.0, 4000.0)
    assert intensity(prefill_flops(SMALL, n), prefill_bytes(SMALL, n)) >= knee
    assert intensity(prefill_flops(SMALL, n - 1), prefill_bytes(SMALL, n - 1)) < knee
    assert abs(n - knee) <= 0.05 * knee  # about the knee's height, in bf16


def test_fixed_cost_knee_moves_right_with_the_fixed_cost():
    at_floor = floor_ms(prefill_bytes(SMALL, 1), 4000.0)
    near = fixed_cost_knee_tokens(SMALL, peak_tflops=800.0, step_ms=at_floor)
    far = fixed_cost_knee_tokens(SMALL, peak_tflops=800.0, step_ms=10 * at_floor)
    assert prefill_flops(SMALL, near) / 800e12 * 1e3 >= at_floor
    assert prefill_flops(SMALL, near - 1) / 800e12 * 1e3 < at_floor
    assert near == pytest.approx(roofline_knee_tokens(SMALL, peak_tflops=800.0,
                                                      bandwidth_gbps=4000.0), rel=0.05)
    assert 8 * near <= far <= 10 * near


def test_observed_knee_is_where_a_fixed_plus_growing_cost_evens_out():
    fixed, per = 10.0, 0.01  # ms: the parts are equal at 1000 tokens
    tokens = [4**k for k in range(9)]
    per_token = [(fixed + per * n) / n for n in tokens]
    assert observed_knee_tokens(tokens, per_token) == pytest.approx(1000, rel=0.35)


def test_observed_knee_is_none_while_still_falling():
    tokens = [1, 4, 16, 64]
    assert observed_knee_tokens(tokens, [10.0 / n for n in tokens]) is None


def test_observed_knee_at_the_start_when_flat_from_the_first_point():
    assert observed_knee_tokens([1, 4, 16], [1.0, 0.9, 0.8]) == 1.0


def test_prefill_bound_is_the_larger_of_bytes_and_flops():
    slow = prefill_bound_ms(SMALL, 4096, bandwidth_gbps=4000.0, peak_tflops=1.0)
    assert slow == pytest.approx(prefill_flops(SMALL, 4096) / 1e12 * 1e3)
    fast = prefill_bound_ms(SMALL, 1, bandwidth_gbps=4000.0, peak_tflops=1e6)
    assert fast == pytest.approx(floor_ms(prefill_bytes(SMALL, 1), 4000.0))


# ---- a stream of prompts -------------------------------------------------------------

def test_prompt_stream_is_seeded_and_in_range():
    a, b = prompt_stream(200, seed=3), prompt_stream(200, seed=3)
    assert a == b != prompt_stream(200, seed=4)
    assert all(16 <= n <= 8192 for n in a)


def test_powers_of_two_reach_the_longest():
    assert powers_of_two(8192) == tuple(2**k for k in range(14))
    assert powers_of_two(100)[-1] == 128


def test_padding_to_buckets_counts_the_extra_tokens():
    assert padded_share([3, 4], (4, 8)) == pytest.approx(1 / 7)
    with pytest.raises(ValueError, match="buckets"):
        padded_share([9], (4, 8))


def test_stream_shapes_count_distinct_prompts_and_buckets():
    shapes = stream_shapes([16, 16, 17, 100, 1000])
    assert (shapes.requests, shapes.distinct, shapes.buckets_used) == (5, 4, 4)
    assert shapes.padded_share == pytest.approx((16 + 16 + 32 + 128 + 1024) / 1149 - 1)


@pytest.mark.parametrize("call, name, fix", [
    (lambda: kv_share(None), "floor", "fl.decode_floor"),
    (lambda: kv_share({"batch": 1}), "floor", "fl.decode_floor"),
    (lambda: stream_shapes([16, 0, 32]), "lengths", "prompt lengths in tokens"),
    (lambda: stream_shapes("16 32"), "lengths", "prompt lengths in tokens"),
    (lambda: stream_shapes([16, 32], buckets=[64, 2.5]), "buckets", "bucket sizes in tokens"),
    (lambda: random_prompt(None, 4), "model", "fl.build_model"),
    (lambda: random_prompt(build_model(TINY, max_batch=1, max_context=8), 0), "prompt_tokens", "in tokens"),
    (lambda: random_prompt(build_model(TINY, max_batch=1, max_context=8), 4, seed=-1), "seed", "seed the prompt"),
])
def test_the_stream_and_prompt_helpers_refuse_a_bad_argument_by_name_and_say_the_fix(call, name, fix):
    with pytest.raises(ValueError, match=name) as refused:
        call()
    assert fix in str(refused.value)


# ---- measurements on a tiny model ------------------------------------------------------

def test_matmul_rate_on_the_cpu_has_a_spread_and_a_dtype():
    rate = measure_matmul_tflops("cpu", size=64, repeats=3)
    assert isinstance(rate, MatmulRate)
    assert rate.dtype == "float32" and rate.size == 64 and rate.device == "cpu"
    assert rate.p10_tflops <= rate.tflops <= rate.p90_tflops
    assert MatmulRate.from_dict(rate.to_dict()) == rate
    with pytest.raises(ValueError, match="size"):
        measure_matmul_tflops("cpu", size=0)


def test_with_context_shares_the_weights_and_decodes_the_same():
    model = build_model(TINY, dtype=torch.float32, max_batch=1, max_context=16)
    twin = with_context(model, 16)
    assert twin.max_context == 16 and twin.k_cache.shape[3] == 16
    assert twin.layers[0].qkv.data_ptr() == model.layers[0].qkv.data_ptr()
    prompt = torch.tensor([[1, 2, 3]])
    tokens, positions = torch.tensor([4]), torch.tensor([3])
    model.prefill(prompt)
    twin.prefill(prompt)
    assert torch.equal(model.decode_step(tokens, positions), twin.decode_step(tokens, positions))


def test_prefill_sweep_records_one_point_per_length():
    model = build_model(TINY, dtype=torch.float32, max_batch=1, max_context=16)
    points = measure_prefill(model, (1, 4, 16), warmup=1, repeats=2)
    assert [p.prompt_tokens for p in points] == [1, 4, 16]
    assert all(p.path == "eager" and p.timing.median_ms > 0 for p in points)
    assert points[2].flops == prefill_flops(TINY, 16)
    assert points[2].bytes_moved == prefill_bytes(TINY, 16, dtype_bytes=4)
    assert points[2].per_token().median_ms == pytest.approx(points[2].ms_per_token)
    assert PrefillPoint.from_dict(points[1].to_dict()) == points[1]
    rows = [line for line in format_sweep(points, peak_tflops=1.0).splitlines() if not line.startswith("* noisy")]
    assert len(rows) == 4  # a header and one row per length; a noisy timing adds a line below
    knees = find_knees(TINY, points, peak_tflops=1.0, bandwidth_gbps=10.0, dtype_bytes=4)
    assert isinstance(knees, Knees) and knees.longest_tokens == 16
    assert all(len(line) <= 84 for line in knees.summary().splitlines())
    with pytest.raises(ValueError, match="max_context"):
        measure_prefill(model, (32,), warmup=1, repeats=1)
    with pytest.raises(ValueError, match="CUDA"):
        measure_prefill(model, (1,), warmup=1, repeats=1, graphs=True)


def test_decode_at_contexts_uses_a_cache_of_that_length():
    model = build_model(TINY, dtype=torch.float32, max_batch=1, max_context=8)
    bandwidths = measure_bandwidths("cpu", repeats=2, size_mb=4)
    points = measure_decode_contexts(model, (8, 32), bandwidths=bandwidths, warmup=1, repeats=2)
    assert [p.context_tokens for p in points] == [8, 32]
    assert points[1].floor.cache_tokens == 32
    assert points[1].floor == decode_floor(TINY, batch=1, prompt_tokens=31, bandwidths=bandwidths,
                                           cache_tokens=32, dtype_bytes=4)
    assert points[1].kv_share == kv_share(points[1].floor) > points[0].kv_share
    assert ContextPoint.from_dict(points[0].to_dict()).row.timing == points[0].row.timing
    assert all(len(line) <= 84 for line in format_contexts(points).splitlines())


def test_a_stored_run_gives_its_sweeps_and_contexts_back():
    model = build_model(TINY, dtype=torch.float32, max_batch=1, max_context=8)
    points = measure_prefill(model, (1, 4), warmup=1, repeats=1)
    bandwidths = measure_bandwidths("cpu", repeats=1, size_mb=4)
    contexts = measure_decode_contexts(model, (8,), bandwidths=bandwidths, warmup=1, repeats=1)
    run = Run(kind="chapter:prefill", stamp={}, device={"kind": "cpu"},
              facts={"prefill": [p.to_dict() for p in points],
                     "contexts": [c.to_dict() for c in contexts]})
    back = Run.from_dict(run.to_dict())
    assert stored_sweep(back, "eager") == points
    assert stored_sweep(back, "graph replay") == []
    assert [c.floor for c in stored_contexts(back)] == [contexts[0].floor]


def test_kv_share_grows_with_the_context():
    shares = [kv_share(decode_floor(SMALL, batch=1, prompt_tokens=n - 1, bandwidths=BANDWIDTHS))
              for n in (128, 1024, 8192, 32768)]
    assert shares == sorted(shares)
    assert shares[-1] == pytest.approx(32768 * 114_688 / (32768 * 114_688 + SMALL.weight_bytes()))
    assert math.isclose(shares[0], 128 * 114_688 / (128 * 114_688 + SMALL.weight_bytes()))


# ---- on a CUDA GPU ------------------------------------------------------------------------

@pytest.mark.gpu
def test_cuda_matmul_rate_defaults_to_bf16():
    rate = measure_matmul_tflops("cuda", size=1024, repeats=3)
    assert rate.dtype == "bfloat16" and rate.device.startswith("cuda")
    assert rate.tflops > 0


@pytest.mark.gpu
def test_graphed_prefill_and_decode_contexts_run_on_cuda():
    model = build_model(TINY, device="cuda", max_batch=1, max_context=64)
    eager = measure_prefill(model, (1, 16, 64), warmup=1, repeats=3)
    graphed = measure_prefill(model, (1, 16, 64), warmup=1, repeats=3, graphs=True)
    assert [p.path for p in graphed] == ["graph replay"] * 3
    assert [p.prompt_tokens for p in graphed] == [p.prompt_tokens for p in eager]
    prompt = torch.arange(16, device="cuda")[None]
    assert torch.isfinite(model.prefill(prompt).float()).all()  # the sweep left it usable
    bandwidths = measure_bandwidths("cuda", repeats=2, size_mb=64)
    points = measure_decode_contexts(model, (16, 64), bandwidths=bandwidths, warmup=2, repeats=3,
                                     graphs=True)
    assert [p.context_tokens for p in points] == [16, 64]
    assert all(p.row.path == "graph replay" and p.row.median_ms > 0 for p in points)


# ---- noise said where it is printed, and the line through decode at contexts --------------

def _point(tokens: int, samples: list[float]) -> PrefillPoint:
    from floorlab.core.timing import Timing

    return PrefillPoint("eager", tokens, Timing.from_samples(samples), prefill_flops(TINY, tokens),
                        prefill_bytes(TINY, tokens))


def test_a_noisy_prefill_is_starred_and_its_band_printed_under_the_table():
    steady, noisy = _point(1, [1.0, 1.01, 0.99, 1.0]), _point(4, [1.0, 2.0, 3.0, 1.1, 2.9])
    text = format_sweep([steady, noisy], peak_tflops=1.0)
    rows = text.splitlines()
    assert "*" not in rows[1] and "2.0*" in rows[2]
    assert rows[-1].startswith("* noisy: 4 tokens, p10-p90") and "of its median" in rows[-1]
    knees = find_knees(TINY, [noisy, steady], peak_tflops=1.0, bandwidth_gbps=10.0)
    assert "noisy" in knees.summary().splitlines()[-1]
    assert find_knees(TINY, [steady, noisy], peak_tflops=1.0, bandwidth_gbps=10.0).step_note == ""


def test_a_line_through_points_gives_its_intercept_slope_and_worst_miss():
    from floorlab.core.intensity import line_fit

    intercept, slope, worst = line_fit([1, 2, 3], [3.0, 5.0, 7.0])
    assert (intercept, slope, worst) == (pytest.approx(1.0), pytest.approx(2.0), pytest.approx(0.0, abs=1e-12))
    with pytest.raises(ValueError, match="two x values"):
        line_fit([1, 1], [2.0, 3.0])


def test_the_stored_contexts_lie_on_a_line_that_reads_the_cache_far_below_the_bandwidth(first_host_runs):
    from floorlab.core.reference import stored_run
    from floorlab.studies.prefill import REFERENCE
    from floorlab.studies.prefill_readings import context_cost

    run = stored_run(REFERENCE)
    points = stored_contexts(run)
    multiples = [p.row.x_floor for p in points]
    assert multiples == sorted(multiples) and multiples[-1] > 2 * multiples[0]  # further from the floor
    cost = context_cost(points)
    assert cost.apart and cost.worst_fit < 0.05
    assert cost.per_token_us == pytest.approx(0.537, abs=0.01)
    assert cost.cache_gbps == pytest.approx(SMALL.kv_bytes_per_token() / (cost.per_token_us * 1e3), rel=1e-9)
    assert cost.cache_gbps < 0.1 * run.bandwidths.floor_gbps


def test_attention_is_what_parts_the_two_ratios_of_the_stored_knees(first_host_runs):
    from floorlab.core.intensity import attention_share, matmul_only_tokens
    from floorlab.core.reference import stored_run
    from floorlab.studies.prefill import REFERENCE, stored_rate

    run = stored_run(REFERENCE)
    peak, floor = stored_rate(run).tflops, run.floor()
    knees = find_knees(SMALL, stored_sweep(run, "eager"), peak_tflops=peak,
                       bandwidth_gbps=run.bandwidths.floor_gbps)
    knee_ratio = knees.fixed_cost_tokens / knees.roofline_tokens
    step_ratio = knees.step_ms / floor.floor_ms
    assert knee_ratio == pytest.approx(17.9, abs=0.1) and step_ratio == pytest.approx(23.2, abs=0.1)
    straight = matmul_only_tokens(SMALL, peak_tflops=peak, step_ms=knees.step_ms) / knees.roofline_tokens
    assert abs(straight / step_ratio - 1) < 0.03  # without attention the ratios nearly agree
    assert attention_share(SMALL, knees.fixed_cost_tokens) > 10 * attention_share(SMALL, knees.roofline_tokens)


# ---- the challenges: the hint's own arithmetic passes, each plausible mistake is named -------

def _bandwidths(copy_gbps: float, read_gbps: float):
    from floorlab.core.bandwidth import Bandwidth, Bandwidths

    return Bandwidths(copy=Bandwidth("copy", copy_gbps, copy_gbps, copy_gbps, 1, "stand-in"),
                      read=Bandwidth("read", read_gbps, read_gbps, read_gbps, 1, "stand-in"))


H200 = {"peak_tflops": 777.0, "bandwidths": _bandwidths(4221.5, 4338.8)}


def test_the_knee_check_takes_the_hints_arithmetic_and_names_the_copy_bandwidth():
    np = pytest.importorskip("numpy")
    from floorlab.core.checks import check_number
    from floorlab.studies.prefill_checks import knee_answer

    rights, wrong = knee_answer(SMALL, **H200)
    hinted = 777.0e12 / 4338.8e9  # the rate over the bandwidth, n FLOPs per byte at n tokens
    counted = roofline_knee_tokens(SMALL, peak_tflops=777.0, bandwidth_gbps=4338.8)
    for answer in (hinted, counted, np.float64(hinted), np.int64(counted), np.float32(hinted), round(hinted)):
        verdict = check_number(answer, rights, wrong=wrong, rel=0.10, hint="h")
        assert verdict.startswith("right"), (answer, verdict)
    copy = 777.0e12 / 4221.5e9
    assert abs(copy / counted - 1) < 0.10  # inside the old tolerance: it used to pass
    verdict = check_number(copy, rights, wrong=wrong, rel=0.10, hint="h")
    assert verdict.startswith("not yet") and "the copy bandwidth instead of the read bandwidth" in verdict
    verdict = check_number(hinted / 2, rights, wrong=wrong, rel=0.10, hint="h")
    assert verdict.startswith("not yet") and "2 FLOPs per byte" in verdict
    assert check_number(None, rights, wrong=wrong, rel=0.10, hint="h").startswith("not attempted")
    assert check_number("180 tokens", rights, wrong=wrong, rel=0.10, hint="h").startswith("not yet")


def test_the_8b_floor_check_names_the_whole_table_and_the_copy_bandwidth():
    np = pytest.importorskip("numpy")
    from floorlab.core.checks import check_number
    from floorlab.studies.prefill_checks import floor_mistakes

    big, bandwidths = get_shape("qwen3-8b"), H200["bandwidths"]
    right = decode_floor(big, batch=1, prompt_tokens=32767, bandwidths=bandwidths).floor_ms
    wrong = floor_mistakes(big, 32768, bandwidths)
    # the hint: 32768 tokens of cache added to the streamed weights, over the bandwidth
    hinted = (big.streamed_weight_bytes(1) + 32768 * big.kv_bytes_per_token()) / 4338.8e9 * 1e3
    for answer in (right, hinted, np.float64(right), np.float32(hinted)):
        assert check_number(answer, right, rel=0.03, hint="h", wrong=wrong).startswith("right"), answer
    copy = wrong["the copy bandwidth instead of the read bandwidth"]
    assert abs(copy / right - 1) < 0.03  # inside the old tolerance: it used to pass
    table = wrong["the whole input table instead of the one row looked up"]
    assert table == pytest.approx((big.weight_bytes() + 32768 * big.kv_bytes_per_token()) / 4338.8e9 * 1e3)
    for mistake, value in wrong.items():
        verdict = check_number(value, right, rel=0.03, hint="h", wrong=wrong)
        assert verdict.startswith("not yet") and mistake in verdict
    assert list(floor_mistakes(SMALL, 32768, bandwidths)) == ["the copy bandwidth instead of the read bandwidth"]


def test_the_fixed_cost_knee_check_takes_the_quadratic_and_names_attention_left_out():
    np = pytest.importorskip("numpy")
    from floorlab.core.checks import check_number
    from floorlab.core.intensity import fixed_cost_root_tokens, matmul_only_tokens
    from floorlab.studies.prefill_checks import fixed_cost_answer

    step_ms = 6.4594  # the stored H200's one-token eager prefill
    rights, wrong = fixed_cost_answer(SMALL, peak_tflops=777.0, step_ms=step_ms)
    # the hint, from the printed numbers: n × 2P + n(n+1)/2 × 4 L H d = time × rate, solved for n
    budget, per_token = step_ms * 1e-3 * 777.0e12, 2 * SMALL.matmul_param_count()
    pair = 4 * SMALL.num_layers * SMALL.num_heads * SMALL.head_dim
    a, b = pair / 2, per_token + pair / 2
    hinted = (-b + math.sqrt(b * b + 4 * a * budget)) / (2 * a)
    assert prefill_flops(SMALL, math.ceil(hinted)) >= budget > prefill_flops(SMALL, math.floor(hinted))
    assert hinted == pytest.approx(fixed_cost_root_tokens(SMALL, peak_tflops=777.0, step_ms=step_ms))
    first = fixed_cost_knee_tokens(SMALL, peak_tflops=777.0, step_ms=step_ms)
    for answer in (hinted, first, np.float64(hinted), np.int64(first), round(hinted)):
        verdict = check_number(answer, rights, wrong=wrong, rel=0.10, hint="h")
        assert verdict.startswith("right"), (answer, verdict)
    straight = budget / per_token  # what the old printed hint, "about n × 2P", led to
    assert straight == pytest.approx(matmul_only_tokens(SMALL, peak_tflops=777.0, step_ms=step_ms))
    assert abs(straight / first - 1) > 0.10  # the old check refused its own hint's number
    verdict = check_number(straight, rights, wrong=wrong, rel=0.10, hint="h")
    assert verdict.startswith("not yet") and "without attention" in verdict


def test_a_mistake_no_check_could_tell_from_the_right_answer_is_not_named():
    from floorlab.studies.prefill_checks import knee_answer

    rights, wrong = knee_answer(SMALL, peak_tflops=777.0, bandwidths=_bandwidths(4330.0, 4338.8))
    assert not any("bandwidth" in mistake for mistake in wrong)  # 0.2% apart: not a mistake
    with pytest.raises(ValueError, match="step_ms"):
        from floorlab.core.intensity import fixed_cost_root_tokens
        fixed_cost_root_tokens(SMALL, peak_tflops=777.0, step_ms=0.0)

@pytest.mark.parametrize("call, name", [
    (lambda: knee_intensity(float("nan"), 4000.0), "peak_tflops"),
    (lambda: knee_intensity(800.0, float("inf")), "bandwidth_gbps"),
    (lambda: knee_intensity("800", 4000.0), "peak_tflops"),
    (lambda: intensity(1e9, 0), "bytes_moved"),
    (lambda: intensity(float("nan"), 1e9), "flops"),
    (lambda: fixed_cost_knee_tokens(SMALL, peak_tflops=0.0, step_ms=1.0), "peak_tflops"),
    (lambda: fixed_cost_knee_tokens(SMALL, peak_tflops=800.0, step_ms=float("nan")), "step_ms"),
    (lambda: prefill_bound_ms(SMALL, 16, bandwidth_gbps=4000.0, peak_tflops=-1.0), "peak_tflops"),
    (lambda: observed_knee_tokens([1, 4, 16], [1.0, float("nan"), 0.5]), "ms_per_token"),
    (lambda: observed_knee_tokens([0, 4, 16], [1.0, 0.7, 0.5]), "prompt_tokens"),
    (lambda: prefill_flops(SMALL, 16, batch=0), "batch"),
    (lambda: prefill_bytes(SMALL, 16, batch=1.5), "batch"),
])
def test_the_prefill_arithmetic_refuses_nan_zero_and_wrong_types_by_name(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_decode_is_placed_against_this_machines_knee():
    from floorlab.core.intensity import decode_against_knee

    assert "far below" in decode_against_knee(1.0, 230.0)  # an H200: decode is memory-bound
    cpu = decode_against_knee(1.0, 0.8)  # a CPU's slow bf16 arithmetic: the knee sits at decode
    assert "does not sit below" in cpu and "GPU" in cpu
    with pytest.raises(ValueError, match="knee_flops_per_byte"):
        decode_against_knee(1.0, 0)


@pytest.mark.parametrize(("decode_ms", "prefill_ms", "says"), [
    ((9.0, 10.0, 11.0), (5.0, 6.0, 7.0), "costs 107× as much"),  # 64 tokens: 0.094 ms a token
    ((0.01, 0.011, 0.012), (5.0, 6.0, 7.0), "dearer than a decode token, beyond both spreads"),
    ((0.05, 0.09, 0.2), (5.0, 6.0, 7.0), "cannot tell which costs more"),
])
def test_a_prefill_token_against_a_decode_token_is_read_by_the_spreads(decode_ms, prefill_ms, says):
    """A busy machine can make a prefill token dearer: the chapter says so instead of stopping."""
    from types import SimpleNamespace

    from floorlab.core.timing import Band
    from floorlab.studies.prefill_readings import token_cost_reading

    decode = SimpleNamespace(timing=Band(decode_ms[1], decode_ms[0], decode_ms[2]))
    longest = SimpleNamespace(timing=Band(prefill_ms[1], prefill_ms[0], prefill_ms[2]), prompt_tokens=64)
    assert says in token_cost_reading(decode, longest)


@pytest.mark.parametrize("observed, words", [
    (300, "nearer the roofline's"), (3000, "nearer the fixed cost's"), (900, "cannot say which it follows"),
    (None, "still fell at the longest prompt"),
])
def test_the_observed_knee_is_read_against_both_predictions(observed, words):
    from floorlab.studies.prefill import Knees
    from floorlab.studies.prefill_readings import nearer_reading

    knees = Knees("eager", roofline_tokens=263, step_ms=6.2, fixed_cost_tokens=3217, observed_tokens=observed,
                  longest_tokens=4096)
    assert words in nearer_reading(knees)


@pytest.mark.parametrize("straight_tokens, at_fixed, words, answer", [
    (31.0, 0.001, "Attention moves nothing here: at 31 tokens it is under 1%", "about the same prompt"),
    (4000.0, 0.2, "Attention makes the difference", "too many: at 31 tokens attention is already 20%"),
])
def test_the_knee_says_whether_attention_moves_it(straight_tokens, at_fixed, words, answer):
    from floorlab.studies.prefill import Knees
    from floorlab.studies.prefill_readings import knee_reading, without_attention_answer

    knees = Knees("eager", roofline_tokens=10, step_ms=6.2, fixed_cost_tokens=31, observed_tokens=21,
                  longest_tokens=4096)
    straight = straight_tokens / knees.roofline_tokens
    ratios = {"straight_tokens": straight_tokens, "straight": straight, "step": straight,
              "at_fixed": at_fixed, "at_roof": at_fixed / 3}
    agreement, attention = knee_reading(ratios, knees)
    assert agreement == "close to" and words in attention and "0% of a prefill's at" not in attention
    assert answer in without_attention_answer(ratios, knees)
