"""Studies wing: the checks of the chapter "Kernels near the floor": each right number and its
plausible slips, kept here so the cell under a question does not print its answer."""
from __future__ import annotations

from floorlab.core.checks import check_number
from floorlab.engine.kernels import KernelRow

TARGET_MULTIPLE = 1.5  # challenge 1: the replay at this multiple of its floor
ROWS_PER_PROGRAM = 32  # challenge 2: output rows per program on the tensor cores


def layer_budget_us(floor_ms: float, num_layers: int) -> float:
    """µs a layer's kernels may take beyond their bytes for the step to run at TARGET_MULTIPLE × its floor."""
    return (TARGET_MULTIPLE - 1) * floor_ms * 1e3 / num_layers


def check_layer_budget(my_us, *, floor_ms: float, num_layers: int) -> str:
    return check_number(
        my_us, layer_budget_us(floor_ms, num_layers), rel=0.05, name="my_layer_budget_us",
        hint="half the floor is the time left for everything beyond the bytes; share it over the layers.",
        wrong={"1.5 times the floor instead of the half beyond it":
               TARGET_MULTIPLE * floor_ms * 1e3 / num_layers,
               "the whole step's budget, not one layer's": layer_budget_us(floor_ms, 1)})


def programs(rows: int) -> int:
    """Programs of a GEMV with `rows` output rows, ROWS_PER_PROGRAM each, without a split."""
    return -(-int(rows) // ROWS_PER_PROGRAM)


def least_split_k(rows: int, sm_count: int) -> int:
    """The smallest split of K that gives each of sm_count SMs at least one program."""
    return -(-int(sm_count) // programs(rows))


def check_split_k(my_split_k, *, rows: int, sm_count: int) -> str:
    return check_number(my_split_k, least_split_k(rows, sm_count), rel=0.0, name="my_split_k",
                        hint="programs = output rows ÷ rows per program; the split multiplies them.")


def pdl_saving_us(without_ms: float, with_ms: float, kernels: int) -> float:
    """µs saved per kernel boundary: (replay without PDL − replay with it) over the kernels."""
    return (without_ms - with_ms) * 1e3 / kernels


def check_pdl(my_pdl_us, *, without_ms: float, with_ms: float, kernels: int) -> str:
    return check_number(my_pdl_us, pdl_saving_us(without_ms, with_ms, kernels), rel=0.05, name="my_pdl_us",
                        hint="(replay without PDL − replay with it) in µs, over the kernels.")


def wait_split_us(row: KernelRow) -> tuple[float, float]:
    """(µs without the PDL wait, µs of waiting) of a kernel row: the same bytes, so the times are in inverse ratio to
    the read shares."""
    without = row.us * row.pct_read / row.pct_read_no_wait
    return without, row.us - without


def check_wait(my_wait_us, row: KernelRow) -> str:
    return check_number(my_wait_us, wait_split_us(row)[1], rel=0.05, name="my_wait_us",
                        hint="without the wait it takes its time × (share with ÷ share without); "
                             "the wait is the difference.")
