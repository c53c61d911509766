"""The C harness on its own: records, options and errors, with each real MPI library."""

import json
import os
import subprocess

import pytest

from conftest import LIBRARIES

pytestmark = pytest.mark.mpi


def run_kernels(workspace, library, *args, nprocs=2):
    env_dir = workspace / "build" / "envs" / library
    binary = workspace / "build" / "kernels" / library / "commbench-kernels"
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    command = f". {env_dir}/activate.sh && mpiexec -n {nprocs} {binary} " + " ".join(args)
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("library", LIBRARIES)
def test_records_follow_the_contract(workspace, built, library, tmp_path):
    out = tmp_path / "run.jsonl"
    proc = run_kernels(workspace, library, "pingpong.send", "--sizes", "0,8,4096",
                       "--min-samples", "4", "--max-samples", "50", "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    run, points, end = records[0], records[1:-1], records[-1]
    assert run["record"] == "run" and run["schema"] == 1 and run["nprocs"] == 2
    assert run["kernel"] == "pingpong.send" and "half round trip" in run["metric"]
    assert run["timer_resolution_s"] > 0 and run["harness_overhead_s"] >= 0
    assert len(run["hosts"]) == 2 and len(run["cpu_binding"]) == 2
    assert [p["size"] for p in points] == [0, 8, 4096]
    for p in points:
        assert p["record"] == "point" and 4 <= len(p["samples"]) <= 50
        assert all(s > 0 for s in p["samples"]) and p["iters_per_sample"] >= 1
        # A sample lasts at least the minimum sample time (1e-4 s by default).
        assert min(p["samples"]) * p["iters_per_sample"] * 2 >= 0.5e-4
    assert end == {"record": "end", "status": "ok", "points": 3, "finished": end["finished"]}


@pytest.mark.parametrize("args, message", [
    (["no.such.kernel"], "unknown kernel"),
    (["pingpong.send", "-m", "8:1"], "MIN <= MAX"),
    (["pingpong.send", "--timer", "sundial"], "mpi_wtime or clock_monotonic"),
    (["pingpong.send", "--min-samples", "1"], "--min-samples must be >= 2"),
])
def test_bad_options_exit_with_a_message(workspace, built, args, message):
    proc = run_kernels(workspace, LIBRARIES[0], *args)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr


def test_one_rank_is_too_few_for_a_ping_pong(workspace, built):
    proc = run_kernels(workspace, LIBRARIES[0], "pingpong.send", "--sizes", "8", nprocs=1)
    assert proc.returncode != 0 and "too few ranks" in proc.stdout + proc.stderr


def test_clock_monotonic_timer_is_recorded(workspace, built, tmp_path):
    out = tmp_path / "run.jsonl"
    proc = run_kernels(workspace, LIBRARIES[1], "pingpong.send", "--sizes", "8", "--timer", "clock_monotonic",
                       "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(out.read_text().splitlines()[0])["timer"] == "clock_gettime(CLOCK_MONOTONIC)"
