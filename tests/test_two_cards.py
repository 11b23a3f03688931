"""Tensor parallelism: a shard is cut right, the split step computes what one process computes
(two gloo ranks in float32 on the CPU; two GPUs in bf16 and through CUDA graphs), the command
writes a twocards Run, and the chapter's arithmetic and checks read it."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from floorlab.core.roofline import bytes_per_step
from floorlab.core.runs import Run
from floorlab.core.shapes import PRESETS, Qwen3Shape
from floorlab.engine.model import build_model, greedy_tokens
from floorlab.engine.ranks import TooFewDevicesError, check_devices, run_ranks
from floorlab.engine.tensor_parallel import SplitError, TPDecoder, build_shard, check_split, rank_shape, shard_model
from floorlab.figures.splits import SplitBar, split_bar
from floorlab.studies import two_cards, two_cards_checks
from floorlab.tools import twocards

ROOT = Path(__file__).resolve().parents[1]
MAX_REL_ERR = 1e-5  # float32 on the CPU: only the order of the sums differs
BF16_REL_ERR = 2e-2  # as the engine's other bf16 paths are held to
SHAPES = [  # odd widths; GQA and MHA; tied and untied
    Qwen3Shape(36, 60, 2, 6, 2, 12, 94, True, rope_theta=10000.0, name="odd-gqa3-tied"),
    Qwen3Shape(40, 72, 2, 4, 4, 10, 98, False, name="odd-mha-untied"),
    Qwen3Shape(64, 96, 3, 8, 2, 16, 128, False, rope_theta=10000.0, name="gqa4-untied"),
]
PROMPT, STEPS, BATCH = 5, 6, 2


def spread_(model, seed: int = 0) -> None:
    """Weights with O(1) activations, so a head or a slice in the wrong place shows in the logits."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max() / b.float().abs().max())


def parity_worker(rank: int, ranks: int, shapes: list, device: str, dtype_name: str) -> dict:
    """Each shape: the split prefill, decode steps and greedy tokens against the whole model."""
    dtype = getattr(torch, dtype_name)
    dev = torch.device("cuda", rank) if device == "cuda" else torch.device("cpu")
    torch.set_num_threads(1)
    out = {}
    for shape in shapes:
        full = build_model(shape, device=dev, dtype=dtype, max_batch=BATCH, max_context=32)
        spread_(full)
        shard = shard_model(full, rank=rank, ranks=ranks)
        prompt = torch.randint(0, shape.vocab_size, (BATCH, PROMPT),
                               generator=torch.Generator().manual_seed(1)).to(dev)
        errors = [rel_err(shard.prefill(prompt), full.prefill(prompt))]
        token = full.prefill(prompt)[:, -1].argmax(-1)
        shard.prefill(prompt)
        for step in range(STEPS):
            positions = torch.full((BATCH,), PROMPT + step, device=dev)
            expected = full.decode_step(token, positions)
            errors.append(rel_err(shard.decode_step(token, positions), expected))
            token = expected.argmax(-1)
        same_tokens = torch.equal(greedy_tokens(shard, prompt, 4), greedy_tokens(full, prompt, 4))
        out[shape.name] = {"errors": errors, "same_tokens": same_tokens,
                           "k_cache_rows": list(shard.k_cache.shape)}
    return out


@pytest.fixture(scope="module")
def gloo_parity():
    return run_ranks(parity_worker, 2, device="cpu", args=(SHAPES, "cpu", "float32"))


# ---------------------------------------------------------------- the split, checked alone

@pytest.mark.parametrize("field, shape", [
    ("num_heads", Qwen3Shape(32, 64, 1, 3, 3, 8, 64, True, name="heads3")),
    ("num_kv_heads", Qwen3Shape(32, 64, 1, 6, 3, 8, 64, True, name="kv3")),
    ("vocab_size", Qwen3Shape(32, 64, 1, 4, 2, 8, 97, True, name="vocab97")),
    ("intermediate_size", Qwen3Shape(32, 63, 1, 4, 2, 8, 64, True, name="mlp63")),
])
def test_a_shape_that_does_not_divide_is_refused_by_name(field, shape):
    with pytest.raises(SplitError) as err:
        check_split(shape, 2)
    message = str(err.value)
    assert field in message and "divide by 2" in message and "1" in message.split("this shape:")[-1]
    with pytest.raises(SplitError, match=field):
        TPDecoder(shape, rank=0, ranks=2)
    assert check_split(shape, 1) == shape


def test_ranks_must_be_whole_and_rank_in_range():
    with pytest.raises(SplitError, match="whole number"):
        check_split(SHAPES[0], 0)
    with pytest.raises(ValueError, match="from 0 to 1"):
        TPDecoder(SHAPES[0], rank=2, ranks=2)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_a_shard_holds_its_share(shape):
    shard = TPDecoder(shape, rank=1, ranks=2, dtype=torch.float32, max_batch=2, max_context=8)
    assert shard.shape.num_heads * 2 == shape.num_heads
    assert shard.k_cache.shape[2] * 2 == shape.num_kv_heads  # its share of the KV cache
    assert shard.layers[0].o_proj.shape == (shape.hidden_size, shape.num_heads // 2 * shape.head_dim)
    assert shard.layers[0].down.shape == (shape.hidden_size, shape.intermediate_size // 2)
    assert shard.head_weight().shape == (shape.vocab_size // 2, shape.hidden_size)
    assert shard.embed.shape == (shape.vocab_size, shape.hidden_size)  # the lookup table is whole


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_a_shard_built_from_the_seed_is_the_cut_of_the_whole_model(shape):
    full = build_model(shape, dtype=torch.float32, max_batch=2, max_context=8, seed=7)
    for rank in (0, 1):
        cut = shard_model(full, rank=rank, ranks=2)
        drawn = build_shard(shape, rank=rank, ranks=2, dtype=torch.float32, max_batch=2,
                            max_context=8, seed=7)
        pairs = list(zip(cut.named_parameters(), drawn.named_parameters()))
        assert pairs and all(a == b and torch.equal(p, q) for (a, p), (b, q) in pairs)
    halves = [shard_model(full, rank=r, ranks=2) for r in (0, 1)]
    rows = torch.cat([h.head_weight() for h in halves])
    assert torch.equal(rows, full.embed if full.lm_head is None else full.lm_head)
    downs = torch.cat([h.layers[0].down for h in halves], dim=1)
    assert torch.equal(downs, full.layers[0].down)


def test_the_floor_per_rank_counts_its_share_of_the_bytes():
    shape = PRESETS["qwen3-8b"]
    share = rank_shape(shape, 2)
    whole, half = bytes_per_step(shape, 1, 33), bytes_per_step(share, 1, 33)
    norms = shape.num_layers * (2 * shape.hidden_size + 2 * shape.head_dim) + shape.hidden_size
    lookup = shape.hidden_size  # the one row an untied input table gathers
    assert half == (whole - 2 * (norms + lookup)) // 2 + 2 * norms


# ---------------------------------------------------------------- two gloo ranks

@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_the_split_step_matches_one_process_in_float32(gloo_parity, shape):
    for rank, found in enumerate(gloo_parity):
        result = found[shape.name]
        assert len(result["errors"]) == STEPS + 1
        assert max(result["errors"]) <= MAX_REL_ERR, (rank, result["errors"])
        assert result["same_tokens"]
        assert result["k_cache_rows"][2] * 2 == shape.num_kv_heads


def test_too_many_ranks_for_the_devices_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(TooFewDevicesError) as err:
        check_devices(2, "cuda")
    assert "needs 2 visible GPUs" in str(err.value) and "this machine has 1" in str(err.value)
    assert "--device cpu" in str(err.value)
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    with pytest.raises(TooFewDevicesError, match="core per rank"):
        check_devices(2, "cpu")


def test_the_command_refuses_too_few_gpus_before_starting(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(SystemExit) as done:
        twocards.main(["--ranks", "2", "--device", "cuda"])
    assert done.value.code == 2
    assert "needs 2 visible GPUs" in capsys.readouterr().err


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("twocards")
    done = subprocess.run([sys.executable, "-m", "floorlab", "twocards", "--device", "cpu",
                           "--ranks", "2", "--presets", "tiny", "--warmup", "0", "--repeats", "2",
                           "--out", str(out)], capture_output=True, text=True, timeout=900,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return Run.load(out / "run.json"), done.stdout


def test_the_command_writes_a_twocards_run(cpu_run):
    run, printed = cpu_run
    assert run.kind == "twocards" and run.settings.ranks == 2 and run.settings.backend == "gloo"
    card, share = run.floor("tiny"), run.floor("tiny/tp2")
    assert share.bytes_per_step < 0.6 * card.bytes_per_step
    for preset in ("tiny", "tiny/tp2"):
        assert run.row("eager", preset).timing.samples_ms
        assert run.row("eager", preset).issue is not None
        assert run.find("graph replay", preset) is None  # no graphs on a CPU
    assert run.row("all-reduce", "tiny/tp2").timing.median_ms > 0
    assert {"tiny/tp2 b1 eager rank 0", "tiny/tp2 b1 eager rank 1"} <= set(run.timelines)
    assert len(run.facts["bandwidth_together"]) == 2
    assert run.facts["presets"]["tiny"]["rel_err_vs_card"] <= BF16_REL_ERR
    assert "all-reduce" in printed and "tiny/tp2" in printed


def test_the_study_reads_the_run_and_draws_its_bars(cpu_run, tmp_path):
    tc = two_cards.TwoCards(cpu_run[0])
    assert tc.presets == ["tiny"] and tc.path == "eager" and tc.ranks == 2
    assert len(tc.timelines("tiny")) == 2
    bars = tc.bars("tiny")
    assert [name for name, _ in bars[1].parts][-1] == "collectives"
    assert bars[1].parts[-1][1] == pytest.approx(4 * tc.collective("tiny").median_ms
                                                 + tc.collective("tiny", "all-gather").median_ms)
    split_bar(bars, path=tmp_path / "bar.png")
    assert (tmp_path / "bar.png").stat().st_size > 0
    rows = two_cards.checked_against(tc, tc.model())
    assert rows[0]["preset"] == "tiny" and rows[0]["agrees"] in (True, False, None)
    assert rows[0]["measured"] in ("faster", "slower", "cannot tell")
    assert "gain" in tc.model().table()
    assert isinstance(two_cards.threads_says(tc, "tiny"), str)
    assert "GB/s" in two_cards.memory_says(tc, "tiny")


def test_a_noisy_all_reduce_gives_the_break_even_at_both_ends_of_its_band(cpu_run):
    from floorlab.core.timing import Timing
    from floorlab.studies.two_cards_readings import crossover_reading

    run = cpu_run[0]
    row = run.row("all-reduce", "tiny/tp2")
    steady = Timing(0.5, 0.49, 0.51, 0.48, 0.52, [0.5])
    noisy = Timing(0.5, 0.25, 2.5, 0.2, 3.0, [0.5])
    kept = row.timing
    try:
        for timing, said in ((steady, False), (noisy, True)):
            row.timing = timing
            reading = crossover_reading(two_cards.TwoCards(run), here=True)
            assert ("at either end the break-even" in reading.text()) is said
    finally:
        row.timing = kept  # the run is shared by the module's tests
    line = next(line for line in reading.lines if "either end" in line)
    assert "p10-p90 is 250-2" in line and "450% of its median" in line, line


def test_the_model_check_says_where_the_split_ran_outside_the_model_s_time():
    row = {"preset": "small", "card_ms": 14.3, "predicted_ms": 19.8, "measured_ms": 39.9, "predicted": "slower",
           "measured": "slower", "agrees": True, "in_band": False}
    text = two_cards.format_checked([row])
    assert "small: the split took 2.02× the model's time" in text and "direction held, its size did not" in text
    assert "model's time" not in two_cards.format_checked([{**row, "in_band": True}])


def test_the_crossover_challenge_refuses_the_plausible_mistakes(cpu_run):
    tc = two_cards.TwoCards(cpu_run[0])
    model = tc.model()
    right, first = model.layer_mb(), model.first_winner()
    assert two_cards_checks.check_crossover(None, None, tc).startswith("not attempted")
    assert two_cards_checks.check_crossover(right, first, tc).startswith("right")
    as_the_book_writes_it = first.replace("qwen", "Qwen").replace("b", "B")  # "Qwen3-0.6B"
    assert two_cards_checks.check_crossover(right, f" {as_the_book_writes_it}", tc).startswith("right")
    assert "one all-reduce per layer" in two_cards_checks.check_crossover(right / 2, first, tc)
    assert "ms read as µs" in two_cards_checks.check_crossover(right / 1000, first, tc)
    wrong = "none" if first != "none" else "qwen3-0.6b"
    assert "MB per layer is right" in two_cards_checks.check_crossover(right, wrong, tc)
    assert two_cards_checks.check_crossover("12 MB", first, tc).startswith("not yet")
    assert "MB per layer" in two_cards_checks.answer_crossover(tc)
    assert "KV" in two_cards_checks.answer_big_batch(tc)


def test_the_crossover_arithmetic():
    two = two_cards.Crossover(ranks=2, card_gbps=4000.0, rank_gbps=4000.0,
                              all_reduce_ms=0.01, all_gather_ms=0.01)
    assert two.layer_mb() == pytest.approx(160.0)  # 2 × 10 µs × 8000 GB/s
    assert two.gain_ms(PRESETS["qwen3-32b"]) > 0 > two.gain_ms(PRESETS["qwen3-0.6b"])
    params = two.crossover_params()
    assert PRESETS["qwen3-0.6b"].param_count() < params < PRESETS["qwen3-32b"].param_count()
    shared = two_cards.Crossover(ranks=2, card_gbps=4000.0, rank_gbps=2000.0,
                                 all_reduce_ms=0.01, all_gather_ms=0.01)
    assert math.isinf(shared.layer_mb()) and shared.first_winner() == "none"


def test_split_bar_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="at least one"):
        split_bar([])
    with pytest.raises(ValueError, match="SplitBar"):
        split_bar([("eager", 3.0)])
    with pytest.raises(ValueError, match="not negative"):
        split_bar([SplitBar("x", 3.0, (("floor", -1.0),))])


def test_the_chapter_is_in_the_table_of_contents_after_bigger_models():
    toc = (ROOT / "_toc.yml").read_text()
    assert toc.index("chapters/bigger-models") < toc.index("chapters/two-cards")
    assert json.loads((ROOT / "chapters" / "two-cards.ipynb").read_text())["cells"]


# ---------------------------------------------------------------- two GPUs

def _two_gpus() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() >= 2




def graph_worker(rank: int, ranks: int, shape) -> dict:
    """Capture the whole split step, NCCL all-reduces and all_gather included, and replay it."""
    from floorlab.engine.graphs import GraphRunner

    dev = torch.device("cuda", rank)
    shard = build_shard(shape, rank=rank, ranks=ranks, device=dev, max_batch=1, max_context=64)
    prompt = torch.randint(0, shape.vocab_size, (1, 16), device=dev,
                           generator=torch.Generator(device=dev).manual_seed(0))
    runner = GraphRunner(shard, buckets=(1,))
    runner.capture()
    token = shard.prefill(prompt)[:, -1].argmax(-1)
    same = []
    for step in range(3):
        positions = torch.full((1,), 16 + step, device=dev)
        same.append(runner.check_bit_identical(token, positions))
        token = runner.step(token, positions).argmax(-1)
    return {"same": same, "diff": runner.last_max_abs_diff}


@pytest.mark.gpu
@pytest.mark.two_gpus
@pytest.mark.skipif(not _two_gpus(), reason="needs two CUDA GPUs, one per rank")
def test_the_split_step_matches_one_gpu_in_bf16():
    results = run_ranks(parity_worker, 2, device="cuda", args=(SHAPES[2:], "cuda", "bfloat16"))
    for found in results:
        assert max(found[SHAPES[2].name]["errors"]) <= BF16_REL_ERR


@pytest.mark.gpu
@pytest.mark.two_gpus
@pytest.mark.skipif(not _two_gpus(), reason="needs two CUDA GPUs, one per rank")
def test_a_graph_of_the_split_step_replays_bit_identical_to_eager():
    shape = Qwen3Shape(1024, 3072, 4, 16, 8, 128, 32768, True, name="small")
    for found in run_ranks(graph_worker, 2, device="cuda", args=(shape,)):
        assert all(found["same"]), found["diff"]



def test_ranks_that_share_one_memory_have_no_break_even_and_say_so(monkeypatch):
    """A rank no faster than its share of one card has no finite break-even: the chapter says so in
    words and the challenge checks answer instead of raising (a CPU's two processes can measure this)."""

    shared = two_cards.Crossover(ranks=2, card_gbps=4000.0, rank_gbps=2000.0,
                                 all_reduce_ms=0.01, all_gather_ms=0.01)

    class Stub:
        def model(self, preset=None, shared=False):
            return shared_model

    shared_model = shared
    assert two_cards.mb_text(shared.layer_mb()) == two_cards.NO_BREAK_EVEN
    assert two_cards.mb_text(160.04) == "160 MB"
    assert "no break-even" in two_cards_checks.check_crossover(12.0, "qwen3-8b", Stub())
    assert "no break-even" in two_cards_checks.answer_crossover(Stub())
    assert "no break-even" in two_cards_checks.check_slower_link(12.0, Stub())


def test_a_break_even_reads_as_one_phrase_finite_or_not():
    from floorlab.studies.two_cards import NO_BREAK_EVEN
    from floorlab.studies.two_cards_readings import break_even_text

    assert break_even_text(51.0) == "break-even: 51.0 MB per layer"
    assert break_even_text(float("inf")) == NO_BREAK_EVEN and "per layer" not in break_even_text(float("inf"))
