"""Every kernel on the smallest placement it needs, on both libraries, through the real launcher;
and the effects the reports rely on: eager limits, copy bounds, an emulated network's rate."""

import numpy as np
import pytest

from commbench.campaign import known_kernels
from commbench.launcher import Placement
from commbench import netem

from conftest import LIBRARIES, launch

pytestmark = pytest.mark.mpi

FOUR_RANKS = ("multipair.", "ring.", "halo.")
NO_INTEGRITY = ("rma.get", "halo.jacobi2d", "memcpy", "tcp.pingpong")
ON_NODE = Placement("1N2P", 1, 2)


def quick(kernel, sizes="8,4096", *extra):
    args = [kernel, "--sizes", sizes, "--min-samples", "3", "--max-samples", "20", "--max-point-time", "0.5",
            "--min-sample-time", "2e-5", "-x", "2", "--window", "4"]
    if kernel not in NO_INTEGRITY:
        args.append("--integrity")
    return args + list(extra)


@pytest.mark.parametrize("kernel", known_kernels())
@pytest.mark.parametrize("library", LIBRARIES)
def test_kernel_runs_and_gives_sane_values(workspace, built, tmp_path, library, kernel):
    placement = Placement("1N4P", 1, 4) if kernel.startswith(FOUR_RANKS) else ON_NODE
    sizes = "512,2048" if kernel.startswith("halo.") else "8,4096"
    result = launch(workspace, library, placement, quick(kernel, sizes), tmp_path)
    assert result.status == "ok", result.launch.get("console_tail")
    assert result.run["kernel"] == kernel and result.run["metric"]
    assert [p.size for p in result.points] == [int(s) for s in sizes.split(",")]
    for point in result.points:
        times = np.array(point.samples)
        # Oversubscribed 4-rank runs on 2 cores are slow, but not absurdly so.
        assert (times > 1e-10).all() and (times < 0.05).all(), (point.size, times)
        if kernel in NO_INTEGRITY:
            assert point.errors is None
        else:
            assert point.errors == 0, f"{kernel} corrupted {point.errors} bytes at {point.size} B"


def test_integrity_limits_are_refused_with_a_reason(workspace, built, tmp_path):
    result = launch(workspace, LIBRARIES[0], ON_NODE, quick("rma.put", "8", "--rma-sync", "lock"), tmp_path)
    assert result.status == "failed" and "needs --rma-sync fence" in result.launch["console_tail"]


def medians(result) -> dict[int, float]:
    return {p.size: float(np.median(p.samples)) for p in result.points}


@pytest.mark.parametrize("library", LIBRARIES)
def test_ssend_pays_a_handshake_below_the_eager_limit_only(workspace, built, tmp_path, library):
    """Send returns once buffered below the eager limit; Ssend always waits for the match."""
    # Over TCP, MPICH leaves eager mode above 128 B, Open MPI above 64 KiB: 8 and 64 B are below both.
    sizes = [8, 64, 4194304]
    args = ["--sizes", ",".join(map(str, sizes)), "--min-samples", "10", "--max-samples", "300",
            "--max-point-time", "1", "--rse", "0.02"]
    ratios = {s: [] for s in sizes}
    for _ in range(3):                       # alternate, and judge the median ratio
        send = medians(launch(workspace, library, Placement("2N1P", 2, 1), ["pingpong.send", *args], tmp_path))
        ssend = medians(launch(workspace, library, Placement("2N1P", 2, 1), ["pingpong.ssend", *args], tmp_path))
        for size in ratios:
            ratios[size].append(ssend[size] / send[size])
    median = {size: float(np.median(r)) for size, r in ratios.items()}
    # Below the limit the handshake costs about one more round trip; above it both rendezvous.
    assert median[8] > 1.3 and median[64] > 1.3, median
    assert 0.75 < median[4194304] < 1.33, median


@pytest.mark.parametrize("library", LIBRARIES)
def test_stream_bandwidth_is_bounded_by_a_single_core_copy(workspace, built, tmp_path, library):
    """Moving 4 MiB between processes cannot beat copying it, and should not be far from it."""
    size = 4 * 2**20
    args = ["--sizes", str(size), "--cache", "rotate", "--min-samples", "5", "--max-point-time", "2", "--window", "16"]
    copy = medians(launch(workspace, library, ON_NODE, ["memcpy", *args], tmp_path))[size]
    stream = medians(launch(workspace, library, ON_NODE, ["stream.uni", *args], tmp_path))[size]
    ratio = stream / copy                    # time per message over time per copy
    assert 0.8 < ratio < 4, f"stream.uni at 4 MiB takes {ratio:.2f}x the time of a memcpy"


def test_emulated_network_delivers_its_rate_less_headers(workspace, built, tmp_path):
    reason = netem.unavailable_reason()
    if reason:
        pytest.skip(reason)
    network = {"rate": "1gbit", "mtu": 1500}
    placement = Placement("2N1P-1g", 2, 1, network)
    size = 2**20
    result = launch(workspace, LIBRARIES[1], placement,
                    ["stream.uni", "--sizes", f"1024,{size}", "--window", "8", "--min-samples", "3",
                     "--max-point-time", "2"], tmp_path)
    assert result.status == "ok", result.launch.get("console_tail")
    assert result.launch["network"] == network
    bandwidth = size / medians(result)[size]
    expected = netem.expected_goodput_bytes_per_s("1gbit", 1500)
    assert abs(bandwidth / expected - 1) < 0.10, f"{bandwidth / 1e6:.1f} MB/s against {expected / 1e6:.1f} MB/s"
