"""The gallery reads a folder of measure runs, skips what it cannot show, and draws any number of cards."""
import json

import matplotlib

matplotlib.use("Agg")

import pytest
from matplotlib.container import BarContainer

from floorlab.core.bandwidth import Bandwidth, Bandwidths
from floorlab.core.launches import LaunchCount
from floorlab.core.prose import sig
from floorlab.core.reference import reference_run
from floorlab.core.roofline import BelowFloorWarning, decode_floor
from floorlab.core.runs import Row, Run, measured_row
from floorlab.core.shapes import get_shape
from floorlab.core.timelines import Interval, Timeline
from floorlab.core.timing import Timing
from floorlab.figures import gallery_bars, gallery_scatter
from floorlab.studies import gallery, gallery_cards, gallery_folder


def bandwidths(gbps, read_gbps=None):
    read_gbps = gbps if read_gbps is None else read_gbps
    return Bandwidths(Bandwidth("copy", gbps, gbps, gbps, 10**9, "dev"),
                      Bandwidth("read", read_gbps, read_gbps, read_gbps, 10**9, "dev"))


def card_run(name="NVIDIA H200", kind="cuda", gbps=4000.0, eager_x=50.0, graph_x=7.0,
             best_x=None, date="2026-11-30T05:00:00+00:00", kernels=1000, read_gbps=None,
             spread=0.05):
    """A synthetic measure run: eager, graph replay (None: absent, as on a CPU), a fused path.
    Every timing's p10 and p90 lie `spread` of the median either side of it."""
    bw = bandwidths(gbps, read_gbps)
    floor = decode_floor(get_shape("qwen3-0.6b"), batch=1, prompt_tokens=32, bandwidths=bw,
                         cache_tokens=128)

    def row(path, x):
        ms = x * floor.floor_ms
        return measured_row(path, floor, Timing(ms, ms * (1 - spread), ms * (1 + spread),
                                                ms * (1 - 2 * spread), ms * (1 + 2 * spread),
                                                [ms]))

    rows = [row("eager", eager_x)]
    rows[0].issue = Timing(*[eager_x * floor.floor_ms * 0.9] * 5)
    timelines = {"eager": Timeline([], [Interval("k", 0, 10)] * 3, span_us=100, label="eager")}
    if graph_x is None:
        rows.append(Row("graph replay", floor.preset, 1, status="absent",
                        note="CUDA graphs need a CUDA GPU"))
    else:
        rows.append(row("graph replay", graph_x))
        busy_us = floor.floor_ms * 1e3 * graph_x * 0.9
        gpu = [Interval("gemv_kernel", i * busy_us / kernels, (i + 1) * busy_us / kernels)
               for i in range(kernels)]
        timelines["graph replay"] = Timeline([], gpu, span_us=busy_us / 0.9, label="replay")
    rows.append(row("triton replay", best_x) if best_x else
                Row("triton replay", floor.preset, 1, status="absent", note="not asked for"))
    return Run(kind="measure", stamp={"date": date}, device={"name": name, "kind": kind,
                                                            "torch": "2.11.0"},
               bandwidths=bw, floors=[floor], rows=rows, timelines=timelines,
               launches={"eager": LaunchCount(kernels, kernels / 28, kernels, {}, kind)})


def cpu_run(**kw):
    return card_run(name="Intel Xeon", kind="cpu", gbps=18.0, eager_x=8.0, graph_x=None, **kw)


@pytest.fixture
def room(tmp_path):
    folder = tmp_path / "gallery"
    folder.mkdir()
    card_run(best_x=3.7).save(folder / "h200.json")
    cpu_run().save(folder / "cpu.json")
    card_run(name="RTX 4090", gbps=1000.0, eager_x=9.0, graph_x=2.0).save(folder / "rtx.json")
    return folder


def load(folder, tmp_path):
    return gallery_folder.load_gallery(folder, results_dir=tmp_path / "no-own-runs")


def test_cards_are_read_and_ordered_by_bandwidth(room, tmp_path):
    g = load(room, tmp_path)
    assert [c.name for c in g.cards] == ["Intel Xeon", "RTX 4090", "NVIDIA H200"]
    assert not g.skipped and g.files == 3 and g.own is None and not g.stored
    cpu, rtx, h200 = g.cards
    assert cpu.graph is None and cpu.graph_note == "absent: CUDA graphs need a CUDA GPU"
    assert cpu.best.path == "eager" and rtx.best.path == "graph replay"
    assert h200.best.path == "triton replay" and h200.best.x_floor == pytest.approx(3.7)
    assert gallery.same_bytes(g.cards)


@pytest.mark.parametrize("text, reason", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON list, not a run"),
    (json.dumps({"layout": 1, "kind": "measure"}), "layout 1"),
    (json.dumps({"layout": 2, "kind": "chapter:fast-card"}), "kind 'chapter:fast-card'"),
    (json.dumps({"layout": 2, "kind": "measure"}), "not in the book's run layout"),
])
def test_a_bad_file_is_skipped_with_its_reason_and_the_rest_still_load(room, tmp_path, text, reason):
    (room / "bad.json").write_text(text)
    g = load(room, tmp_path)
    assert len(g.cards) == 3
    (skipped,) = g.skipped
    assert skipped.path.name == "bad.json" and reason in skipped.reason
    assert any("skipped" in line and reason in line for line in g.notes())
    with pytest.raises(gallery_cards.NotACard, match="it "):
        gallery_cards.read_card(room / "bad.json")


def test_unreadable_bytes_and_runs_without_eager_are_skipped(room, tmp_path):
    (room / "binary.json").write_bytes(b"\xff\xfe\x00")
    run = card_run()
    run.rows = run.rows[1:]
    run.save(room / "no-eager.json")
    reasons = {s.path.name: s.reason for s in load(room, tmp_path).skipped}
    assert "cannot be read" in reasons["binary.json"]
    assert "no measured eager step" in reasons["no-eager.json"]


def test_a_submitted_copy_is_shown_once(room, tmp_path):
    (room / "again.json").write_text((room / "h200.json").read_text())
    g = load(room, tmp_path)
    assert len(g.cards) == 3
    assert "the same run as" in g.skipped[0].reason


def test_the_readers_latest_own_run_is_marked_as_theirs(room, tmp_path):
    results = tmp_path / "results"
    cpu_run(date="2026-11-01T00:00:00+00:00").save(results / "measure-cpu-old" / "run.json")
    mine = card_run(name="RTX 3060", gbps=300.0, date="2026-12-01T00:00:00+00:00")
    mine.save(results / "measure-rtx-3060" / "run.json")
    g = gallery_folder.load_gallery(room, results_dir=results)
    assert [c.name for c in g.cards if c.mine] == ["RTX 3060"]
    assert g.own.mine and "yours" in g.own.label
    assert any("not submitted" in line for line in g.notes())
    # once submitted, the gallery's copy is the one marked, not a second card
    mine.save(room / "rtx-3060-submitted.json")
    g = gallery_folder.load_gallery(room, results_dir=results)
    assert len(g.cards) == 4 and [c.path.name for c in g.cards if c.mine] == ["rtx-3060-submitted.json"]
    assert any("also submitted" in line for line in g.notes())


def test_an_empty_or_missing_folder_falls_back_to_the_stored_run_and_says_so(tmp_path):
    g = load(tmp_path / "nowhere", tmp_path)
    assert g.stored and len(g.cards) == 1 and g.cards[0].origin == "stored"
    assert any("stored reference run" in line for line in g.notes())
    assert not gallery_folder.load_gallery(tmp_path, results_dir=tmp_path, stored=None).cards


def test_namesakes_get_numbers(room, tmp_path):
    card_run(date="2026-11-29T00:00:00+00:00").save(room / "h200-b.json")
    labels = [c.label for c in load(room, tmp_path).cards]
    assert "NVIDIA H200 #1 (cuda)" in labels and "NVIDIA H200 #2 (cuda)" in labels


def test_gap_per_launch_and_verdict(room, tmp_path):
    cpu, rtx, _ = load(room, tmp_path).cards
    expected_us = (9.0 - 1.0) * rtx.floor.floor_ms * 1e3 / 1000
    assert rtx.gap_per_launch_us == pytest.approx(expected_us)
    assert rtx.verdict == "dispatch"  # the host needs 90% of the step to issue it
    assert cpu.verdict in ("dispatch", "operators")


def test_the_fixed_cost_model_is_priced_on_the_fastest_card_that_replayed(room, tmp_path):
    cards = load(room, tmp_path).cards
    cost = gallery.fixed_cost(cards)
    assert cost.label.startswith("NVIDIA H200") and not cost.stored
    assert cost.kernels == 1000
    # its own bandwidth gives back the busy time over the floor it was priced from
    assert cost.x_floor_at(cost.floor.bandwidth_gbps) == pytest.approx(7.0 * 0.9)
    assert cost.x_floor_at(100.0) < cost.x_floor_at(1000.0) < cost.x_floor_at(4000.0)
    stored = gallery.fixed_cost([cards[0]])  # a CPU alone has no replay: the stored run's
    assert stored.stored and "stored run" in stored.label


def test_printed_lines_fit_the_column_and_the_table_has_every_card(room, tmp_path):
    from floorlab.core.prose import COLUMN

    cards = load(room, tmp_path).cards
    text = "\n".join([gallery.format_floors(cards), *gallery.claims(cards),
                      *(gallery.format_paths(c) for c in cards)])
    assert max(len(line) for line in text.splitlines()) <= COLUMN
    assert "1.20 GB ÷" in gallery.format_floors(cards)
    rows = [line for line in gallery.gallery_table(cards).splitlines() if "<tr>" in line]
    assert len(rows) == 1 + len(cards)
    assert rows[0].count("</th>") == len(gallery.TABLE_HEAD)
    assert all(line.count("</td>") == len(gallery.TABLE_HEAD) for line in rows[1:])
    assert "absent</td>" in rows[1]  # the CPU's graph replay
    assert ">eager: " in rows[1]  # nothing beats eager on a CPU


def test_a_card_below_its_floor_is_skipped_by_the_books_one_rule(room, tmp_path):
    with pytest.warns(BelowFloorWarning):  # measured_row warns as it builds the rows
        card_run(name="Odd", eager_x=0.5, graph_x=0.4).save(room / "odd.json")
    g = load(room, tmp_path)
    assert "Odd" not in [c.name for c in g.cards] and len(g.cards) == 3
    (skipped,) = g.skipped
    assert "its eager step" in skipped.reason and "0.500× its floor" in skipped.reason
    assert "below the floor" in skipped.reason
    # just above the rule's 5% allowance for timer noise, a card is shown
    card_run(name="Close", eager_x=0.96, graph_x=0.96).save(room / "close.json")
    assert "Close" in [c.name for c in load(room, tmp_path).cards]


def test_claims_flag_a_path_below_its_floor_in_cards_built_by_hand():
    with pytest.warns(BelowFloorWarning):
        odd = gallery_cards.Card(card_run(name="Odd", eager_x=0.5, graph_x=0.4))
    text = " ".join(gallery.claims([odd]))
    assert "below the floor: Odd (cuda) eager, Odd (cuda) graph replay" in text


@pytest.mark.parametrize("count", [1, 3])
def test_figures_draw_one_or_several_cards(room, tmp_path, count):
    cards = load(room, tmp_path).cards[-count:] if count == 1 else load(room, tmp_path).cards
    fig = gallery_bars(cards, path=tmp_path / "bars.png", title="cards")
    (ax,) = fig.axes
    drawn = [c for c in ax.containers if isinstance(c, BarContainer)]
    measured = sum(r is not None for c in cards for r in (c.eager, c.graph, c.best))
    assert len(drawn) == measured  # an absent path is not a bar of zero
    assert ax.get_xscale() == "log"
    assert [t.get_text().split("\n")[0] for t in ax.get_yticklabels()] == [c.name for c in cards]
    fig = gallery_scatter(cards, cost=gallery.fixed_cost(cards), path=tmp_path / "scatter.png")
    (ax,) = fig.axes
    assert ax.get_xscale() == ax.get_yscale() == "log"
    text = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
    assert all(c.name in text for c in cards)
    assert (tmp_path / "bars.png").read_bytes()[:4] == (tmp_path / "scatter.png").read_bytes()[:4]


def test_absent_graph_is_written_not_drawn(room, tmp_path):
    cpu = load(room, tmp_path).cards[0]
    fig = gallery_bars([cpu])
    text = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
    assert "graph replay absent: CUDA graphs need a CUDA GPU" in text
    assert len([c for c in fig.axes[0].containers if isinstance(c, BarContainer)]) == 2


def test_figures_refuse_no_cards():
    with pytest.raises(ValueError, match="at least one card"):
        gallery_bars([])


def test_the_cheapest_launch_check():


    gaps = {"Intel Xeon (cpu)": 415.0, "NVIDIA H200 (cuda)": 14.2, "RTX 4090 (cuda)": 9.1}
    names = ("my_card", "my_gap_us")

    def check(card, us):
        return gallery.check_smallest(card, us, gaps, names=names, unit=" µs", hint="h")

    assert check(None, None).startswith("not attempted")
    assert check("4090", 9.0).startswith("right: RTX 4090 (cuda), 9.10 µs")
    assert check("h200", 14.2).startswith("not yet: 'h200' is not the card")
    assert check("4090", 14.2).startswith("not yet: that is the card")
    assert check("A100", 9.1).startswith("not yet: no card's name")
    assert check(4090, 9.1).startswith("not yet: my_card should be")
    assert check("4090", "9.1 µs").startswith("not yet: my_gap_us is the text")


def test_sentences_hold_for_one_card_and_for_several(room, tmp_path):
    cpu, rtx, h200 = load(room, tmp_path).cards
    assert "one card so far" in gallery.floor_span([cpu])
    assert gallery.eager_span([cpu]).endswith(f"on {cpu.label}.")
    assert "No card here replayed" in gallery.replay_gain([cpu])
    several = [cpu, rtx, h200]
    ratio = cpu.floor.floor_ms / h200.floor.floor_ms
    assert f"grows {sig(ratio)}-fold" in gallery.floor_span(several)
    assert "farthest of any card here" in gallery.eager_span(several)
    assert gallery.replay_gain(several).startswith("2 cards here replayed the step")
    assert "from 4.50× to 7.14× as long as the replay" in gallery.replay_gain(several)
    text = " ".join(gallery.claims(several))
    assert f"observed: {h200.label}, at 50.0×" in text  # the fastest card sits furthest above


# ---- the sentences: one number for one card, a range for several, nothing from noise

def test_one_card_that_replayed_gets_one_number_not_a_range(room, tmp_path):
    h200 = load(room, tmp_path).cards[-1]
    text = gallery.replay_gain([h200])
    assert text.startswith(f"{h200.label} is the one card here that replayed")
    assert "7.14× as long as the replay" in text  # 50× ÷ 7×
    assert "between" not in text and " to " not in text
    claims = " ".join(gallery.claims([h200]))
    assert "faster on the one card that has it, eager ÷ replay 7.14×" in claims
    assert "from 7.1× to 7.1×" not in claims


def test_cards_that_print_alike_get_one_number(tmp_path):
    folder = tmp_path / "gallery"
    card_run(date="2026-11-29T00:00:00+00:00").save(folder / "a.json")
    card_run(date="2026-11-30T00:00:00+00:00").save(folder / "b.json")
    cards = load(folder, tmp_path).cards
    assert len(cards) == 2
    assert "the eager step took 7.14× as long" in gallery.replay_gain(cards)
    assert gallery.eager_span(cards) == "An eager token takes 50.0× the floor on every card here."
    assert gallery.floor_span(cards).startswith("Every card here streams at about 4000 GB/s")
    assert "eager ÷ replay 7.14×" in " ".join(gallery.claims(cards))
    assert not any(" to " in text for text in (gallery.replay_gain(cards),
                                                gallery.eager_span(cards)))


def test_a_difference_inside_the_spreads_draws_no_conclusion(tmp_path):
    folder = tmp_path / "gallery"
    card_run(eager_x=9.0, graph_x=8.8).save(folder / "close.json")  # bands 8.55-9.45, 8.36-9.24
    card_run(name="RTX 4090", gbps=1000.0, eager_x=8.9, graph_x=2.0).save(folder / "rtx.json")
    close, far = sorted(load(folder, tmp_path).cards, key=lambda c: c.name != "NVIDIA H200")
    text = gallery.replay_gain([close])
    assert "differ by less than their spreads" in text and "times as long" not in text
    both = gallery.replay_gain([close, far])
    assert f"On {far.label} the eager step took 4.45× as long" in both
    assert f"on {close.label} eager and replay differ by less than their spreads" in both
    # eager at 9.0× and 8.9×: the spreads overlap, so no card is named the farthest
    eager = gallery.eager_span([close, far])
    assert "cannot say which card sits farthest" in eager and "the farthest of any" not in eager
    claims = " ".join(gallery.claims([far, close]))
    assert f"too close to tell on {close.label}" in claims
    assert "so not told apart" in claims


def test_a_noisy_timing_says_so_where_it_is_printed(tmp_path):
    folder = tmp_path / "gallery"
    card_run(spread=0.2).save(folder / "noisy.json")  # p10-p90 is 40% of the median
    card = load(folder, tmp_path).cards[0]
    assert card.eager.timing.noisy
    assert "is noisy" in gallery.eager_span([card]) and "is noisy" in gallery.replay_gain([card])
    assert "(noisy)" in gallery.format_paths(card)
    assert "(noisy)</td>" in gallery.gallery_table([card])


def test_floor_span_names_the_bandwidth_cards_and_keeps_the_arithmetic(room, tmp_path):
    cpu, rtx, h200 = load(room, tmp_path).cards
    text = gallery.floor_span([cpu, rtx, h200])
    grows = h200.floor.bandwidth_gbps / cpu.floor.bandwidth_gbps
    assert text.startswith(f"From {cpu.label} to {h200.label}")
    assert f"{sig(cpu.floor.floor_ms)} ms ÷ {sig(grows)} = " in text


# ---- the table: the bandwidth each floor divides by

def test_the_table_shows_the_bandwidth_each_floor_divides_by(tmp_path):
    import re

    folder = tmp_path / "gallery"
    card_run(gbps=4300.0, read_gbps=4000.0).save(folder / "copy.json")  # the floor uses copy
    card_run(name="RTX 4090", gbps=900.0, read_gbps=1000.0).save(folder / "read.json")
    cards = load(folder, tmp_path).cards
    table = gallery.gallery_table(cards)
    assert "read GB/s" not in table and "<th>floor GB/s</th>" in table
    column = gallery.TABLE_HEAD.index("floor GB/s")
    for card, line in zip(cards, [r for r in table.splitlines() if "<td" in r]):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", line)
        gbps, kind = re.fullmatch(r"([\d.]+) \((\w+)\)", cells[column]).groups()
        assert kind == card.floor.bandwidth_kind
        floor = card.floor.bytes_per_step / (float(gbps) * 1e9) * 1e3
        assert float(cells[column + 1]) == pytest.approx(floor, rel=5e-3)
    assert [c.floor.bandwidth_kind for c in cards] == ["read", "copy"]


# ---- the checks: any number type, plausible wrong answers refused by name

def printed_launch_answer(card):
    """The gap per launch a reader computes from what the challenge cell prints (4 digits)."""
    from floorlab.core.prose import sig

    eager, floor = float(sig(card.eager.median_ms, 4)), float(sig(card.floor.floor_ms, 4))
    return (eager - floor) * 1e3 / card.launches


def test_the_cheapest_launch_check_refuses_the_plausible_mistakes_by_name(room, tmp_path):
    import numpy as np

    cards = load(room, tmp_path).cards
    gaps = {c.label: c.gap_per_launch_us for c in cards}
    wrong = gallery.launch_mistakes(cards)
    rtx = next(c for c in cards if c.name == "RTX 4090")  # 9.57 µs: the least

    def check(card, us):
        return gallery.check_smallest(card, us, gaps, names=("my_card", "my_gap_us"),
                                      unit=" µs", hint="h", wrong=wrong)

    for number in (rtx.gap_per_launch_us, np.float64(rtx.gap_per_launch_us),
                   np.float32(rtx.gap_per_launch_us), printed_launch_answer(rtx)):
        assert check("4090", number).startswith("right: RTX 4090 (cuda)")
    assert check(np.str_("4090"), 9.57).startswith("right")
    for mistake, given in wrong.items():
        verdict = check("4090", given[rtx.label])
        assert verdict.startswith("not yet") and mistake in verdict
    # on the H200 the floor is 2% of eager: leaving it on lands inside 5% of the right answer
    h200 = cards[-1]
    naive = wrong["the whole eager step shared out, the floor not taken off first"][h200.label]
    assert abs(naive / h200.gap_per_launch_us - 1) < 0.05
    only_h200 = {h200.label: h200.gap_per_launch_us}
    verdict = gallery.check_smallest("H200", naive, only_h200, names=("a", "b"), unit=" µs",
                                     hint="h", wrong=wrong)
    assert verdict.startswith("not yet") and "the floor not taken off first" in verdict


def test_a_card_that_pays_least_only_by_a_mistake_is_named_so():
    values = {"A (cuda)": 50.0, "B (cuda)": 59.0}
    wrong = {"eager ÷ launches": {"A (cuda)": 100.0, "B (cuda)": 60.0}}
    verdict = gallery.check_smallest("B", 60.0, values, names=("a", "b"), unit=" µs",
                                     hint="h", wrong=wrong)
    assert verdict.startswith("not yet") and "only by the numbers you get with eager" in verdict
    assert gallery.check_smallest("A", 50, values, names=("a", "b"), unit=" µs", hint="h",
                                  wrong=wrong).startswith("right")


def test_the_replay_check_takes_the_hint_and_refuses_the_mistakes(room, tmp_path):
    import numpy as np

    from floorlab.core.checks import check_number

    cost = gallery.fixed_cost(load(room, tmp_path).cards)
    right = cost.x_floor_at(1000.0)
    wrong = gallery.replay_mistakes(cost, 1000.0)

    def check(value):
        return check_number(value, right, unit="×", name="my_replay_x_floor", hint="h",
                            wrong=wrong)

    # the hint's arithmetic on the numbers the challenge prints (the price to 2 decimals)
    floor = cost.floor.bytes_per_step / 1000e9 * 1e3
    from_print = (floor + cost.kernels * round(cost.overhead_us, 2) / 1e3) / floor
    for value in (right, np.float64(right), from_print, round(right, 1)):
        assert check(value).startswith("right"), value
    for mistake, value in wrong.items():
        verdict = check(value)
        assert verdict.startswith("not yet") and mistake in verdict, (mistake, verdict)

# ---- strangers' files: each one is read on its own, and an impossible card is skipped -------

SENTINEL = "@@raw json@@"


def card_text(path: str, raw: str, **kw) -> str:
    """A valid card's JSON with the value at path ('rows.0.timing.median_ms') replaced by raw JSON text."""
    data = card_run(**kw).to_dict()
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = SENTINEL
    return json.dumps(data).replace(json.dumps(SENTINEL), raw)


STRANGE_FILES = {  # name: (path in the card, raw JSON written there, part of the reason)
    "huge-int": ("facts.big", "9" * 5000, "a number Python will not read (Exceeds the limit (4300 digits)"),
    "deep-brackets": ("facts.deep", "[" * 100_000 + "]" * 100_000, "nests its brackets"),
    "device-null": ("device", "null", "its device is NoneType None, where the book's run layout holds a JSON object"),
    "device-list": ("device", '["NVIDIA H200"]', "its device is list"),
    "name-number": ("device.name", "4090", "its device name is int 4090"),
    "kind-unknown": ("device.kind", '"mps"', "its device kind is str 'mps'"),
    "name-long": ("device.name", json.dumps("H" * 500), "more than 80 characters (500)"),
    "name-control": ("device.name", json.dumps("H200\n\u001b[31m"), "control characters"),
    "median-nan": ("rows.0.timing.median_ms", "NaN", "median_ms must be a finite number greater than 0, got float nan"),
    "median-string": ("rows.0.timing.median_ms", '"3.1"', "got str '3.1'"),
    "median-negative": ("rows.0.timing.median_ms", "-5.0", "got float -5.0"),
    "median-out-of-order": ("rows.0.timing.median_ms", "1e6", "out of order"),
    "issue-nan": ("rows.0.issue.p90_ms", "NaN", "eager issue p90_ms"),
    "x-floor-stale": ("rows.0.x_floor", "1.5", "says 1.5× the floor, but its median over its floor is 50×"),
    "x-floor-negative": ("rows.0.x_floor", "-2.4", "x_floor must be a finite number greater than 0"),
    "bandwidth-huge": ("bandwidths.read.gbps", "1e999",
                       "read gbps must be a finite number greater than 0, got float inf"),
    "bandwidth-nan": ("bandwidths.copy.gbps", "NaN", "gbps must be a finite number greater than 0, got float nan"),
    "bandwidth-zero": ("bandwidths.read.gbps", "0", "gbps must be a finite number greater than 0, got int 0"),
    "bandwidth-missing": ("bandwidths.read", "{}", "measured 'copy' and 'read' Bandwidth"),
    "floor-infinite": ("floors.0.floor_ms", "1e999", "floor_ms must be a finite number greater than 0, got float inf"),
    "floor-not-bytes-over-bandwidth": ("floors.0.floor_ms", "0.01", "is not its bytes over its bandwidth"),
    "floor-other-bandwidth": ("floors.0.bandwidth_gbps", "8000.0", "the larger of its measured bandwidths is 4000"),
    "floor-batch-text": ("floors.0.batch", '"one"', "batch must be a whole number >= 1, got str 'one'"),
    "rows-text": ("rows", '"eager"',
                  "its rows is str 'eager', where the book's run layout holds a JSON list of JSON objects"),
    "row-without-path": ("rows.0", '{"preset": "qwen3-0.6b", "batch": 1}', "not in the book's run layout"),
    "row-other-batch": ("rows.0.batch", "8", "its eager row is of 'qwen3-0.6b' at batch 8, but its floor"),
    "floors-missing": ("floors", "[]", "it holds 0 floors"),
    "launches-zero": ("launches.eager.kernels", "0", "eager kernels must be a whole number >= 1, got int 0"),
    "launches-text": ("launches.eager.kernels", '"many"', "eager kernels must be a whole number >= 1, got str 'many'"),
    "timeline-text": ("timelines.graph replay.gpu.0.end_us", '"late"', "graph replay timeline cannot be read"),
}


@pytest.mark.parametrize("name", list(STRANGE_FILES))
def test_a_strangers_impossible_file_is_skipped_with_its_reason_and_the_rest_still_show(room, tmp_path, name):
    where, raw, reason = STRANGE_FILES[name]
    (room / f"{name}.json").write_text(card_text(where, raw, name="Stranger"))
    g = load(room, tmp_path)
    assert [c.name for c in g.cards] == ["Intel Xeon", "RTX 4090", "NVIDIA H200"]
    (skipped,) = g.skipped
    assert skipped.path.name == f"{name}.json"
    assert reason in skipped.reason, skipped.reason
    assert len(skipped.reason) < 400  # a reason quotes a refused value, never the whole of it
    with pytest.raises(gallery_cards.NotACard):
        gallery_cards.read_card(room / f"{name}.json")
    # what the chapter does with the cards it kept still works
    assert all(c.verdict in ("bytes", "dispatch", "operators") for c in g.cards)
    assert gallery.gallery_table(g.cards).count("<tr>") == 4 and gallery.claims(g.cards)


def test_the_unchanged_stranger_is_shown_so_each_case_above_is_its_one_change(room, tmp_path):
    (room / "stranger.json").write_text(card_text("facts.note", '"nothing odd"', name="Stranger"))
    g = load(room, tmp_path)
    assert "Stranger" in [c.name for c in g.cards] and not g.skipped


def test_a_file_the_checks_did_not_foresee_is_skipped_not_raised(room, tmp_path, monkeypatch):
    def broken(card):
        raise ZeroDivisionError("an unforeseen failure")

    monkeypatch.setattr(gallery_cards, "check_card", broken)
    g = gallery_folder.load_gallery(room, results_dir=tmp_path / "none", stored=None)
    assert not g.cards and len(g.skipped) == 3
    assert all("ZeroDivisionError: an unforeseen failure" in s.reason for s in g.skipped)


def test_a_device_name_reaches_the_table_escaped_and_the_figures_letter_for_letter(room, tmp_path):
    hostile = '<img src=x onerror=alert(1)> $\\frac{1}{0}$ & "quotes"'
    card_run(name=hostile, gbps=2000.0).save(room / "hostile.json")
    cards = load(room, tmp_path).cards
    assert hostile in [c.name for c in cards]
    table = gallery.gallery_table(cards)
    assert "<img" not in table and "&lt;img src=x onerror=alert(1)&gt;" in table
    assert "&amp; &quot;quotes&quot;" in table
    fig = gallery_bars(cards, path=tmp_path / "bars.png")  # saving draws: a '$' is no mathtext
    assert any(t.get_text().startswith(hostile.replace("$", r"\$")) for t in fig.axes[0].get_yticklabels())
    gallery_scatter(cards, cost=gallery.fixed_cost(cards), path=tmp_path / "scatter.png")


def test_the_stored_run_that_stands_in_passes_the_same_checks():
    card = gallery_cards.card_from_run(reference_run(gallery_cards.STORED), origin="stored")
    gallery_cards.check_card(card)
    assert card.floor.floor_ms > 0 and card.eager.x_floor > 1
