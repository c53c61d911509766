"""The harness's stopping rule (kernels/harness/stopping.c) on synthetic sample streams."""

import ctypes
import subprocess

import numpy as np
import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def rule(tmp_path_factory):
    build = tmp_path_factory.mktemp("stopping")
    subprocess.run(["make", "-s", "-C", str(REPO / "kernels"), "stopping-lib", f"BUILD_DIR={build}"], check=True)
    lib = ctypes.CDLL(str(build / "libclstopping.so"))
    lib.cl_stopping_simulate.restype = ctypes.c_int
    lib.cl_stopping_simulate.argtypes = [
        ctypes.POINTER(ctypes.c_double), ctypes.c_int, ctypes.c_double, ctypes.c_int, ctypes.c_int,
        ctypes.c_double, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)]

    def simulate(samples, rse=0.01, min_samples=10, max_samples=500, max_time=1e9):
        values = np.ascontiguousarray(samples, dtype=np.float64)
        out_rse, out_settled = ctypes.c_double(), ctypes.c_int()
        taken = lib.cl_stopping_simulate(values.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), len(values),
                                         rse, min_samples, max_samples, max_time,
                                         ctypes.byref(out_rse), ctypes.byref(out_settled))
        return taken, out_rse.value, bool(out_settled.value)

    return simulate


def test_quiet_samples_stop_at_the_minimum(rule):
    taken, rse, settled = rule(np.full(1000, 1e-6) * (1 + 1e-4 * np.sin(np.arange(1000))))
    assert taken == 10 and settled and rse < 1e-4


def ar1(n, phi, rng):
    """n samples of unit variance, each phi-correlated with the one before (a neighbour's burst, a
    frequency step: successive samples on a real machine are alike)."""
    shocks = rng.standard_normal(n) * np.sqrt(1 - phi ** 2)
    values = np.empty(n)
    values[0] = rng.standard_normal()
    for i in range(1, n):
        values[i] = phi * values[i - 1] + shocks[i]
    return values


def test_noise_needs_about_the_medians_samples(rule):
    """The rule stops on the median's precision: for normal noise of sd 20% its standard error is
    1.2533 x 0.2 / sqrt(n), 1% at about 630 samples (a mean's rule would stop at about 400)."""
    rng = np.random.default_rng(3)
    cv, target = 0.2, 0.01
    takes = [rule(1e-6 * (1 + cv * rng.standard_normal(5000)), rse=target, max_samples=5000)
             for _ in range(20)]
    median_taken = np.median([t for t, _, _ in takes])
    assert 480 <= median_taken <= 900, median_taken
    assert all(settled and rse <= target for _, rse, settled in takes)


def test_the_precision_a_point_records_is_its_medians(rule):
    """What a point records as its RSE is the median's standard error as repetition shows it, within a
    third, for independent samples and for samples each 0.9-correlated with the one before (whose
    order statistics alone would claim three times the precision)."""
    rng = np.random.default_rng(7)
    for phi in (0.0, 0.9):
        medians, recorded = [], []
        for _ in range(200):
            samples = 1 + 0.2 * ar1(1000, phi, rng)
            _, rse, _ = rule(samples, rse=1e-9, min_samples=1000, max_samples=1000)
            medians.append(np.median(samples))
            recorded.append(rse)
        true = np.std(medians) / np.mean(medians)
        assert true / 1.35 <= np.median(recorded) <= true * 1.35, (phi, true, np.median(recorded))


def test_alike_successive_samples_need_more_of_them(rule):
    """Samples 0.9-correlated with the ones before carry less information each: the rule takes several
    times the samples it takes for independent ones of the same spread."""
    rng = np.random.default_rng(5)
    independent = np.median([rule(1 + 0.2 * ar1(20000, 0.0, rng), max_samples=20000)[0] for _ in range(10)])
    alike = np.median([rule(1 + 0.2 * ar1(20000, 0.9, rng), max_samples=20000)[0] for _ in range(10)])
    assert alike >= 4 * independent, (independent, alike)


def test_rare_long_delays_do_not_keep_a_point_sampling(rule):
    """2% of samples delayed by a heavy-tailed amount (an interrupt, a page fault): the median is
    known within 1% in a few dozen samples, where the mean's standard error never gets there."""
    rng = np.random.default_rng(11)
    for _ in range(10):
        samples = 1e-6 * (1 + 0.02 * rng.standard_normal(2000)
                          + (rng.random(2000) < 0.02) * rng.pareto(1.2, 2000) * 5)
        taken, rse, settled = rule(samples, max_samples=2000)
        assert settled and rse <= 0.01 and taken < 60, taken
        kept = samples[:2000]
        assert np.std(kept, ddof=1) / np.sqrt(len(kept)) / np.mean(kept) > 0.01


def test_sample_cap_keeps_everything_and_marks_unsettled(rule):
    rng = np.random.default_rng(4)
    taken, rse, settled = rule(1e-6 * (1 + rng.standard_normal(800) ** 2 * 3), max_samples=50)
    assert taken == 50 and not settled and rse > 0.01


def test_time_cap_stops_a_slow_point(rule):
    rng = np.random.default_rng(5)
    noisy = 0.1 * (1 + rng.standard_normal(500) ** 2)     # 0.1 s samples, heavy noise
    taken, _, settled = rule(noisy, max_time=1.0)
    assert taken < 20 and not settled


def test_never_stops_before_the_minimum(rule):
    taken, _, settled = rule(np.full(100, 1e-6), min_samples=37)
    assert taken == 37 and settled
