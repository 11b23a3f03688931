"""Launch counting and timelines on the CPU; the GPU paths run only where CUDA is."""
import json

import pytest
import torch

from floorlab.core.launches import LaunchCount, count_launches, is_kernel_name, merged_spans
from floorlab.core.timelines import Interval, Timeline, kernel_table, steady_timeline


def three_ops():
    """tanh, add and mul: three operators, each its own kernel on a GPU."""
    a = torch.ones(16)
    b = torch.full((16,), 2.0)

    def step():
        c = torch.tanh(a)
        d = c + b
        return d * b

    return step


class Layer(torch.nn.Module):
    """One toy layer of k = 3 operators: mul, add, tanh."""

    def __init__(self, width):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(width))
        self.bias = torch.nn.Parameter(torch.randn(width))

    def forward(self, x):
        return torch.tanh(x * self.weight + self.bias)


class ToyModel(torch.nn.Module):
    def __init__(self, num_layers, width=8):
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer(width) for _ in range(num_layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_counts_three_operators():
    count = count_launches(three_ops(), num_layers=1, device="cpu")
    assert isinstance(count, LaunchCount)
    assert count.device == "cpu"
    assert count.kernels == 3
    assert count.launch_calls == 3
    assert count.kernel_names == {"aten::tanh": 1, "aten::add": 1, "aten::mul": 1}


def test_per_layer_arithmetic():
    count = count_launches(three_ops(), num_layers=2, device="cpu")
    assert count.per_layer == pytest.approx(count.kernels / 2) == pytest.approx(1.5)


@pytest.mark.parametrize("num_layers", [1, 4, 7])
def test_toy_model_gives_k_per_layer(num_layers):
    model = ToyModel(num_layers)
    x = torch.randn(8)
    with torch.no_grad():
        count = count_launches(lambda: model(x), num_layers=num_layers, device="cpu")
    assert count.kernels == 3 * num_layers
    assert count.per_layer == 3.0
    assert count.kernel_names == {
        "aten::mul": num_layers, "aten::add": num_layers, "aten::tanh": num_layers,
    }


def test_matmul_counts_once_and_views_are_set_aside():
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    count = count_launches(lambda: (a @ b.t()).view(16), num_layers=1, device="cpu")
    assert count.kernels == 1
    assert count.kernel_names == {"aten::mm": 1}
    assert count.other_ops >= 1


def test_warms_up_once_then_profiles_one_call():
    calls = []
    base = three_ops()

    def step():
        calls.append(1)
        return base()

    count_launches(step, num_layers=1, device="cpu")
    assert len(calls) == 2


def test_count_to_and_from_dict():
    count = count_launches(three_ops(), num_layers=1, device="cpu")
    data = json.loads(json.dumps(count.to_dict()))
    assert LaunchCount.from_dict(data) == count
    assert "3 kernels per step" in str(count)


@pytest.mark.parametrize("num_layers", [0, -1, 2.5])
def test_bad_num_layers_is_refused(num_layers):
    with pytest.raises(ValueError, match="num_layers"):
        count_launches(three_ops(), num_layers=num_layers, device="cpu")


def test_cpu_timeline_has_top_level_ops_and_no_gpu_row():
    a, b = torch.randn(4, 4), torch.randn(4, 4)

    def step():
        c = a @ b
        return torch.tanh(c) + a

    tl = steady_timeline(step, label="eager on the CPU", device="cpu", timed_ms=0.5)
    assert isinstance(tl, Timeline)
    assert tl.label == "eager on the CPU"
    assert [i.name for i in tl.cpu] == ["aten::matmul", "aten::tanh", "aten::add"]
    assert tl.gpu == [] and tl.kernels == 0
    assert tl.gpu_busy_us == 0.0 and tl.gpu_idle_us == 0.0
    assert tl.cpu[0].start_us >= 0.0
    starts = [i.start_us for i in tl.cpu]
    assert starts == sorted(starts)
    assert all(i.end_us >= i.start_us for i in tl.cpu)
    assert tl.span_us >= max(i.end_us for i in tl.cpu) - 1e-6
    assert 0 < tl.busy_share <= 1
    assert tl.timed_ms == 0.5 and "timed without the profiler" in tl.profiler_note()


def test_steady_timeline_profiles_several_calls_and_keeps_the_middle_one():
    calls = []
    base = three_ops()

    def step():
        calls.append(1)
        return base()

    tl = steady_timeline(step, label="t", device="cpu", steps=5)
    assert len(calls) == 1 + 5  # one warm-up call, then five back to back
    assert len(tl.cpu) == 3
    with pytest.raises(ValueError, match="steps"):
        steady_timeline(step, label="t", device="cpu", steps=2)


def test_gpu_busy_and_idle_from_intervals():
    tl = Timeline(
        cpu=[Interval("cudaLaunchKernel", 0.0, 5.0)],
        gpu=[Interval("k1", 10.0, 20.0), Interval("k2", 15.0, 25.0), Interval("k3", 40.0, 50.0),
             Interval("Memcpy DtoD", 50.0, 52.0)],
        span_us=52.0,
        label="made up",
    )
    assert tl.kernels == 3
    assert tl.gpu_busy_us == pytest.approx(27.0)
    assert tl.gpu_idle_us == pytest.approx(25.0)  # 0-10 and 25-40
    again = Timeline.from_dict(json.loads(json.dumps(tl.to_dict())))
    assert again == tl
    assert tl.to_dict()["gpu_idle_us"] == pytest.approx(25.0)


def test_a_launch_gap_before_a_steady_step_is_not_idle_inside_it():
    """Steady state: the replay call of step k is issued while step k-1 still runs.

    Drawn from its first kernel, the step's idle time is the gaps between its own
    kernels (and before the next step's first kernel), not the launch latency before it.
    """
    launch = Interval("cudaGraphLaunch", -590.0, -580.0)  # issued while the previous step ran
    kernels = [Interval(f"k{i}", 10.0 * i, 10.0 * i + 9.0) for i in range(100)]
    tl = Timeline(cpu=[launch], gpu=kernels, span_us=1000.0, label="replay")
    assert tl.gpu_idle_us == pytest.approx(100 * 1.0)
    assert tl.gpu_idle_share == pytest.approx(0.10)
    assert tl.gpu_idle_spans()[0] == (9.0, 10.0)


def test_kernel_predicate_and_interval_union():
    assert is_kernel_name("void at::native::elementwise_kernel<128, 4>")
    assert not is_kernel_name("Memcpy HtoD (Pageable -> Device)")
    assert not is_kernel_name("Memset (Device)")
    assert merged_spans([(5, 7), (0, 2), (1, 3), (7, 8)]) == [(0, 3), (5, 8)]


@pytest.mark.gpu
def test_cuda_eager_counts_kernels_and_launches():
    x = torch.randn(256, device="cuda")

    def step():
        return torch.tanh(x * 2 + 1)

    count = count_launches(step, num_layers=1, device="cuda")
    assert count.device == "cuda"
    assert count.kernels >= 3
    assert count.launch_calls >= count.kernels


@pytest.mark.gpu
def test_cuda_graph_replay_is_one_launch_call():
    x = torch.randn(256, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            y = torch.tanh(x * 2 + 1)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = torch.tanh(x * 2 + 1)
    count = count_launches(graph.replay, num_layers=1, device="cuda")
    assert 1 <= count.launch_calls <= 3
    assert count.kernels >= 3 or count.note
    tl = steady_timeline(graph.replay, label="graph", device="cuda")
    assert [i.name.split("_v")[0] for i in tl.cpu].count("cudaGraphLaunch") == 1
    assert tl.kernels == 3 and tl.gpu[0].start_us == 0.0
    assert 0.0 <= tl.gpu_idle_share < 1.0
    del y


def test_kernel_table_groups_gpu_time_by_short_kernel_name():
    gpu = [Interval("void at::native::vectorized_layer_norm_kernel<float>(int)", 0, 2),
           Interval("void at::native::vectorized_layer_norm_kernel<float>(int)", 5, 7),
           Interval("nvjet_sm90_tst_64x8", 8, 14)]
    table = kernel_table(Timeline(cpu=[], gpu=gpu, span_us=14, label="t"))
    assert [r["kernel"] for r in table] == ["nvjet_sm90_tst_64x8", "vectorized_layer_norm_kernel"]
    assert table[1]["count"] == 2 and table[1]["total_us"] == 4 and table[1]["mean_us"] == 2
    assert abs(sum(r["share"] for r in table) - 1) < 1e-9
