"""Real ground truth for the detectors: what a library setting or an emulated network is known
to do, measured through the real launcher and found again by commbench.anomalies.

(1) Open MPI over TCP sends messages up to btl_tcp_eager_limit eagerly and larger ones
    with a rendezvous: the protocol switch must move to the configured limit.
"""

import numpy as np
import pytest

from commbench.anomalies import detect
from commbench.launcher import Placement
from commbench.models import fit_piecewise

from conftest import launch

pytestmark = pytest.mark.mpi

OPEN_MPI = "openmpi-5.0.11"


def measure(workspace, tmp_path, placement, kernel_args, sizes, launches, library_env=None):
    """times (n_sizes, n_launches, n_samples) of `sizes`, each launch in its own shuffled order."""
    per_launch = []
    for number in range(launches):
        args = [*kernel_args, "--sizes", ",".join(map(str, sizes)), "--shuffle", str(number + 1)]
        result = launch(workspace, OPEN_MPI, placement, args, tmp_path, library_env=library_env)
        assert result.status == "ok", result.launch.get("console_tail")
        per_launch.append({point.size: point.samples for point in result.points})
    width = max(len(samples) for run in per_launch for samples in run.values())
    times = np.full((len(sizes), launches, width), np.nan)
    for number, run in enumerate(per_launch):
        for row, size in enumerate(sizes):
            times[row, number, :len(run[size])] = run[size]
    return times


@pytest.mark.parametrize("eager_limit", [8192, 32768])
def test_eager_limit_moves_the_protocol_switch_to_it(workspace, built, tmp_path, eager_limit):
    step = eager_limit // 16
    sizes = list(range(eager_limit // 4, 2 * eager_limit + 1, step))
    times = measure(workspace, tmp_path, Placement("2N1P", 2, 1),
                    ["pingpong.send", "--min-samples", "20", "--max-samples", "100", "--max-point-time", "0.3"],
                    sizes, launches=3, library_env={"OMPI_MCA_btl_tcp_eager_limit": str(eager_limit)})
    found = detect(sizes, times)
    switches = found[found["kind"] == "protocol_switch"]
    assert len(switches), f"no protocol switch found:\n{found}"
    # The rendezvous costs a round trip more: the largest jump is the eager limit.
    largest = switches.loc[switches["magnitude"].idxmax()]
    print(f"eager limit {eager_limit} B: protocol switch at {largest['size']:.0f} B "
          f"(+{largest['magnitude'] * 1e6:.1f} us, score {largest['score']:.0f}); all findings:\n{found}")
    assert abs(largest["size"] - eager_limit) <= step
    assert largest["magnitude"] > 0
    breakpoints = fit_piecewise(sizes, times).breakpoints_bytes
    assert any(abs(b - eager_limit) <= step for b in breakpoints), breakpoints
