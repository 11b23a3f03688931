"""Studies wing: the checks of the chapter "Kernels near the floor": each challenge's right number,
the plausible wrong ones by name, and the verdict on the reader's answer.

The formulas live here, not in the chapter's check cells, so the cell under a question does not
print its answer; the worked answers, hidden behind a toggle, show the same arithmetic.
"""
from __future__ import annotations

from floorlab.core.checks import check_number
from floorlab.engine.kernels import KernelRow

TARGET_MULTIPLE = 1.5  # challenge 1: the replay at this multiple of its floor
ROWS_PER_PROGRAM = 32  # challenge 2: output rows per program on the tensor cores


# Challenge 1: a budget per layer for a replay at 1.5× its floor.

def layer_budget_us(floor_ms: float, num_layers: int, multiple: float = TARGET_MULTIPLE) -> float:
    """µs one layer's kernels may take beyond their bytes for the step to run at multiple × its
    floor: the whole step's floor (output head included) times (multiple − 1), shared over the
    layers alone, as if the output head's kernels took no time beyond their bytes."""
    return (multiple - 1) * floor_ms * 1e3 / num_layers


def check_layer_budget(my_us, *, floor_ms: float, num_layers: int) -> str:
    """Verdict on challenge 1's answer in µs per layer."""
    return check_number(
        my_us, layer_budget_us(floor_ms, num_layers), rel=0.05, name="my_layer_budget_us",
        hint="half the floor is the time left for everything beyond the bytes; share it over the layers.",
        wrong={"1.5 times the floor instead of the half beyond it":
               TARGET_MULTIPLE * floor_ms * 1e3 / num_layers,
               "the whole step's budget, not one layer's": layer_budget_us(floor_ms, 1)})


# Challenge 2: the least split of K that gives every SM a program.

def programs(rows: int, rows_per_program: int = ROWS_PER_PROGRAM) -> int:
    """Programs of a GEMV with `rows` output rows, rows_per_program each, without a split."""
    return -(-int(rows) // rows_per_program)


def least_split_k(rows: int, sm_count: int, rows_per_program: int = ROWS_PER_PROGRAM) -> int:
    """The smallest split of K that gives each of sm_count SMs at least one program."""
    return -(-int(sm_count) // programs(rows, rows_per_program))


def check_split_k(my_split_k, *, rows: int, sm_count: int) -> str:
    """Verdict on challenge 2's split_k."""
    return check_number(my_split_k, least_split_k(rows, sm_count), rel=0.0, name="my_split_k",
                        hint="programs = output rows ÷ rows per program; the split multiplies them.")


# Challenge 3: what PDL saves per kernel boundary.

def pdl_saving_us(without_ms: float, with_ms: float, kernels: int) -> float:
    """µs saved per kernel boundary: (replay without PDL − replay with it) over the kernels."""
    return (without_ms - with_ms) * 1e3 / kernels


def check_pdl(my_pdl_us, *, without_ms: float, with_ms: float, kernels: int) -> str:
    """Verdict on challenge 3's µs per boundary."""
    return check_number(my_pdl_us, pdl_saving_us(without_ms, with_ms, kernels), rel=0.05,
                        name="my_pdl_us",
                        hint="(replay without PDL − replay with it) in µs, over the kernels.")


# Challenge 4: the share of o_proj's time that is its PDL wait.

def wait_split_us(row: KernelRow) -> tuple[float, float]:
    """(µs without the wait, µs of waiting) for a per-kernel row with both read shares: the same
    bytes at the same bandwidth, so the times are in inverse ratio to the shares."""
    without = row.us * row.pct_read / row.pct_read_no_wait
    return without, row.us - without


def check_wait(my_wait_us, row: KernelRow) -> str:
    """Verdict on challenge 4's µs of waiting."""
    return check_number(my_wait_us, wait_split_us(row)[1], rel=0.05, name="my_wait_us",
                        hint="without the wait it takes its time × (share with ÷ share without); "
                             "the wait is the difference.")
