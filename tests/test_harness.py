"""The C harness on its own: records, options and errors, with each real MPI library."""

import json
import os
import shlex
import subprocess

import pytest

from commlens.launch import locks

from conftest import LIBRARIES

pytestmark = pytest.mark.mpi


def run_kernels(workspace, library, *args, nprocs=2):
    env_dir = workspace / "build" / "envs" / library
    binary = workspace / "build" / "kernels" / library / "commlens-kernels"
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    command = f". {env_dir}/activate.sh && mpiexec -n {nprocs} {binary} " + shlex.join(args)
    # The machine's lock, as a campaign's launch takes it: beside another worker's launch, two busy-polling
    # ranks each on two cores calibrated at 5 times a quiet ping-pong's time, and a later sample was short.
    with locks.machine("the harness run by a test"):
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("library", LIBRARIES)
def test_records_follow_the_contract(workspace, built, library, tmp_path):
    out = tmp_path / "run.jsonl"
    proc = run_kernels(workspace, library, "pingpong.send", "--sizes", "0,8,4096",
                       "--min-samples", "4", "--max-samples", "50", "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    run, mpi_t, points, end = records[0], records[1], records[2:-1], records[-1]
    assert run["record"] == "run" and run["schema"] == 1 and run["nprocs"] == 2
    # What the library ran with, read through MPI_T after MPI_Init: every control variable it has.
    assert mpi_t["record"] == "mpi_t" and mpi_t["status"] == "ok" and len(mpi_t["cvars"]) > 100
    assert run["kernel"] == "pingpong.send" and "half round trip" in run["metric"]
    assert run["timer_resolution_s"] > 0 and run["harness_overhead_s"] >= 0
    assert len(run["hosts"]) == 2 and len(run["cpu_binding"]) == 2
    assert [p["size"] for p in points] == [0, 8, 4096]
    for p in points:
        assert p["record"] == "point" and 4 <= len(p["samples"]) <= 50
        assert all(s > 0 for s in p["samples"]) and p["iters_per_sample"] >= 1
        # A sample lasts at least the minimum sample time (1e-4 s by default).
        assert min(p["samples"]) * p["iters_per_sample"] * 2 >= 0.5e-4
    assert end == {"record": "end", "status": "ok", "points": 3, "finished": end["finished"],
                   "elapsed_s": end["elapsed_s"]} and end["elapsed_s"] > 0


@pytest.mark.alone      # a neighbour's load could slow the samples after the planted ones too
def test_samples_start_again_long_enough_when_every_calibration_batch_was_slowed(workspace, built, tmp_path):
    """--test-slow-batches 8: the warm-up, the calibration's five batches and the first two samples of each size
    read 2 ms longer, as when another process holds a core throughout calibrating, which then settles
    on one iteration a sample. The first sample that runs at the real rate is far shorter than the minimum
    sample time (1e-4 s): the size's samples start again with iterations enough, so that every sample
    kept lasts at least half of it, none of the slowed ones among them."""
    out = tmp_path / "run.jsonl"
    proc = run_kernels(workspace, LIBRARIES[0], "pingpong.send", "--sizes", "0,8", "--test-slow-batches", "8",
                       "--min-samples", "5", "--max-samples", "20", "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    points = [record for record in map(json.loads, out.read_text().splitlines()) if record["record"] == "point"]
    for point in points:
        assert point["iters_per_sample"] > 10, point
        assert min(point["samples"]) * point["iters_per_sample"] * 2 >= 0.5e-4, point
        # A slowed sample would hold a 2 ms batch: none is kept, and the record counts those left out: the
        # two slowed, the first at the real rate, and any that started again once more (a first fast sample
        # still warming up, twice as slow as the later ones, calibrates them too short in turn).
        assert max(point["samples"]) * point["iters_per_sample"] * 2 < 1e-3, point
        assert point["short_samples_dropped"] >= 3, point


@pytest.mark.parametrize("args, message", [
    (["no.such.kernel"], "unknown kernel no.such.kernel"),
    (["pingpong.send", "-m", "8:1"], "-m 8:1: MIN (8) must be <= MAX (1)"),
    (["pingpong.send", "--timer", "sundial"], "--timer sundial: expects mpi_wtime | clock_monotonic"),
    (["pingpong.send", "--min-samples", "1"], "--min-samples 1: must be from 2 to 2147483647"),
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


def sizes_of(workspace, *args):
    proc = run_kernels(workspace, LIBRARIES[0], "pingpong.send", "--print-sizes", *args, nprocs=1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [int(line) for line in proc.stdout.split()]


def test_size_schedules_exact_values(workspace, built):
    assert sizes_of(workspace, "-m", "1:64") == [1, 2, 4, 8, 16, 32, 64]
    assert sizes_of(workspace, "-m", "0:8") == [0, 1, 2, 4, 8]
    assert sizes_of(workspace, "--schedule", "large", "-m", "1:100") == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96]
    assert sizes_of(workspace, "--schedule", "netpipe", "-m", "1:70") == [
        1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 14, 16, 19, 20, 23, 26, 29, 32, 35, 42, 45, 48, 61, 64, 67]
    assert sizes_of(workspace, "--schedule", "netpipe", "-m", "64:256", "--per-octave", "1",
                    "--perturbation", "1") == [64, 65, 127, 128, 129, 255, 256]
    small = sizes_of(workspace, "--schedule", "small")
    assert small[:4] == [4, 32, 64, 96] and small[-1] == 8000 and len(small) == 251
    assert sizes_of(workspace, "--schedule", "small", "-m", "10:100", "--step", "25") == [10, 25, 50, 75, 100]
    assert sizes_of(workspace, "--sizes", "64,8,1024") == [64, 8, 1024]


def test_bad_schedules_are_refused(workspace, built):
    for args, message in ((["--sizes", "8,8"], "--sizes 8,8: 8 is in the list twice"),
                          (["--schedule", "zipf"], "--schedule zipf: expects powers | netpipe | small | large | list"),
                          (["--schedule", "small", "--step", "0"], "--step 0: must be at least 1 B"),
                          (["--schedule", "large", "-m", "5:5"],
                           "no sizes: the schedule between -m's MIN and MAX is empty")):
        proc = run_kernels(workspace, LIBRARIES[0], "pingpong.send", "--print-sizes", *args, nprocs=1)
        assert proc.returncode != 0 and message in proc.stderr, (args, proc.stderr)


def records(path):
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return lines[0], [line for line in lines if line["record"] == "point"], lines[-1]


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("timing", ["precision", "osu"])
def test_integrity_mode_checks_every_byte_and_catches_an_injected_fault(workspace, built, library, timing, tmp_path):
    # -i 4 is 4 batches of one iteration (--min-samples 3) by default, 4 single iterations with --osu.
    common = ["pingpong.send", "--sizes", "1,1000,70000", "--integrity", "--min-samples", "3",
              "--max-samples", "5", "-i", "4", "-x", "2", "--timing", timing]
    clean, faulty = tmp_path / "clean.jsonl", tmp_path / "faulty.jsonl"
    assert run_kernels(workspace, library, *common, "-o", str(clean)).returncode == 0
    assert run_kernels(workspace, library, *common, "--inject-fault", "-o", str(faulty)).returncode == 0
    assert [p["errors"] for p in records(clean)[1]] == [0, 0, 0]
    run, points, _ = records(faulty)
    assert run["args"]["integrity"] and run["args"]["inject_fault"] and run["args"]["timing"] == timing
    # One corrupted byte per batch: the warm-up's and each of the 4 timed batches'.
    assert [p["errors"] for p in points] == [1 + 4] * 3
    assert [len(p["samples"]) for p in points] == [4] * 3 and all(p["iters_per_sample"] == 1 for p in points)


def test_without_integrity_errors_are_not_claimed(workspace, built, tmp_path):
    out = tmp_path / "run.jsonl"
    assert run_kernels(workspace, LIBRARIES[0], "pingpong.send", "--sizes", "8", "-o", str(out)).returncode == 0
    assert records(out)[1][0]["errors"] is None


def test_shuffled_order_measures_the_same_set_of_sizes(workspace, built, tmp_path):
    orders = []
    for seed in ("1", "2"):
        out = tmp_path / f"shuffled{seed}.jsonl"
        proc = run_kernels(workspace, LIBRARIES[1], "pingpong.send", "-m", "1:65536", "--shuffle", seed,
                           "--min-samples", "3", "--max-samples", "3", "--min-sample-time", "1e-5", "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        run, points, _ = records(out)
        measured = [p["size"] for p in points]
        assert run["args"]["order"] == measured and run["args"]["shuffle_seed"] == int(seed)
        assert sorted(measured) == [2**k for k in range(17)]
        orders.append(measured)
    assert orders[0] != orders[1] and orders[0] != sorted(orders[0])


def test_cache_rotation_alignment_and_datatype_are_recorded(workspace, built, tmp_path):
    out = tmp_path / "rotate.jsonl"
    proc = run_kernels(workspace, LIBRARIES[0], "pingpong.send", "--sizes", "8,4096", "--cache", "rotate",
                       "--cache-size", "8388608", "--align", "8", "--datatype", "double", "--integrity",
                       "--min-samples", "3", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    run, points, _ = records(out)
    assert run["args"]["cache"] == "rotate" and run["args"]["buffer_bytes"] == 8388608
    assert run["args"]["align"] == 8 and run["args"]["datatype"] == "double"
    assert [p["errors"] for p in points] == [0, 0]
    proc = run_kernels(workspace, LIBRARIES[0], "pingpong.send", "--sizes", "12", "--datatype", "double")
    assert proc.returncode != 0
    assert "size 12: with --datatype int or double, every size must be a multiple of 8 bytes" in proc.stderr


def test_a_build_describes_the_catalogue_and_has_every_kernel(workspace, built):
    """The build's own --describe is the catalogue tool's (the one description of each kernel), and the
    project's strict build against the newest libraries has every kernel."""
    from commlens.launch.catalogue import catalogue, parse_description

    listed = json.loads((workspace / "build" / "kernels" / LIBRARIES[0] / "build.json").read_text())["kernels"]
    described = parse_description("\n".join(json.dumps(k) for k in listed))
    assert described == catalogue()
    assert all(k["metric"] and k["available"] for k in listed)
