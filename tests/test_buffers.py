"""Shared buffers: a kept view is overwritten, two callers on one runner corrupt each other,
and the fixes hold; on the CPU stand-in here, on CUDA graphs where a GPU is present."""
import pytest
import torch

from floorlab.core import checks
from floorlab.core.shapes import Qwen3Shape
from floorlab.engine.buckets import SharedBufferError
from floorlab.engine.graphs import GraphRunner
from floorlab.engine.model import build_model, prefill_random
from floorlab.studies import shared_buffers as buffers
from floorlab.studies import shared_buffers_checks
from floorlab.studies.shared_buffers import (
    LockedRunner,
    StandInRunner,
    between,
    keep_first,
    request,
    static_runner,
)

PROMPT = 8


def _shape():
    return Qwen3Shape(hidden_size=128, intermediate_size=256, num_layers=2, num_heads=4,
                      num_kv_heads=2, head_dim=32, vocab_size=512, tie_word_embeddings=True,
                      name="buffers-test")


def _setup(device, dtype):
    """A small model, three runners on it (one debug), and two requests at the same position."""
    torch.manual_seed(0)
    model = build_model(_shape(), device=device, dtype=dtype, max_batch=4, max_context=32)
    shared = static_runner(model, (1, 2, 4))
    other = static_runner(model, (1,))
    debug = static_runner(model, (1,), debug=True)
    prompt, tokens, positions = prefill_random(model, 1, PROMPT)  # after every capture
    a = (tokens, positions)
    b = ((tokens + 1) % model.shape.vocab_size, positions)
    return model, shared, other, debug, a, b


@pytest.fixture(scope="module", params=[
    pytest.param("cpu", id="stand-in"),
    pytest.param("cuda", id="cuda-graphs", marks=pytest.mark.gpu),
])
def setup(request):
    device = request.param
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    yield _setup(device, dtype)
    if device == "cuda":
        torch.cuda.empty_cache()


def test_the_runner_kind_follows_the_device(setup):
    model, shared, *_ = setup
    expected = StandInRunner if model.device.type == "cpu" else GraphRunner
    assert type(shared) is expected
    assert buffers.runner_kind(shared) in ("CUDA graphs", "the stand-in (no CUDA here)")


def test_a_float_token_is_refused_never_truncated_into_the_static_buffers(setup):
    model, shared, _, _, a, _ = setup
    shared.step(*a)
    held = shared.static_tokens.clone()
    with pytest.raises(ValueError, match="tokens has dtype torch.float32.*not rounded"):
        shared.step(torch.full(a[0].shape, 99.7, device=model.device), a[1])
    with pytest.raises(ValueError, match="tokens has 1 rows but positions has 2"):
        shared.step(a[0], a[1].repeat(2))
    assert torch.equal(shared.static_tokens, held)  # the copy-in never happened


def test_an_id_past_the_vocabulary_is_refused_on_the_host(setup):
    model, shared, _, _, a, _ = setup
    vocab = model.shape.vocab_size
    with pytest.raises(ValueError, match=f"token id {vocab} is outside the vocabulary of {vocab} ids"):
        shared.step(torch.tensor([vocab]), a[1].cpu())  # host values are read before the copy-in


def test_two_requests_differ(setup):
    _, shared, _, _, a, b = setup
    assert not torch.equal(shared.step(*a), shared.step(*b))


def test_step_matches_the_eager_step(setup):
    model, shared, _, _, a, _ = setup
    with torch.no_grad():
        assert torch.equal(shared.step(*a), model.decode_step(*a))


def test_a_kept_view_holds_the_next_requests_logits(setup):
    _, shared, _, _, a, b = setup
    kept = keep_first(shared, a, [b])
    assert kept.changed and not kept.poisoned
    assert kept.holds() == 0
    assert kept.kept.data_ptr() == shared.static_outputs[1].data_ptr()


@pytest.mark.parametrize("keep", ["copy", "clone"])
def test_a_copy_keeps_the_first_logits(setup, keep):
    _, shared, _, _, a, b = setup
    kept = keep_first(shared, a, [b, b], keep=keep)
    assert not kept.changed and kept.holds() is None


def test_a_kept_view_follows_its_own_bucket_only(setup):
    model, shared, *_ = setup
    pos = PROMPT
    first = request(model, 1, pos, seed=1)
    later = [request(model, 2, pos, seed=2), request(model, 1, pos, seed=3),
             request(model, 3, pos, seed=4)]
    kept = keep_first(shared, first, later)
    # the last request that replayed bucket 1; static_runner gives each graph its own memory
    # pool, since in a shared pool the batch-4 replay may also write where this view points
    assert kept.holds() == 1


def test_a_debug_runner_poisons_a_kept_view_at_once(setup):
    _, _, _, debug, a, b = setup
    with debug.borrow(*a) as logits:
        kept = logits
        assert not torch.isnan(logits).any()
    assert torch.isnan(kept).all()
    result = keep_first(debug, a, [b])
    assert result.poisoned and result.changed
    assert not torch.isnan(debug.step(*a)).any()  # what step() hands back is the caller's copy


def test_a_debug_runner_refuses_a_nested_caller(setup):
    _, _, _, debug, a, b = setup
    with debug.borrow(*a):
        with pytest.raises(SharedBufferError, match="own runner"):
            debug.step(*b)
    debug.step(*b)  # free again once the block ends


def test_one_shared_runner_gives_a_bs_logits(setup):
    _, shared, _, _, a, b = setup
    result = between("shared", shared, shared, a, b)
    assert result.a_got_b and not result.a_is_own
    assert result.b_is_own
    assert "A: B's logits; B: its own logits" in result.verdict()


def test_one_runner_each_keeps_both_answers(setup):
    _, shared, other, _, a, b = setup
    result = between("one each", shared, other, a, b)
    assert result.a_is_own and result.b_is_own


def test_a_lock_keeps_both_answers_and_made_b_wait(setup):
    _, shared, _, _, a, b = setup
    locked = LockedRunner(shared)
    result = between("locked", locked, locked, a, b)
    assert result.a_is_own and result.b_is_own
    assert locked.waited.is_set()


def test_a_debug_runner_refuses_b_and_keeps_a(setup):
    _, _, _, debug, a, b = setup
    result = between("debug", debug, debug, a, b)
    assert result.a_is_own and result.b is None
    assert result.b_error.startswith("SharedBufferError")


@pytest.mark.gpu
def test_one_shared_runner_corrupts_across_two_streams_too():
    model, shared, other, _, a, b = _setup("cuda", torch.bfloat16)
    assert between("streams", shared, shared, a, b, streams=True).a_got_b
    both = between("streams, one each", shared, other, a, b, streams=True)
    assert both.a_is_own and both.b_is_own
    locked = LockedRunner(shared)
    held = between("streams, locked", locked, locked, a, b, streams=True)
    assert held.a_is_own and held.b_is_own


def test_the_pause_is_removed_after_between(setup):
    _, shared, _, _, a, b = setup
    between("shared", shared, shared, a, b)
    assert "_load_inputs" not in vars(shared)


def test_the_snippets_that_keep_their_logits(setup):
    _, shared, _, _, a, b = setup
    keeps = shared_buffers_checks.snippets_keep(shared, a, b)
    assert keeps == {"a": True, "b": False, "c": True, "d": False, "e": False, "f": True}
    assert shared_buffers_checks.check_safe_snippets(None, keeps) == checks.NOT_ATTEMPTED
    assert shared_buffers_checks.check_safe_snippets({"a", "c", "f"}, keeps).startswith("right")
    assert shared_buffers_checks.check_safe_snippets("acf", keeps).startswith("right")
    assert shared_buffers_checks.check_safe_snippets({"a", "b"}, keeps).startswith("not yet")
    assert "not a snippet" in shared_buffers_checks.check_safe_snippets({"z"}, keeps)


def test_the_kept_holds_check():
    names = ("A", "B", "C", "D")
    assert shared_buffers_checks.check_kept_holds(None, "C", names) == checks.NOT_ATTEMPTED
    assert shared_buffers_checks.check_kept_holds("c", "C", names).startswith("right")
    assert shared_buffers_checks.check_kept_holds("D", "C", names).startswith("not yet")
    assert shared_buffers_checks.check_kept_holds(3, "C", names).startswith("not yet")


def test_keep_first_rejects_an_unknown_keep(setup):
    _, shared, _, _, a, b = setup
    with pytest.raises(ValueError, match="keep must be one of"):
        keep_first(shared, a, [b], keep="reference")


# ---- the checks: any type of answer, plausible wrong answers refused by name

def test_the_snippet_check_reads_numpy_letters(setup):
    import numpy as np

    _, shared, _, _, a, b = setup
    keeps = shared_buffers_checks.snippets_keep(shared, a, b)
    for answer in (np.array(["a", "c", "f"]), [np.str_("A"), "c", "f"], np.str_("acf")):
        assert shared_buffers_checks.check_safe_snippets(answer, keeps).startswith("right")
    verdict = shared_buffers_checks.check_safe_snippets({"a", "c", "e", "f"}, keeps)
    assert verdict.startswith("not yet") and "e still point" in verdict


def test_the_kept_holds_check_says_why_each_wrong_name_is_wrong():
    import numpy as np

    names, buckets = ("A", "B", "C", "D"), (1, 2, 1, 4)  # the chapter's batches 1, 2, 1, 3
    why = shared_buffers_checks.kept_holds_mistakes(names, buckets, "C")
    assert set(why) == {"A", "B", "D"}
    assert why["D"].startswith("It ran last, but D replays bucket 4")
    assert "bucket 2" in why["B"] and "static output itself" in why["A"]
    for name, reason in why.items():
        verdict = shared_buffers_checks.check_kept_holds(name, "C", names, wrong=why)
        assert verdict.startswith("not yet") and reason in verdict
    assert shared_buffers_checks.check_kept_holds(np.str_(" c "), "C", names, wrong=why).startswith("right")
    # with nothing after it in its bucket, A keeps its own logits; a later same-bucket request
    # that is followed by another is named for that
    why = shared_buffers_checks.kept_holds_mistakes(("A", "B", "C"), (1, 1, 1), "C")
    assert "a later request replayed it again" in why["B"]
    assert "A" not in shared_buffers_checks.kept_holds_mistakes(("A", "B"), (1, 2), "A")


def _copy_case(read_gbps=22.2, copy_gbps=20.4, logit_bytes=4):
    from floorlab.core.bandwidth import Bandwidth, Bandwidths
    from floorlab.core.roofline import floor_ms

    bandwidths = Bandwidths(Bandwidth("copy", copy_gbps, copy_gbps, copy_gbps, 1, "cpu"),
                            Bandwidth("read", read_gbps, read_gbps, read_gbps, 1, "cpu"))
    gbps = max(read_gbps, copy_gbps)
    copy_us = floor_ms(2 * 16 * 151_936 * logit_bytes, gbps) * 1e3
    wrong = shared_buffers_checks.copy_mistakes(copy_us, rows=16, bandwidths=bandwidths,
                                         floor_gbps=gbps, logit_bytes=logit_bytes)
    return copy_us, gbps, wrong


def test_the_copy_check_takes_the_hint_and_refuses_each_mistake_by_name():
    import numpy as np

    from floorlab.core.prose import sig

    # on an H200 the two bandwidths lie 3% apart, inside the check's 5%
    copy_us, gbps, wrong = _copy_case(read_gbps=4352.6, copy_gbps=4225.2)
    other = "the copy bandwidth, not the larger one the floor divides by"
    assert other in wrong and abs(wrong[other] / copy_us - 1) < 0.05

    def check(value):
        return checks.check_number(value, copy_us, rel=0.05, unit=" µs", name="my_copy_us",
                                   hint="h", wrong=wrong)

    # the hint's arithmetic on what the challenge cell prints: the bandwidth to 4 digits
    from_print = 2 * 16 * 151_936 * 4 / (float(sig(gbps, 4)) * 1e9) * 1e6
    for value in (copy_us, np.float64(copy_us), np.float32(copy_us), from_print):
        assert check(value).startswith("right"), value
    for mistake, value in wrong.items():
        verdict = check(value)
        assert verdict.startswith(f"not yet: that is the number you get with {mistake}."), mistake


def test_copy_mistakes_leave_out_what_the_printed_numbers_cannot_tell_apart():
    copy_us, _, wrong = _copy_case(read_gbps=22.2, copy_gbps=22.25, logit_bytes=2)
    assert not any("bandwidth" in m or "bytes per logit" in m for m in wrong)
    assert all(abs(v - copy_us) > 0.01 * copy_us for v in wrong.values())
    copy_us, _, wrong = _copy_case(logit_bytes=4)  # half the bytes: two mistakes, one number
    assert wrong["each byte counted once, not read and then written, or with 2 bytes per "
                 "logit where these logits take 4"] == copy_us / 2


def test_the_swap_is_told_both_when_the_top_tokens_differ_and_when_they_match_by_luck():
    from floorlab.studies.shared_buffers import Kept

    a, b = torch.tensor([[0.0, 3.0, 1.0]]), torch.tensor([[2.0, 0.0, 1.0]])
    assert "is 0 where A's own answer was 1" in Kept("view", a, b, [b]).swap_sentence()
    same = Kept("view", a, torch.tensor([[0.0, 5.0, 4.0]]), [b]).swap_sentence()
    assert "happens to be 1, A's own answer too" in same and "luck" in same
