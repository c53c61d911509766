"""Reliability: bad input is refused before any job, hung and failed launches are killed and
recorded while the campaign completes, damaged raw files never enter a dataset, and no
result is lost to a changed configuration or an interruption."""

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commlens.campaign import Campaign, CampaignError, load_campaign, validate_campaign
from commlens.campaign.rounds import round_order
from commlens.data.collect import build_dataset, read_all
from commlens.data.failures import failures
from commlens.io.netcdf import write_dataset
from commlens.launch import locks
from commlens.launch.families.mpich import Hydra
from commlens.launch.supervision import alive, leftover_files, mapped_files
from commlens import open_campaign
from commlens.launch.preflight import ResourceError, check_resources, needs, resource_problems
from commlens.launch.placement import Placement
from commlens.report.methods.sections import methods
from commlens.io.raw import LAUNCH_STATUSES, RawFileError, read_raw

from conftest import REPO, interruptible, launch, small_campaign, snakemake, workflow_command
from conftest import campaign_error as refusal, write_campaign as write

LAUNCHER_NAMES = {"commlens-kernels", "mpiexec", "mpirun", "hydra_pmi_proxy", "prterun", "prted"}

BASE = textwrap.dedent("""
    campaign: base
    libraries:
      mpich: {mpi: mpich-5.0.2}
    placements:
      - {name: 1N2P, nodes: 1, ppn: 2}
    kernels:
      pingpong.send: {sizes: {list: [1, 1Ki]}}
""")


# --- Configuration: every error names the file, the key, the bad value and what is allowed ---

@pytest.mark.parametrize("change, expected", [
    (("{sizes: {list: [1, 1Ki]}}", "{sizes: {list: [1]}, windw: 4}"),
     ["kernels.pingpong.send: unknown key 'windw'", "did you mean 'window'?", "allowed keys: align"]),
    (("{sizes: {list: [1, 1Ki]}}", "{cache: rotat}"),
     ["kernels.pingpong.send.cache: 'rotat' is not allowed", "did you mean 'rotate'?",
      "allowed values: reuse, rotate"]),
    (("  mpich: {mpi", "  'mpich 5;rm -rf': {mpi"),
     ["libraries: 'mpich 5;rm -rf' is not allowed", "allowed: letters, digits, '.', '_', '+' and '-'"]),
    (("name: 1N2P", "name: '../1N2P'"),
     ["placements[0].name: '../1N2P' is not allowed", "allowed: letters, digits"]),
    (("pingpong.send:", "'pingpong.send@a b':"),
     ["kernels: 'pingpong.send@a b' is not allowed", "allowed: a kernel name"]),
    (("[1, 1Ki]", "[1, 1Ti]"),
     ["kernels.pingpong.send.sizes.list[1]: '1Ti' is not allowed", "allowed: bytes"]),
    (("{mpi: mpich-5.0.2}", "{mpi: mpich-5.0.2, env: {'BAD-NAME': 1}}"),
     ["libraries.mpich.env: 'BAD-NAME' is not allowed", "allowed: an environment variable name"]),
    (("{sizes: {list: [1, 1Ki]}}", "{test_hang_after: -1}"),
     ["kernels.pingpong.send.test_hang_after: -1 is less than the minimum of 0"]),
])
def test_config_errors_name_key_value_and_what_is_allowed(tmp_path, change, expected):
    message = refusal(tmp_path, BASE.replace(*change))
    for part in expected:
        assert part in message, message


def test_top_level_unknown_keys_and_bad_timeouts(tmp_path):
    message = refusal(tmp_path, BASE + "timout: 5\nprecision: {rse: 0.1, max_sample: 3}\n")
    assert "unknown key 'timout' (did you mean 'timeout'?)" in message
    assert "precision: unknown key 'max_sample' (did you mean 'max_samples'?)" in message
    assert "timeout: 0 is less than or equal to the minimum of 0" in refusal(tmp_path, BASE + "timeout: 0\n")


def test_every_launch_has_a_timeout_and_the_test_hang_option_maps_to_the_kernel(tmp_path):
    campaign = load_campaign(write(tmp_path, BASE.replace("{sizes: {list: [1, 1Ki]}}",
                                                          "{sizes: {list: [1, 1Ki]}, test_hang_after: 1}")))
    settings_ = campaign.launch_settings("mpich", "1N2P", "pingpong.send", 0)
    assert settings_["timeout"] == 300  # the default
    args = settings_["kernel_args"]
    assert args[args.index("--test-hang-after") + 1] == "1"
    plain = load_campaign(write(tmp_path, BASE, "plain.yaml"))
    assert "--test-hang-after" not in plain.kernel_args("pingpong.send", 0)
    schema = (REPO / "workflow" / "schemas" / "campaign.schema.yaml").read_text()
    assert "TEST ONLY" in schema.split("test_hang_after:")[1][:200]


# --- Resource guards: refused up front, with needed and available figures ---

def test_a_launch_larger_than_memory_is_refused_before_any_job(tmp_path):
    text = BASE.replace("pingpong.send: {sizes: {list: [1, 1Ki]}}",
                        "stream.uni: {sizes: {list: [1, 1Gi]}, window: 64, window_buffers: distinct}")
    campaign = load_campaign(write(tmp_path, text))
    with pytest.raises(ResourceError) as info:
        check_resources(campaign)
    message = str(info.value)
    assert message.startswith(str(tmp_path / "c.yaml"))
    assert "kernels.stream.uni on 1N2P: needs about 256 GiB of memory" in message, message
    assert "2 ranks x 2 buffers (1 GiB largest size x window 64, a buffer each)" in message
    assert "GiB available" in message

    # The workflow refuses it at parse time: no job is planned, not even a dry run's.
    (tmp_path / "config").mkdir()
    campaign_file = write(tmp_path / "config", text, "base.yaml")
    run = snakemake(tmp_path, "--configfile", str(campaign_file), "--dry-run", check=False)
    assert run.returncode != 0 and "needs about 256 GiB of memory" in run.stdout + run.stderr
    assert "rule run_launch" not in run.stdout
    cli = subprocess.run([sys.executable, "-m", "commlens.cli", "validate", str(campaign_file)],
                         capture_output=True, text=True)
    assert cli.returncode == 2 and "needs about 256 GiB of memory" in cli.stderr


def test_memory_estimate_counts_window_ranks_and_rotate_buffers(tmp_path):
    text = BASE.replace("pingpong.send: {sizes: {list: [1, 1Ki]}}",
                        "stream.uni: {sizes: {list: [1Mi]}, window: 64}\n"
                        "  stream.uni@distinct: {sizes: {list: [1Mi]}, window: 64, window_buffers: distinct}\n"
                        "  pingpong.send: {sizes: {list: [8]}, cache: rotate}\n"
                        "  io.own_file: {sizes: {list: [1Gi]}}")
    campaign = load_campaign(write(tmp_path, text))
    found = {(n.entry, n.resource): n.bytes for n in needs(campaign, cache_bytes=32 << 20)}
    assert found[("stream.uni", "memory")] == 2 * 2 * (2**20 + 4096)                 # 2 ranks, 2 buffers, one window's
    assert found[("stream.uni@distinct", "memory")] == 2 * 2 * (64 * 2**20 + 4096)   # a buffer per message: 64 x 1 MiB
    assert found[("pingpong.send", "memory")] == 2 * 2 * (64 * 2**20 + 4096)         # 2 x the 32 MiB cache
    assert found[("io.own_file", "disk")] == 2 * 2 * 2**30
    problems = resource_problems(campaign, memory=16 << 30, disk=1 << 30)
    assert problems == ["kernels.io.own_file on 1N2P: needs about 4 GiB of disk in scratch /tmp "
                        "(2 own files and a shared file of 2 x 1 GiB), 1 GiB free"], problems
    assert resource_problems(campaign, memory=16 << 30, disk=8 << 30) == []


# --- Raw files: refused whole, with file and line; property-based ---

def _launch(status="ok", **extra):
    return {"record": "launch", "schema": 1, "status": status, "library": "libA", "mpi": "m",
            "placement": "1N2P", "kernel": "pingpong.send", "launch": 0, **extra}


RUN = {"record": "run", "schema": 1, "kernel": "pingpong.send", "library_version": "v1", "nprocs": 2,
       "hosts": ["h", "h"], "timer": "MPI_Wtime", "timer_resolution_s": 1e-9, "harness_overhead_s": 2e-8}

finite_times = st.floats(min_value=1e-9, max_value=10, allow_nan=False, allow_infinity=False)
points = st.lists(st.tuples(st.integers(0, 2**22), st.lists(finite_times, min_size=1, max_size=4)),
                  min_size=0, max_size=4, unique_by=lambda p: p[0])


def _complete_file(points_) -> bytes:
    records = [_launch(), RUN] + [
        {"record": "point", "size": size, "samples": samples, "iters_per_sample": 3, "settled": True,
         "rse": 0.01, "errors": None} for size, samples in points_] + [
        {"record": "end", "status": "ok", "points": len(points_)}]
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _check_refusal(error: RawFileError, path: Path) -> None:
    assert str(error).startswith(str(path)), error
    assert error.path == str(path)
    if error.line is not None:
        assert str(error).startswith(f"{path}:{error.line}: ")


# Values a hostile or damaged file might hold where numbers and strings are expected.
odd_values = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                       st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
                       st.lists(st.integers(-3, 3), max_size=3),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
KEYS = ["record", "schema", "status", "library", "placement", "kernel", "launch", "size", "samples",
        "iters_per_sample", "settled", "rse", "errors", "subtracted_s", "short_samples_dropped", "points", "hosts",
        "library_version", "timer_resolution_s", "harness_overhead_s", "cpu_binding", "kernel_info", "metric"]


@st.composite
def mutated_records(draw):
    """A plausible file's records with some fields replaced, removed or added."""
    records = json.loads("[" + ",".join(_complete_file(draw(points)).decode().splitlines()) + "]")
    for _ in range(draw(st.integers(0, 4))):
        record = records[draw(st.integers(0, len(records) - 1))]
        key = draw(st.sampled_from(KEYS))
        if draw(st.booleans()):
            record[key] = draw(odd_values)
        else:
            record.pop(key, None)
    if draw(st.booleans()):
        records = draw(st.permutations(records))
    return records


PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROPERTY
@given(records=mutated_records())
def test_reader_accepts_only_well_formed_records_or_names_file_and_line(tmp_path, records):
    path = tmp_path / "launch0.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    try:
        result = read_raw(path)
    except RawFileError as error:
        _check_refusal(error, path)
        return
    # Accepted: whatever it holds is what a dataset can take without question.
    assert result.status in LAUNCH_STATUSES
    if result.status == "ok":
        assert result.end["points"] == len(result.points) == len({p.size for p in result.points})
        for p in result.points:
            assert all(math.isfinite(t) and t > 0 for t in p.samples) and p.iters_per_sample >= 1
            assert p.errors is None or (isinstance(p.errors, int) and p.errors >= 0)
        assert math.isfinite(result.run["timer_resolution_s"])
    else:
        assert result.run is None and not result.points


@PROPERTY
@given(data=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_reader_survives_arbitrary_bytes(tmp_path, data):
    path = tmp_path / "launch0.jsonl"
    path.write_bytes(data)
    try:
        read_raw(path)
    except RawFileError as error:
        _check_refusal(error, path)


@PROPERTY
@given(points_=points, cut=st.floats(0, 1, exclude_max=True))
def test_reader_never_accepts_a_truncated_file(tmp_path, points_, cut):
    whole = _complete_file(points_)
    path = tmp_path / "launch0.jsonl"
    path.write_bytes(whole)
    assert [p.size for p in read_raw(path).points] == [size for size, _ in points_]
    path.write_bytes(whole[:int(cut * len(whole))])
    with pytest.raises(RawFileError) as info:
        read_raw(path)
    _check_refusal(info.value, path)


def test_failure_log_lists_failed_and_refused_launches(tmp_path):
    timeout = tmp_path / "t.jsonl"
    timeout.write_text(json.dumps(_launch("timeout", exit_code=15, reason="killed after the 5 s timeout",
                                          console_tail="rank 1 waiting")) + "\n")
    damaged = tmp_path / "d.jsonl"
    damaged.write_text(json.dumps(_launch(launch=1)) + "\n" + json.dumps(RUN) + "\n")
    results, refused = read_all([timeout, damaged], on_error="record")
    entries = failures(results, refused)
    assert entries[0]["status"] == "timeout" and entries[0]["exit_code"] == 15
    assert entries[0]["console_tail"] == "rank 1 waiting" and entries[0]["raw"] == str(timeout)
    assert entries[1]["status"] == "refused" and entries[1]["launch"] == 1 and entries[1]["line"] == 2
    assert "no end record" in entries[1]["reason"]


def test_integrity_errors_accessor_lists_only_corrupted_points(tmp_path):
    config = {"campaign": "unit", "libraries": {"libA": {"mpi": "m"}},
              "placements": [{"name": "1N2P", "nodes": 1, "ppn": 2}],
              "kernels": {"pingpong.send": {"sizes": {"list": [8, 64]}}}, "launches": 1}
    campaign = Campaign(name="unit", source="unit.yaml", config=validate_campaign(config))
    records = [_launch(), RUN,
               {"record": "point", "size": 8, "samples": [1e-6], "iters_per_sample": 1, "errors": 0},
               {"record": "point", "size": 64, "samples": [1e-6], "iters_per_sample": 1, "errors": 3},
               {"record": "end", "status": "ok", "points": 2}]
    path = tmp_path / "launch0.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    ds = build_dataset(campaign, [read_raw(path)], {}, {})
    table = ds.commlens.integrity_errors()
    assert table[["library", "size", "errors"]].values.tolist() == [["libA", 64, 3]]


# --- Real launches ---

def leftovers(workspace: Path) -> list[str]:
    """Live processes of a launch in this workspace: MPI launchers, proxies, ranks, supervisors, and the
    workflow's launch jobs (workflow/scripts/run_launch.py)."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        try:
            cmdline = process.info["cmdline"] or []
            if process.info["status"] == psutil.STATUS_ZOMBIE or not cmdline:
                continue
            named = process.info["name"] in LAUNCHER_NAMES or Path(cmdline[0]).name in LAUNCHER_NAMES
            supervisor = "_supervise()" in " ".join(cmdline)
            job = cmdline[-1].endswith("run_launch.py")
            if (named or supervisor or job) and str(workspace) in " ".join(cmdline):
                found.append(f"{process.pid} {' '.join(cmdline)[:160]}")
        except psutil.Error:
            continue
    return found


def no_leftovers(workspace: Path, within_s: float = 15) -> list[str]:
    deadline = time.monotonic() + within_s
    while (left := leftovers(workspace)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


HANG = textwrap.dedent("""
    campaign: {name}
    libraries:
      mpich-5.0.2:    {{mpi: mpich-5.0.2}}
      openmpi-5.0.11: {{mpi: openmpi-5.0.11}}
    placements: [{{name: 1N2P, nodes: 1, ppn: 2}}]
    kernels:
      pingpong.send: {{sizes: {{list: [8, 1Ki]}}}}
      pingpong.send@hang: {{sizes: {{list: [8, 1Ki, 64Ki]}}, test_hang_after: 1}}
    launches: 1
    precision: {{rse: 0.2, min_samples: 3, max_samples: 30, max_point_time: 0.5}}
    timeout: {timeout}
""")


@pytest.mark.mpi
def test_hung_launch_is_killed_recorded_and_the_campaign_completes(workspace, built):
    campaign = write(workspace / "config" / "campaigns", HANG.format(name="hang", timeout=5), "hang.yaml")
    run = snakemake(workspace, "results/hang/hang.nc", "--configfile", str(campaign))
    assert "2 launches gave no data" in run.stdout + run.stderr
    ds = open_campaign(workspace / "results" / "hang" / "hang.nc")
    status = ds["status"].sel(placement="1N2P", launch=0)
    assert status.sel(kernel="pingpong.send@hang").values.tolist() == ["timeout", "timeout"]
    assert status.sel(kernel="pingpong.send").values.tolist() == ["ok", "ok"]
    assert (ds["sample_count"].sel(kernel="pingpong.send@hang") == 0).all()
    assert (ds["sample_count"].sel(kernel="pingpong.send") > 0).all()

    assert no_leftovers(workspace) == []
    log = [json.loads(line) for line in (workspace / "results" / "hang" / "failures.jsonl").read_text().splitlines()]
    assert sorted((e["library"], e["kernel"], e["status"]) for e in log) == [
        ("mpich-5.0.2", "pingpong.send@hang", "timeout"), ("openmpi-5.0.11", "pingpong.send@hang", "timeout")]
    for entry in log:
        assert entry["exit_code"] is not None and "killed after the 5 s timeout" in entry["reason"]
        assert 5 <= entry["duration_s"] < 5 + 20 and "console_tail" in entry
    raw = workspace / "results" / "hang" / "raw"
    assert not list(raw.rglob("*.partial")) and not list(raw.rglob("*.tmp"))

    # The next run measures the failed launches again (retries: 1 by default), and only those; the one after
    # has nothing to do. The dataset and Methods say which were retried and why.
    kept = {path: path.read_bytes() for path in raw.rglob("pingpong.send/*.jsonl")}
    run = snakemake(workspace, "results/hang/hang.nc", "--configfile", str(campaign))
    assert {path: path.read_bytes() for path in raw.rglob("pingpong.send/*.jsonl")} == kept
    ds = open_campaign(workspace / "results" / "hang" / "hang.nc")
    hung = ds.sel(placement="1N2P", launch=0, kernel="pingpong.send@hang")
    assert hung["attempt"].values.tolist() == [2, 2] and hung["status"].values.tolist() == ["timeout", "timeout"]
    for text in hung["retried_after"].values:
        (earlier,) = json.loads(text)
        assert earlier["status"] == "timeout" and "killed after the 5 s timeout" in earlier["reason"]
    assert (ds["attempt"].sel(kernel="pingpong.send") == 1).all()
    launches = next(section.paragraphs for section in methods(ds) if section.heading == "Launches and order")[0]
    assert "Measured again after a failed attempt (`retries`: 1)" in launches
    assert "mpich-5.0.2/1N2P/pingpong.send@hang/0, attempt 2, after timeout: killed after the 5 s" in launches
    again = snakemake(workspace, "results/hang/hang.nc", "--configfile", str(campaign))
    assert "Nothing to be done" in again.stdout + again.stderr

    # A raw file from the future (a clock set wrong) is read by its content, said, and given the time now:
    # Snakemake would otherwise fail collect on every run, taking it for a clock skew.
    future = raw / "mpich-5.0.2" / "1N2P" / "pingpong.send" / "launch0.jsonl"
    os.utime(future, (time.time() + 3600, time.time() + 3600))
    run = snakemake(workspace, "results/hang/hang.nc", "--configfile", str(campaign))
    output = run.stdout + run.stderr
    assert re.search(rf"{re.escape(str(future.relative_to(workspace)))}: modified in the future \(.*, 60 min ahead of "
                     r"this host's clock\); read by its content, its time set to now", output), output[-3000:]
    assert future.stat().st_mtime <= time.time() and "clock skew" not in output
    assert open_campaign(workspace / "results" / "hang" / "hang.nc")["status"].sel(
        kernel="pingpong.send", placement="1N2P", launch=0).values.tolist() == ["ok", "ok"]


@pytest.mark.mpi
@pytest.mark.alone   # what /dev/shm holds is the whole host's: a neighbour's killed launch would be in it
def test_a_launch_killed_at_its_timeout_leaves_no_shared_memory_segment(workspace, built, tmp_path):
    """MPICH's ranks, killed at the timeout, would leave their 2 MiB segment in /dev/shm for good (one
    per hung launch: 130 had gathered here before the launcher removed them). A segment some live
    process maps is another job's and stays."""
    segments = tuple(pattern for pattern in Hydra.leftovers if pattern.startswith("/dev/shm/"))
    before = leftover_files(segments)
    result = launch(workspace, "mpich-5.0.2", Placement("1N2P", 1, 2),
                    ["pingpong.send", "--sizes", "8,1024", "--min-samples", "3", "--test-hang-after", "1"],
                    tmp_path, timeout_s=3)
    assert result.status == "timeout", result.launch.get("console_tail")
    assert segments and not leftover_files(segments) - before - mapped_files()


HUNG_LAUNCH = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from conftest import launch
from commlens.launch.placement import Placement
from commlens.report.methods.sections import methods
launch(Path(sys.argv[2]), "mpich-5.0.2", Placement("1N2P", 1, 2),
       ["pingpong.send", "--sizes", "8,1024", "--min-samples", "3", "--test-hang-after", "1"], Path(sys.argv[3]),
       timeout_s=120)
"""


@pytest.mark.mpi
@pytest.mark.alone   # what /dev/shm and /tmp hold is the whole host's
def test_a_launch_whose_launcher_is_killed_outright_leaves_no_files_behind(workspace, built, tmp_path):
    """SIGKILL of the process running a launch (the OOM killer, a workflow killed with its jobs): it
    cleans nothing up, and its supervisor, which outlives it, ends the ranks and removes what they left
    (MPICH's shared-memory segment in /dev/shm) and the launch's own TMPDIR and scratch folder, holding the
    machine's lock until it has: the next launch finds the machine as this one found it."""
    before = leftover_files(Hydra.leftovers)
    segments = tuple(pattern for pattern in Hydra.leftovers if pattern.startswith("/dev/shm/"))
    launcher = subprocess.Popen([sys.executable, "-c", HUNG_LAUNCH, str(REPO / "tests"), str(workspace), str(tmp_path)])
    try:
        deadline = time.monotonic() + 60
        while not leftover_files(segments) - before:       # the ranks are in MPI_Init: they made their segment
            assert launcher.poll() is None and time.monotonic() < deadline, "the launch never started its ranks"
            time.sleep(0.1)
        supervisors = [p for p in psutil.Process(launcher.pid).children() if "_supervise()" in " ".join(p.cmdline())]
        assert len(supervisors) == 1
        ranks = [p for p in supervisors[0].children(recursive=True) if p.name() == "commlens-kernels"]
        assert ranks
        session = Path(supervisors[0].environ()["TMPDIR"])      # the launch's own
        assert session.is_dir() and session != Path(tempfile.gettempdir())
        arguments = ranks[0].cmdline()
        scratch = Path(arguments[arguments.index("--scratch") + 1])   # the kernel's files, the launch's own too
        assert scratch.is_dir()
    finally:
        launcher.kill()
        launcher.wait()
    with locks.machine("the test's next launch", wait_s=60):
        assert not [process.pid for process in supervisors + ranks if alive(process.pid)]
        assert not leftover_files(Hydra.leftovers) - before - mapped_files()
        assert not session.exists()
        assert not scratch.exists()


@pytest.mark.mpi
def test_a_launch_whose_scratch_cannot_be_made_is_recorded_failed_and_its_folders_are_not_guessable(workspace, built,
                                                                                                   tmp_path):
    """A scratch folder that cannot hold the launch's own (a path under /proc) records the launch as failed,
    naming it, instead of stopping the workflow; a launch's folders in shared places get names no other
    user can guess and take first (a link planted there would have been followed)."""
    from conftest import launch as one_launch

    placement = Placement(name="1N2P", nodes=1, ppn=2)
    args = ["pingpong.send", "--sizes", "8", "--min-samples", "3", "--max-samples", "3"]
    refused = one_launch(workspace, "mpich-5.0.2", placement, args, tmp_path, scratch="/proc/nonexistent")
    assert refused.status == "failed"
    assert refused.launch["reason"] == ("its scratch folder could not be made in /proc/nonexistent: "
                                        "No such file or directory")
    folders = []
    for _ in range(2):      # the same launch, the same raw file: its folder's name is drawn anew each time
        done = one_launch(workspace, "mpich-5.0.2", placement, args, tmp_path, scratch=tmp_path)
        assert done.status == "ok"
        command = done.launch["command"]
        folders.append(Path(command[command.index("--scratch") + 1]))
    assert folders[0] != folders[1] and all(folder.parent == tmp_path for folder in folders), folders
    assert not [folder for folder in folders if folder.exists()]


def _start(workspace, *args) -> subprocess.Popen:
    """snakemake in a session of its own, so that the test can interrupt or kill its whole group."""
    return subprocess.Popen(workflow_command(workspace, *args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, preexec_fn=interruptible)


def _wait_for_hung_launch(workspace, results: Path, process: subprocess.Popen) -> None:
    """Until a hanging launch is under way (its kernel has opened its output and stopped)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any("@hang" in str(p) for p in results.rglob("*.jsonl.partial")) and leftovers(workspace):
            time.sleep(1.0)
            return
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.2)
    raise AssertionError("no hung launch started")


def _snapshot(results: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes()) for p in results.rglob("launch*.jsonl")}


@pytest.mark.mpi
def test_interrupted_campaign_resumes_without_redoing_or_duplicating(workspace, built):
    # One library: what is redone or kept does not depend on which (the hang test runs both).
    text = HANG.format(name="resume", timeout=8).replace("  openmpi-5.0.11: {mpi: openmpi-5.0.11}\n", "").replace(
        "pingpong.send: {sizes: {list: [8, 1Ki]}}",
        "pingpong.send: {sizes: {list: [8, 1Ki]}}\n  pingpong.isend: {sizes: {list: [8, 1Ki]}}")
    assert "openmpi" not in text
    # Launches run in the order of the campaign's round_seed: one whose first two launches do not hang.
    cells = load_campaign(write(workspace / "config" / "campaigns", text, "resume.yaml")).cells()
    seed = next(s for s in range(1000) if not any("@hang" in cell[2] for cell in round_order(cells, s, 0)[:2]))
    scratch = workspace / "resume-scratch"
    campaign = write(workspace / "config" / "campaigns", text + f"round_seed: {seed}\nscratch: {scratch}\n",
                     "resume.yaml")
    results = workspace / "results" / "resume"
    dataset = "results/resume/resume.nc"
    # Some launches finished before the interruptions.
    first = [f"results/resume/raw/{library}/{placement}/{kernel}/launch0.jsonl"
             for library, placement, kernel in round_order(cells, seed, 0)[:2]]
    snakemake(workspace, *first, "--configfile", str(campaign))
    before = _snapshot(results)
    assert len(before) == 2

    # Ctrl-C to snakemake while a launch hangs.
    process = _start(workspace, dataset, "--configfile", str(campaign))
    _wait_for_hung_launch(workspace, results, process)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    assert no_leftovers(workspace) == []

    # kill -9 of snakemake's whole process group in the middle of a launch.
    snakemake(workspace, "--unlock", "--configfile", str(campaign))
    process = _start(workspace, dataset, "--configfile", str(campaign))
    _wait_for_hung_launch(workspace, results, process)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert no_leftovers(workspace) == []
    finished = _snapshot(results)  # a raw file exists only once its launch has ended
    assert set(before) <= set(finished)
    assert list(scratch.iterdir()) == []   # the killed launch's folder: its supervisor, which outlived it, removed it

    snakemake(workspace, "--unlock", "--configfile", str(campaign))
    snakemake(workspace, dataset, "--configfile", str(campaign))
    after = _snapshot(results)
    for path, (mtime, content) in finished.items():
        assert after[path] == (mtime, content), f"{path} was redone"
    assert len(after) == 3 and no_leftovers(workspace) == []  # 1 library x 3 entries
    assert list(scratch.iterdir()) == []
    assert not list(results.rglob("*.partial")) and not list(results.rglob("*.tmp"))

    ds = open_campaign(results / "resume.nc")
    status = ds["status"].sel(placement="1N2P", launch=0)
    assert (status.sel(kernel="pingpong.send@hang") == "timeout").all()
    assert (status.sel(kernel=["pingpong.send", "pingpong.isend"]) == "ok").all()
    # Every sample once: the dataset holds exactly the samples of each raw file.
    for path in after:
        result = read_raw(path)
        meta = result.launch
        for point in result.points:
            cell = ds.commlens.samples(library=meta["library"], placement=meta["placement"], kernel=meta["kernel"],
                                        launch=meta["launch"], size=point.size)
            assert np.array_equal(cell.values, point.samples)

    # Changed settings for the same campaign name are refused, with the way out.
    changed = write(workspace / "config" / "campaigns",
                    campaign.read_text().replace("rse: 0.2", "rse: 0.05"), "resume-changed.yaml")
    refused = snakemake(workspace, dataset, "--configfile", str(changed), "--dry-run", check=False)
    message = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "holds 2 finished launches measured with other settings" in message, message
    assert "--rse 0.2 -> 0.05" in message and "campaign: resume-2" in message and "--config overwrite=true" in message
    allowed = snakemake(workspace, dataset, "--configfile", str(changed), "--dry-run", "--config", "overwrite=true")
    assert allowed.stdout.count("rule run_launch") == 3  # 2 finished and 1 timed-out launches
    assert _snapshot(results) == after


@pytest.mark.mpi
def test_integrity_errors_from_a_real_faulty_run_reach_the_dataset(workspace, built, tmp_path):
    placement = Placement(name="1N2P", nodes=1, ppn=2)
    result = launch(workspace, "mpich-5.0.2", placement,
                    ["pingpong.send", "--sizes", "8,4096", "--integrity", "--inject-fault", "--rse", "0.2",
                     "--min-samples", "3", "--max-samples", "10", "--max-point-time", "0.5"], tmp_path, timeout_s=60)
    assert result.status == "ok"
    config = {"campaign": "faulty", "libraries": {"mpich-5.0.2": {"mpi": "mpich-5.0.2"}},
              "placements": [{"name": "1N2P", "nodes": 1, "ppn": 2}],
              "kernels": {"pingpong.send": {"sizes": {"list": [8, 4096]}, "integrity": True}}, "launches": 1}
    campaign = Campaign(name="faulty", source="faulty.yaml", config=validate_campaign(config))
    results, refused = read_all([result.path])
    ds = build_dataset(campaign, results, {}, {}, refused)
    write_dataset(ds, tmp_path / "faulty.nc")
    ds = open_campaign(tmp_path / "faulty.nc")
    assert (ds["errors"].sel(library="mpich-5.0.2", placement="1N2P", kernel="pingpong.send", launch=0) > 0).all()
    table = ds.commlens.integrity_errors()
    assert sorted(table["size"]) == [8, 4096] and (table["errors"] > 0).all()


# --- A workflow killed with SIGKILL: its launch ends with it, and the rerun redoes it, once ---

LONG = textwrap.dedent("""
    campaign: {name}
    libraries:
      mpich-5.0.2: {{mpi: mpich-5.0.2}}
    placements: [{{name: 1N2P, nodes: 1, ppn: 2}}]
    kernels:
      pingpong.send: {{sizes: {{list: [8]}}}}
    launches: {launches}
    precision: {{rse: 0.000001, min_samples: 1000000, max_samples: 1000000, max_point_time: {seconds}}}
    timeout: 60
""")


def _raw(name: str, launch: int) -> str:
    return f"results/{name}/raw/mpich-5.0.2/1N2P/pingpong.send/launch{launch}.jsonl"


@pytest.mark.mpi
def test_a_workflow_killed_with_sigkill_takes_its_launch_along_and_the_rerun_redoes_it(workspace, built):
    """kill -9 of Snakemake alone (its job re-parented, as from a terminal): the launch's job notices,
    ends every process of the launch and says so; no raw file is left for it, and after --unlock the
    rerun runs it (once) and keeps it."""
    name = "killed"
    campaign = write(workspace / "config" / "campaigns", LONG.format(name=name, launches=1, seconds=8), f"{name}.yaml")
    results = workspace / "results" / name
    process = _start(workspace, _raw(name, 0), "--configfile", str(campaign))
    deadline = time.monotonic() + 60
    while not (list(results.rglob("*.partial")) and leftovers(workspace)):
        assert time.monotonic() < deadline and process.poll() is None, "the launch never started"
        time.sleep(0.1)
    process.kill()                    # SIGKILL to Snakemake only: its jobs learn nothing from it
    process.communicate(timeout=30)
    assert no_leftovers(workspace, within_s=10) == []
    assert not (workspace / _raw(name, 0)).exists()
    assert not [p.name for p in results.rglob("*") if p.suffix in (".partial", ".lock", ".reserved", ".tmp")]
    log = (results / "logs" / "mpich-5.0.2" / "1N2P" / "pingpong.send" / "launch0.log").read_text()
    assert f"the workflow that started it (pid {process.pid}) is gone" in log, log[-2000:]
    assert "every process of it was ended; it has no raw file, so the next run of the workflow redoes it" in log

    snakemake(workspace, "--unlock", "--configfile", str(campaign))
    rerun = snakemake(workspace, _raw(name, 0), "--configfile", str(campaign))
    assert (rerun.stdout + rerun.stderr).count("rule run_launch:") == 1, rerun.stderr[-3000:]
    assert read_raw(workspace / _raw(name, 0)).status == "ok"
    again = snakemake(workspace, _raw(name, 0), "--configfile", str(campaign))
    assert "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.mpi
def test_a_launch_whose_previous_run_is_alive_waits_for_it(workspace, built):
    """A launch never runs twice at once: while a previous run of it holds its lock (a workflow killed a
    moment ago, still ending it), the rerun's job says so and starts the launch only once it is free.
    The lock is held until the rerun says it waits: a fixed time fell short once Snakemake took 10 s
    to start its job on a loaded machine."""
    from commlens.launch import locks

    name = "waiting"
    campaign = write(workspace / "config" / "campaigns", LONG.format(name=name, launches=1, seconds=0.5),
                     f"{name}.yaml")
    lock = locks.launch_lock_path(workspace / _raw(name, 0))
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom commlens.launch import locks\n"
         "with locks.held(sys.argv[1], 'launch of a killed workflow (pid 4242)', remove=True):\n"
         "    print('held', flush=True); sys.stdin.readline()\nprint(time.time(), flush=True)", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    waiting = "its previous run, launch of a killed workflow (pid 4242), has not ended yet; waiting for it to end"
    console = workspace / f"{name}-console.log"
    with open(console, "w") as out:
        rerun = subprocess.Popen(workflow_command(workspace, _raw(name, 0), "--configfile", str(campaign)),
                                 stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 120
        while waiting not in console.read_text() and rerun.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        released = float(holder.communicate("release\n", timeout=30)[0])
        assert rerun.wait(timeout=300) == 0, console.read_text()[-4000:]
    record = read_raw(workspace / _raw(name, 0)).launch
    started = datetime.fromisoformat(record["started"]).timestamp()   # whole seconds, rounded down
    seen = f"released at {released:.1f}, launch started at {record['started']}\n{console.read_text()[-2000:]}"
    assert waiting in console.read_text(), seen
    assert record["status"] == "ok" and started > released - 1, seen
    assert not lock.exists()


# --- Launches of different campaigns never overlap: the machine's lock ---

@pytest.mark.mpi
def test_launches_of_two_campaigns_started_together_never_overlap(workspace, built):
    """Two campaigns of one checkout started at once: each launch holds the machine's lock, so no two
    launches run at the same time; the one that waited says so and records how long."""
    names = ("machine-a", "machine-b")
    files = [write(workspace / "config" / "campaigns", LONG.format(name=name, launches=3, seconds=2.5), f"{name}.yaml")
             for name in names]
    targets = [[_raw(name, launch) for launch in range(3)] for name in names]
    runs = [_start(workspace, *wanted, "--configfile", str(file)) for wanted, file in zip(targets, files)]
    for run in runs:
        run.communicate(timeout=120)
    for run, name, wanted in zip(runs, names, targets):
        assert all((workspace / path).exists() for path in wanted), f"{name}: {run.returncode}"
    records = {name: [read_raw(workspace / path).launch for path in wanted] for name, wanted in zip(names, targets)}

    def interval(record) -> tuple[float, float]:
        start = datetime.fromisoformat(record["started"]).timestamp()   # whole seconds, rounded down
        return start, start + record["duration_s"]

    for a in records["machine-a"]:
        for b in records["machine-b"]:
            (a0, a1), (b0, b1) = interval(a), interval(b)
            overlap = min(a1, b1) - max(a0, b0)
            # `started` is rounded down to the second, so an interval may seem up to 1 s too early.
            assert overlap < 1.0, (a["launch"], a["started"], a["duration_s"], b["launch"], b["started"],
                                   b["duration_s"])
    waited = [r["waited_for_machine_s"] for rs in records.values() for r in rs]
    assert all(r["status"] == "ok" for rs in records.values() for r in rs)
    assert max(waited) > 0.5, waited
    logs = "".join(p.read_text() for name in names for p in (workspace / "results" / name / "logs").rglob("*.log"))
    assert "waiting for the machine: launch " in logs and "is running there (lock " in logs


# --- A full disk: nothing lost, nothing half-written, nothing stale taken as current ---

@contextlib.contextmanager
def small_disk(path: Path, size: str):
    """A tmpfs of `size` mounted at `path` for the block (root only), unmounted however the test ends."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "commlens-test", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        for _ in range(50):      # a process that just ended may still hold a file there for a moment
            if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
                break
            time.sleep(0.2)
        else:
            subprocess.run(["umount", "--lazy", str(path)], check=True)


def fill(disk: Path, leave: int) -> None:
    """Takes all but `leave` bytes of the disk's free space (disk/filler; fill(disk, None) gives it back)."""
    filler = disk / "filler"
    filler.unlink(missing_ok=True)
    if leave is not None:
        with open(filler, "wb") as file:
            file.truncate(0)
            os.posix_fallocate(file.fileno(), 0, max(shutil.disk_usage(disk).free - leave, 1))


def leftover_temporaries(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*") if p.suffix in (".tmp", ".partial", ".reserved", ".lock"))


def test_a_raw_file_is_made_in_place_without_a_second_copy(tmp_path):
    """A finished launch's output larger than the space left still becomes its raw file: the launch record
    goes in front of it in place (the space for it held from the start), and nothing is copied."""
    from commlens.io.atomic import WriteError
    from commlens.io.raw_writing import reserve_record_space, write_raw_file

    with small_disk(tmp_path / "disk", "2m") as disk:
        output, partial = disk / "launch0.jsonl", disk / "launch0.jsonl.partial"
        points = [(size, [1e-6 + i * 1e-9 for i in range(2000)]) for size in range(1, 31)]
        body = b"".join(line + b"\n" for line in _complete_file(points).splitlines()[1:])   # the kernel's lines
        reserve_record_space(output)
        partial.write_bytes(body)
        fill(disk, leave=len(body) // 2)               # a copy of the output could not be made
        write_raw_file(output, _launch(), partial, with_output=True)
        assert [p.size for p in read_raw(output).points] == list(range(1, 31))
        assert leftover_temporaries(disk) == []

        fill(disk, leave=0)
        with pytest.raises(WriteError) as refused:
            reserve_record_space(disk / "launch1.jsonl")
        assert str(refused.value) == f"no space left on device writing {disk / 'launch1.jsonl'}"
        assert leftover_temporaries(disk) == []


def test_a_report_is_written_whole_or_not_at_all(tmp_path):
    """A full disk stops the report with the file and the cause, and the report already there stays whole."""
    from commlens.io.atomic import WriteError
    from commlens.report.analysis_table import ReportData
    from commlens.report.document import write_report

    config = {"campaign": "unit", "libraries": {"libA": {"mpi": "m"}},
              "placements": [{"name": "1N2P", "nodes": 1, "ppn": 2}],
              "kernels": {"pingpong.send": {"sizes": {"list": [8, 1024, 65536]}}}, "launches": 1}
    raw = tmp_path / "launch0.jsonl"
    raw.write_bytes(_complete_file([(size, [1e-6 * (1 + size / 1e4) + i * 1e-9 for i in range(20)])
                                    for size in (8, 1024, 65536)]))
    ds = build_dataset(Campaign(name="unit", source="unit.yaml", config=validate_campaign(config)), [read_raw(raw)],
                       {}, {})
    with small_disk(tmp_path / "disk", "16m") as disk:
        write_report(ReportData(ds), disk)
        whole = (disk / "report.html").read_bytes()
        fill(disk, leave=100_000)
        with pytest.raises(WriteError) as refused:
            write_report(ReportData(ds), disk)
        assert str(refused.value).startswith("no space left on device") and str(disk) in str(refused.value)
        assert (disk / "report.html").read_bytes() == whole
        assert leftover_temporaries(disk) == []


FULL = textwrap.dedent("""
    campaign: full
    libraries:
      mpich-5.0.2: {mpi: mpich-5.0.2}
    placements: [{name: 1N2P, nodes: 1, ppn: 2}]
    kernels:
      pingpong.send: {sizes: {list: [8, 1Ki, 64Ki]}}
    launches: 2
    precision: {rse: 0.05, min_samples: 5, max_samples: 100, max_point_time: 0.3}
    timeout: 60
""")
# A launch of FULL writes at most 3 x 100 samples, a few kilobytes, wherever its samples stop: the test
# leaves 100 kB free for it. With up to 2000 samples, a slow host that never reached the precision wrote
# a raw file larger than that, and the disk filled during the launch, not during collection.


@pytest.mark.mpi
def test_a_full_disk_loses_no_launch_and_keeps_the_previous_dataset_and_report(workspace, built, tmp_path):
    """Collection on a full disk fails with one line naming the file, the cause and the space needed, and
    leaves the previous dataset in place (Snakemake deletes it before the job: it gets its name back); so
    does a report on a full disk, whole. Once there is space the next run collects again, and the dataset
    holds the raw files' launches. A dataset put back by hand (a fresh modification time, older launches)
    is collected again too."""
    work = tmp_path / "work"
    work.mkdir()
    campaign = write(work, FULL, "full.yaml")
    dataset, launch1 = "results/full/full.nc", "results/full/raw/mpich-5.0.2/1N2P/pingpong.send/launch1.jsonl"
    build = ("--config", f"build_dir={workspace / 'build'}")

    def started_in_dataset() -> str:
        with open_campaign(work / dataset) as ds:
            return str(ds["started"].sel(launch=1).values.ravel()[0])[:19]

    def started_in_raw() -> str:
        return read_raw(work / launch1).launch["started"][:19]

    def held_or_staged(folder: Path) -> list[str]:
        return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))

    with small_disk(work / "results", "8m") as disk:
        snakemake(work, "--configfile", str(campaign), *build)
        report = {name: (disk / "full" / name).read_bytes() for name in ("report.html", "report.ipynb")}
        figures = sorted(p.name for p in (disk / "full" / "figures").iterdir())
        assert figures and "manifest.json" in figures
        before = started_in_dataset()

        fill(disk, leave=300_000)                     # room for the notebook's run, not for the report
        run = snakemake(work, "--configfile", str(campaign), "--forcerun", "report", *build, check=False)
        output = run.stdout + run.stderr
        line = next((line for line in output.splitlines() if line.startswith("commlens report: ")), output[-3000:])
        assert run.returncode != 0 and line.startswith(
            f"commlens report: no space left on device writing {disk / 'full'}/"), line
        assert "it needs about " in line and line.endswith("the previous report is kept"), line
        assert {name: (disk / "full" / name).read_bytes() for name in report} == report
        assert sorted(p.name for p in (disk / "full" / "figures").iterdir()) == figures
        assert held_or_staged(disk / "full") == [] and leftover_temporaries(disk) == []

        fill(disk, leave=100_000)                     # room for a launch, not for a dataset
        run = snakemake(work, dataset, "--configfile", str(campaign), "--forcerun", launch1, *build, check=False)
        output = run.stdout + run.stderr
        line = next((line for line in output.splitlines() if line.startswith("commlens collect: ")), output[-3000:])
        assert run.returncode != 0 and line.startswith("commlens collect: no space left on device"), line
        assert f"writing {dataset}" in line and "it needs about " in line, line
        assert line.endswith("the previous dataset is kept") and "Traceback" not in output
        assert read_raw(work / launch1).status == "ok"          # the launch is kept
        assert started_in_dataset() == before != started_in_raw()   # the previous dataset, in its place
        assert not (disk / "full" / "history").exists()
        assert held_or_staged(disk / "full") == [] and leftover_temporaries(disk) == []

        fill(disk, None)
        run = snakemake(work, dataset, "--configfile", str(campaign), *build)
        assert "rule collect:" in run.stdout + run.stderr and started_in_dataset() == started_in_raw()
        assert len(list((disk / "full" / "history").glob("*/full.nc"))) == 1   # the previous dataset, kept

        # An older dataset put back with a fresh time is no current one: the next run collects again.
        shutil.copy(next((disk / "full" / "history").glob("*/full.nc")), work / dataset)
        assert started_in_dataset() != started_in_raw()
        run = snakemake(work, dataset, "--configfile", str(campaign), *build)
        output = run.stdout + run.stderr
        assert f"{dataset} is out of date" in output and "rule collect:" in output, output[-3000:]
        assert started_in_dataset() == started_in_raw()
        again = snakemake(work, dataset, "--configfile", str(campaign), *build)
        assert "Nothing to be done" in again.stdout + again.stderr, again.stderr[-3000:]


# --- Names: checked whole, and nothing runs or is written outside results/<campaign>/ ---

@pytest.mark.parametrize("change, key", [
    (("campaign: names", 'campaign: "names\\n"'), "campaign: 'names\\n' is not allowed"),
    (("campaign: names", 'campaign: "names; touch pwned"'), "campaign: 'names; touch pwned' is not allowed"),
    (("campaign: names", 'campaign: "$(touch pwned)"'), "campaign: '$(touch pwned)' is not allowed"),
    (("  mpich-5.0.2:", '  "mpich-5.0.2\\n":'), "libraries: 'mpich-5.0.2\\n' is not allowed"),
    (("name: 1N2P", 'name: "1N2P\\n"'), "placements[0].name: '1N2P\\n' is not allowed"),
    (("name: 1N2P", "name: 1N 2P"), "placements[0].name: '1N 2P' is not allowed"),
    (("pingpong.send:", '"pingpong.send@a\\n":'), "kernels: 'pingpong.send@a\\n' is not allowed"),
    (("[8, 1Ki]", '[8, "1Ki\\n"]'), "kernels.pingpong.send.sizes.list[1]: '1Ki\\n' is not allowed"),
])
def test_a_bad_name_is_refused_before_anything_is_written(tmp_path, change, key):
    """Names become paths and shell words: a trailing newline, a space or a shell character is refused
    (patterns read as JSON Schema's ECMA-262 has them, `$` the end of the text) before any job. The
    workflow reads the file with the same check (commlens.campaign.load_campaign) as `commlens
    validate`; one name goes through the workflow itself, the rest through the check (each workflow run
    costs seconds)."""
    work = tmp_path / "work"
    work.mkdir()
    campaign = write(work, small_campaign("names", max_point_time=0.2).replace(*change), "names.yaml")
    if "touch pwned)" in change[1]:
        run = snakemake(work, "--configfile", str(campaign), "--dry-run", check=False)
        assert run.returncode != 0 and key in run.stdout + run.stderr, (run.stdout + run.stderr)[-2000:]
    else:
        with pytest.raises(CampaignError, match=re.escape(key)):
            load_campaign(campaign)
    assert sorted(p.name for p in work.iterdir()) == ["names.yaml"]
    assert not list(work.rglob("pwned")) and not (REPO / "pwned").exists()


@pytest.mark.mpi
def test_a_whole_campaign_in_a_folder_named_like_a_shell_command_writes_only_its_results(workspace, built, tmp_path):
    """Every path that reaches a shell is quoted: a campaign whose name has '+' and '.', run through the whole
    workflow (report included) from a folder whose name has a space, quotes, `;` and `$(...)`, writes
    results/<campaign>/ and nothing else, and runs no part of a path as a command."""
    work = tmp_path / "a b; $(touch pwned) 'q'"
    work.mkdir()
    text = small_campaign("odd+name.v1-2", max_point_time=0.2).replace("mpich-5.0.2: {", "mpich+1.0: {")
    campaign = write(work, text, "odd.yaml")
    snakemake(work, "--configfile", str(campaign), "--config", f"build_dir={workspace / 'build'}")
    outside = sorted(str(p.relative_to(work)) for p in work.rglob("*")
                     if not p.relative_to(work).parts[0] == ".snakemake"
                     and p.relative_to(work).parts[:2] != ("results", "odd+name.v1-2"))
    assert outside == ["odd.yaml", "results"], outside
    assert (work / "results" / "odd+name.v1-2" / "report.html").stat().st_size > 0
    assert read_raw(work / "results" / "odd+name.v1-2" / "raw" / "mpich+1.0" / "1N2P" / "pingpong.send"
                    / "launch0.jsonl").status == "ok"
    assert not list(tmp_path.rglob("pwned")) and not (REPO / "pwned").exists()
