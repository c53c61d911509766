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
    lib = ctypes.CDLL(str(build / "libcbstopping.so"))
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


def test_noise_needs_about_cv_over_target_squared_samples(rule):
    rng = np.random.default_rng(3)
    cv, target = 0.2, 0.01   # sd 20% of the mean -> about (0.2 / 0.01)^2 = 400 samples
    takes = [rule(1e-6 * (1 + cv * rng.standard_normal(5000)), rse=target, max_samples=5000)
             for _ in range(20)]
    median_taken = np.median([t for t, _, _ in takes])
    assert 300 <= median_taken <= 520, median_taken
    assert all(settled and rse <= target for _, rse, settled in takes)


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
