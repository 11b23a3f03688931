"""Engine wing: ranks as spawned processes, each in a process group (NCCL on CUDA, gloo on the CPU)
joined through a private folder, and their collectives timed."""
from __future__ import annotations

import os
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from floorlab.core.files import load_json, save_json
from floorlab.core.numbers import whole_number
from floorlab.core.timing import StepTimes, Timing, time_ms, time_with_issue
from floorlab.engine.graphs import capture_graph

BACKENDS = {"cuda": "nccl", "cpu": "gloo"}
TIMEOUT_S = 300  # a collective waiting longer than this for another rank ends the run
# how a Run names the collectives timed alone: eagerly, and as one of many in a replayed graph
ALL_REDUCE, ALL_GATHER, IN_GRAPH = "all-reduce", "all-gather", " in a graph"


class RankError(RuntimeError):
    """A rank stopped with an error; the message is the rank's own."""


class TooFewDevicesError(ValueError):
    """More ranks were asked for than this machine has devices for."""


def check_devices(ranks: int, device: str) -> None:
    """Refuse `ranks` ranks on `device` ("cuda" or "cpu") when the machine has too few GPUs or cores."""
    ranks = whole_number(ranks, "ranks", hint="one process per rank")
    if device == "cuda":
        have = torch.cuda.device_count()
        if have < ranks:
            gpus = "no GPU is visible" if have == 0 else f"this machine has {have}"
            raise TooFewDevicesError(
                f"--ranks {ranks} on CUDA needs {ranks} visible GPUs, one per rank; {gpus}. "
                f"Run on the CPU with --device cpu (the ranks then share its memory), pass "
                f"--ranks {max(have, 1)}, or run on a machine with {ranks} GPUs "
                "(CUDA_VISIBLE_DEVICES names the ones this process may use)")
    elif device == "cpu":
        cores = os.cpu_count() or 1
        if cores < ranks:
            raise TooFewDevicesError(
                f"--ranks {ranks} on the CPU needs a core per rank; this machine has {cores}. "
                f"Pass --ranks {cores} or fewer")
    else:
        raise ValueError(f"device must be 'cuda' or 'cpu', got {device!r}")


def rank_device(device: str, rank: int) -> torch.device:
    """The device rank `rank` works on: its own GPU on CUDA, the shared CPU otherwise."""
    return torch.device("cuda", rank) if device == "cuda" else torch.device("cpu")


def control_group():
    """A gloo group over every rank, for barriers and small exchanges that must not touch a GPU."""
    if dist.get_backend() == "gloo":
        return dist.group.WORLD
    return dist.new_group(backend="gloo")


def _rank_main(rank: int, target: Callable, ranks: int, device: str, folder: str, args: tuple,
               timeout_s: float) -> None:
    """One rank: join the process group, run target(rank, ranks, *args), write what it returns."""
    dev = rank_device(device, rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    extra = {"device_id": dev} if dev.type == "cuda" else {}
    dist.init_process_group(BACKENDS[device], init_method=f"file://{folder}/rendezvous",
                            rank=rank, world_size=ranks, timeout=timedelta(seconds=timeout_s),
                            **extra)
    out = Path(folder) / f"rank{rank}.json"
    try:
        save_json({"result": target(rank, ranks, *args)}, out)
    except Exception as err:
        save_json({"error": f"{type(err).__name__}: {err}"}, out)
        raise
    finally:
        dist.destroy_process_group()


def run_ranks(target: Callable, ranks: int, *, device: str, args: tuple = (),
              timeout_s: float = TIMEOUT_S) -> list:
    """target(rank, ranks, *args) in `ranks` spawned processes (target module-level); each rank's JSON-able
    result in order, or a RankError with the first failing rank's message."""
    check_devices(ranks, device)
    with tempfile.TemporaryDirectory(prefix="floorlab-ranks-") as folder:
        context = mp.spawn(_rank_main, args=(target, ranks, device, folder, tuple(args), timeout_s),
                           nprocs=ranks, join=False, start_method="spawn")
        try:
            while not context.join():
                pass
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as err:
            raise RankError(_first_error(Path(folder), ranks) or str(err)) from None
        except BaseException:  # Ctrl-C (or any stop) in the process that started them ends the ranks too
            end_ranks(context.processes)
            raise
        return [load_json(Path(folder) / f"rank{r}.json")["result"] for r in range(ranks)]


def end_ranks(processes, grace_s: float = 5.0) -> None:
    """Stop every rank process still running: SIGTERM, then SIGKILL after grace_s seconds."""
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in processes:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)


def _first_error(folder: Path, ranks: int) -> str:
    """The first error a rank wrote, as 'rank N: message', or '' when none wrote one."""
    for r in range(ranks):
        path = folder / f"rank{r}.json"
        if path.is_file():
            found = load_json(path).get("error")
            if found:
                return f"rank {r}: {found}"
    return ""


def collective_fn(kind: str, numel: int, *, device, dtype: torch.dtype, group=None):
    """A no-argument callable running one "all_reduce" of numel values, or one "all_gather" of numel
    values from every rank, on static buffers."""
    ranks = dist.get_world_size(group)
    buf = torch.ones(int(numel), device=device, dtype=dtype)
    if kind == "all_reduce":
        def run() -> None:
            dist.all_reduce(buf, group=group)
    elif kind == "all_gather":
        out = torch.empty(ranks * int(numel), device=device, dtype=dtype)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

        def run() -> None:
            gather(out, buf, group=group)
    else:
        raise ValueError(f"kind must be 'all_reduce' or 'all_gather', got {kind!r}")
    return run


def time_collective(kind: str, numel: int, *, device, dtype: torch.dtype, group=None,
                    warmup: int = 5, repeats: int = 50, control=None) -> Timing:
    """One collective's time in ms, called eagerly alone by every rank together, in fixed counts: CUDA
    events on a GPU, the wall clock on a CPU."""
    run = collective_fn(kind, numel, device=device, dtype=dtype, group=group)
    dist.barrier(group=control)
    if torch.device(device).type == "cuda":
        return time_ms(run, warmup=warmup, repeats=repeats, device=device)
    for _ in range(int(warmup)):
        run()
    samples = []
    for _ in range(int(repeats)):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1e3)
    return Timing.from_samples(samples)


def time_collective_in_graph(kind: str, numel: int, *, count: int, device, dtype: torch.dtype,
                             group=None, warmup: int = 5, repeats: int = 20, control=None
                             ) -> Timing:
    """One collective's share of a replayed CUDA graph of `count` back-to-back ones, in ms
    (every rank must call this together): its cost inside a replayed step, with no launch."""
    run = collective_fn(kind, numel, device=device, dtype=dtype, group=group)

    def many() -> None:
        for _ in range(int(count)):
            run()

    graph, _ = capture_graph(many, warmup=1)
    dist.barrier(group=control)
    whole = time_ms(graph.replay, warmup=warmup, repeats=repeats, device=device)
    return Timing.from_samples([ms / count for ms in whole.samples_ms])


def time_in_step(step: Callable[[], object], *, rank: int, warmup: int, repeats: int, device,
                 control=None) -> StepTimes | None:
    """The step's time and issue time (time_with_issue), every rank stepping together; on a CPU rank 0 alone
    times, broadcasting each step to the others, which return None."""
    device = torch.device(device)
    dist.barrier(group=control)
    if device.type == "cuda":
        return time_with_issue(step, warmup=warmup, repeats=repeats, device=device)
    flag = torch.zeros(1, dtype=torch.int32)

    def go(more: bool) -> bool:
        flag.fill_(int(more))
        dist.broadcast(flag, src=0, group=control)
        return bool(flag.item())

    if rank == 0:
        def led():
            go(True)
            return step()

        times = time_with_issue(led, warmup=warmup, repeats=repeats, device=device)
        go(False)
        return times
    while go(False):
        step()
    return None
