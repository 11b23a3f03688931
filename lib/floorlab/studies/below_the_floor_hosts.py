"""Studies wing: one card on different hosts, from every stored run of it: the host paces the eager
step; a replay is one launch, the card's own time."""
from __future__ import annotations

from dataclasses import dataclass

from floorlab.core.prose import fmt_ms, fmt_times
from floorlab.core.reference import every_stored_run
from floorlab.core.runs import Row, Run
from floorlab.core.timing import compare

EAGER_PATHS = ("eager", "plain eager")  # the book's engine, eager: a chapter's name, the bench's
GRAPH_PATHS = ("graph replay", "plain graph", "graph")  # the same engine replayed as a graph


def first_row(run: Run, names, preset: str, batch: int) -> Row | None:
    """The first measured row of run among the path names (a chapter's or the bench's), or None."""
    return next((row for name in names if (row := run.find(name, preset, batch))), None)


@dataclass
class StoredStep:
    """One stored run's eager step and graph replay of the same configuration."""
    name: str  # the stored file's name, e.g. 'h200-serving'
    run: Run
    eager: Row
    replay: Row

    host = property(lambda self: str(self.run.host) if self.run.host else "not recorded")


def same_card(prefix: str = "h200-", *, preset: str = "qwen3-0.6b", batch: int = 1) -> list[StoredStep]:
    """Every stored run named prefix* that timed both the eager step and its replay, slowest last."""
    steps = []
    for path, run in every_stored_run(prefix, other_hosts=True).items():
        eager, replay = (first_row(run, names, preset, batch) for names in (EAGER_PATHS, GRAPH_PATHS))
        if eager is not None and replay is not None:
            steps.append(StoredStep(path.stem, run, eager, replay))
    return sorted(steps, key=lambda s: s.eager.median_ms)


@dataclass
class HostsStory:
    """The same card's stored runs side by side: how far the eager step and the replay moved."""
    steps: list[StoredStep]

    def _apart(self, what: str) -> tuple[float, bool]:
        """(slowest ÷ fastest median of a path, whether they differ beyond their spreads)."""
        rows = sorted((getattr(s, what) for s in self.steps), key=lambda r: r.median_ms)
        versus = compare(rows[-1], rows[0])
        return versus.ratio, versus.meaningful

    def table(self) -> str:
        lines = [f"{'stored run':<22} {'date':<10} {'eager':>9} {'replay':>9}  host CPU"]
        for s in self.steps:
            lines.append(f"{s.name[:22]:<22} {str(s.run.stamp.date or '')[:10]:<10} "
                         f"{fmt_ms(s.eager.median_ms):>9} {fmt_ms(s.replay.median_ms):>9}  {s.host[:26]}")
        return "\n".join(lines)

    def says(self) -> str:
        """What the runs show, one sentence per outcome the numbers can take."""
        if len(self.steps) < 2:
            return ("Fewer than two stored runs of this card timed both paths, so there is nothing "
                    "to set side by side yet.")
        card = self.steps[0].run.device.name or "this card"
        days = len({str(s.run.stamp.date or "")[:10] for s in self.steps})
        eager, eager_apart = self._apart("eager")
        replay, replay_apart = self._apart("replay")
        low, high = (f(s.eager.median_ms for s in self.steps) for f in (min, max))
        head = (f"The book's {len(self.steps)} stored runs of the {card}, made in separate processes on {days} "
                f"day{'s' if days > 1 else ''}, put the eager step between {fmt_ms(low)} and {fmt_ms(high)}, "
                f"{fmt_times(eager)} apart; the replay's fastest and slowest are {fmt_times(replay)} apart.")
        if not eager_apart:
            said = ("The eager steps agree within their spreads, so these runs cannot show what a "
                    "host does to the eager step.")
        elif not replay_apart:
            said = ("The eager steps differ beyond their spreads and the replays do not: the replay "
                    "no longer depends on the host that issues it.")
        elif eager > replay:
            said = ("Both moved beyond their spreads, the eager step by more: the host paces the "
                    "eager step, while a replay is one launch and the card's own time.")
        else:
            said = ("The replay moved as much as the eager step: something besides the host "
                    "changed between these runs.")
        return f"{head} {said} {self.hosts_note()}"

    def hosts_note(self) -> str:
        """Which runs recorded their host CPU, and what that leaves unknown."""
        recorded = [s.host for s in self.steps if s.run.host]
        if not recorded:
            return ("None of them recorded its host CPU (they were stored before the book did), "
                    "so these runs cannot say how many hosts they came from.")
        known = sorted(set(recorded))
        models = f"{len(known)} CPU model{'s' if len(known) > 1 else ''} among them"
        return f"{len(recorded)} of the {len(self.steps)} recorded their host CPU, {models}: {'; '.join(known)}."

    def this_run(self, card: str, eager_ms: float, replay_ms: float) -> str:
        """Where the reader's own run stands: beside the stored runs when its card is theirs, apart when not."""
        own = f"eager {fmt_ms(eager_ms)}, replay {fmt_ms(replay_ms)}"
        stored = self.steps[0].run.device.name if self.steps else ""
        if card == stored:
            return f"This run, on the same card ({card}): {own}."
        return (f"This run is on the {card}, not the {stored or 'stored card'}: {own}. Its replay is its own "
                "card's time, so it does not join the stored runs above.")
