"""Collectives timed in windows on synchronised clocks (--method window, kernels/harness/clocks.c): a
clock offset and drift planted on one rank are found within the errors the synchronisation states, and
the planted skew does not reach the latency the windows measure."""

import numpy as np
import pytest

from commbench.launch.placement import Placement

from conftest import LIBRARIES, QUICK_START, launch

pytestmark = [pytest.mark.mpi, pytest.mark.alone]   # offsets, drifts and delays: timed without a neighbour

ON_NODE = Placement("1N2P", 1, 2)
COMMON = ["--sizes", "8", "--min-samples", "5", "--max-samples", "50", "--max-point-time", "0.3"]
PLANTED = {"offset": 0.25, "drift": 1e-3}


def plant(offset: float, drift: float) -> list[str]:
    return ["--test-clock-offset", str(offset), "--test-clock-drift", str(drift)]


@pytest.mark.parametrize("library", LIBRARIES)
def test_the_synchronisation_finds_a_planted_offset_and_drift_within_its_stated_error(workspace, built, tmp_path,
                                                                                     library):
    """clock_gettime(CLOCK_MONOTONIC) is one clock for every rank of a host: what the fit finds is the
    plant, and nothing without one. (MPI_Wtime is not one clock under Open MPI, whose ranks count from
    their own MPI_Init: there the fit finds those milliseconds as well.)"""
    for truth in ({"offset": 0.0, "drift": 0.0}, PLANTED):
        args = ["coll.bcast", "--method", "window", "--timer", "clock_monotonic", *COMMON,
                *plant(truth["offset"], truth["drift"])]
        result = launch(workspace, library, ON_NODE, args, tmp_path, library_env=QUICK_START[library])
        assert result.status == "ok", result.launch.get("console_tail")
        [fit] = result.run["kernel_info"]["clock_sync"]["ranks"]
        print(library, truth, fit)
        assert abs(fit["offset_s"] - truth["offset"]) <= fit["offset_error_s"] < 1e-4, fit
        assert abs(fit["drift"] - truth["drift"]) <= fit["drift_error"] < 1e-4, fit


def test_a_planted_clock_skew_does_not_reach_the_latency_of_windows(workspace, built, tmp_path):
    """Uncorrected, a quarter of a second of offset would make every window late or a quarter of a second
    long; corrected, the skewed launches read the latency of the plain ones (alternated, median ratio).
    The drift is a poor oscillator's, 10 ppm: the model is extrapolated over the whole launch, and an
    error of 1e-6 in a planted drift of 1e-3 (as the test above finds) is a microsecond a second later,
    more than this latency."""
    ratios = []
    for _ in range(3):
        times = {}
        for name, extra in (("plain", []), ("skewed", plant(PLANTED["offset"], 1e-5))):
            result = launch(workspace, LIBRARIES[0], ON_NODE, ["coll.allreduce", "--method", "window", *COMMON, *extra],
                            tmp_path)
            assert result.status == "ok", result.launch.get("console_tail")
            times[name] = float(np.median(result.points[0].samples))
        ratios.append(times["skewed"] / times["plain"])
    print("skewed / plain window latency:", ratios)
    assert 0.5 < np.median(ratios) < 2.0, ratios


def test_methods_states_the_recorded_synchronisation(workspace, built, tmp_path):
    from commbench.campaign import Campaign, validate_campaign
    from commbench.data.collect import build_dataset
    from commbench.report.methods import methods

    result = launch(workspace, LIBRARIES[0], ON_NODE, ["coll.allreduce", "--method", "window", *COMMON], tmp_path)
    assert result.status == "ok", result.launch.get("console_tail")
    config = validate_campaign({"campaign": "c", "libraries": {LIBRARIES[0]: {"mpi": LIBRARIES[0]}},
                                "placements": [{"name": "1N2P", "nodes": 1, "ppn": 2}],
                                "kernels": {"coll.allreduce": {"sizes": {"list": [8]}, "method": "window"}},
                                "launches": 1})
    ds = build_dataset(Campaign("c", "<test>", config), [result], {}, {})
    [kernels] = [section for section in methods(ds) if section.heading == "Kernels and what one sample is"]
    synchronisation = result.run["kernel_info"]["clock_sync"]
    [fit] = synchronisation["ranks"]
    assert synchronisation["ranks_fitted"] == 1 and synchronisation["largest"]["offset_s"] == pytest.approx(
        abs(fit["offset_s"]), rel=1e-2, abs=1e-12)
    item = next(item for item in kernels.items if item.startswith("coll.allreduce"))
    assert (f"method window (each rank's clock fitted against rank 0's (offset and drift) from 12 bursts of 20 "
            f"ping-pongs in 1 launch(es): offsets up to {synchronisation['largest']['offset_s'] * 1e6:.3g} us") \
        in item, item
    skew = float(np.median(result.points[0].exit_skew_s))   # the dataset's: the median over the samples
    assert float(ds["exit_skew_s"].squeeze()) == pytest.approx(skew)
    assert f"the ranks left a window {skew * 1e6:.3g} us apart (exit skew, the last finish less the first; " \
           f"median over 1 point, " in item, item


def test_a_bcast_whose_last_rank_enters_late_reads_at_least_the_delay_in_windows(workspace, built, tmp_path):
    """The last rank enters every call 50 us late (--test-late-entry), so no call can end sooner: windows
    read at least that, and so does the upper bound; the other methods are printed beside them."""
    late = 50e-6
    found = {}
    for method in ("window", "accurate", "lower", "upper"):
        result = launch(workspace, LIBRARIES[0], ON_NODE, ["coll.bcast", "--method", method, *COMMON,
                                                            "--test-late-entry", str(late)], tmp_path)
        assert result.status == "ok", result.launch.get("console_tail")
        found[method] = float(np.median(result.points[0].samples))
    print("bcast 8 B, last rank 50 us late:", {method: f"{t * 1e6:.2f} us" for method, t in found.items()})
    assert late <= found["window"] < late + 20e-6, found
    assert found["upper"] >= late, found


def test_exit_skew_is_how_far_apart_the_ranks_leave_a_late_rank_s_bcast_and_allreduce(workspace, built, tmp_path):
    """With the last rank 50 us late into every call, a Bcast's root has sent before the late rank
    arrives and leaves about 50 us before it; an Allreduce waits for every rank's contribution, so its
    ranks leave together. Windows record both, one exit skew per sample."""
    late = 50e-6
    skew = {}
    for kernel in ("coll.bcast", "coll.allreduce"):
        result = launch(workspace, LIBRARIES[0], ON_NODE, [kernel, "--method", "window", *COMMON,
                                                          "--test-late-entry", str(late)], tmp_path)
        assert result.status == "ok", result.launch.get("console_tail")
        [point] = result.points
        assert point.exit_skew_s is not None and len(point.exit_skew_s) == len(point.samples)
        skew[kernel] = float(np.median(point.exit_skew_s))
    print("exit skew, last rank 50 us late:", {kernel: f"{s * 1e6:.2f} us" for kernel, s in skew.items()})
    assert 0.8 * late <= skew["coll.bcast"] < late + 20e-6, skew
    assert skew["coll.allreduce"] < 0.2 * late, skew
    # Other methods time no rank's finish: no exit skew is recorded.
    result = launch(workspace, LIBRARIES[0], ON_NODE, ["coll.bcast", "--method", "accurate", *COMMON], tmp_path)
    assert result.points[0].exit_skew_s is None
