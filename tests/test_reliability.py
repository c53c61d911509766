"""Reliability: bad input is refused before any job, hung and failed launches are killed and
recorded while the campaign completes, damaged raw files never enter a dataset, and no
result is lost to a changed configuration or an interruption."""

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commbench.campaign import Campaign, load_campaign, validate_campaign
from commbench.data.collect import build_dataset, read_all
from commbench.data.failures import failures
from commbench.io.netcdf import write_dataset
from commbench import open_campaign
from commbench.launch.preflight import ResourceError, check_resources, needs, resource_problems
from commbench.launch.placement import Placement
from commbench.io.raw import LAUNCH_STATUSES, RawFileError, read_raw

from conftest import REPO, interruptible, launch, snakemake, workflow_command
from conftest import campaign_error as refusal, write_campaign as write

LAUNCHER_NAMES = {"commbench-kernels", "mpiexec", "mpirun", "hydra_pmi_proxy", "prterun", "prted"}

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
     ["kernels.pingpong.send.cache: 'rotat' is not allowed", "did you mean 'rotate'?", "allowed values: reuse, rotate"]),
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

def test_a_terabyte_message_is_refused_before_any_job(tmp_path):
    text = BASE.replace("[1, 1Ki]", "[1, 1099511627776]")
    campaign = load_campaign(write(tmp_path, text))
    with pytest.raises(ResourceError) as info:
        check_resources(campaign)
    message = str(info.value)
    assert message.startswith(str(tmp_path / "c.yaml"))
    assert "kernels.pingpong.send on 1N2P: needs about 4 TiB of memory" in message, message
    assert "2 ranks x 2 buffers (1 TiB largest size x 1 message)" in message and "GiB available" in message

    # The workflow refuses it at parse time: no job is planned, not even a dry run's.
    (tmp_path / "config").mkdir()
    campaign_file = write(tmp_path / "config", text, "base.yaml")
    run = snakemake(tmp_path, "--configfile", str(campaign_file), "--dry-run", check=False)
    assert run.returncode != 0 and "needs about 4 TiB of memory" in run.stdout + run.stderr
    assert "rule run_launch" not in run.stdout
    cli = subprocess.run([sys.executable, "-m", "commbench.cli", "validate", str(campaign_file)],
                         capture_output=True, text=True)
    assert cli.returncode == 2 and "needs about 4 TiB of memory" in cli.stderr


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
                       st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
KEYS = ["record", "schema", "status", "library", "placement", "kernel", "launch", "size", "samples",
        "iters_per_sample", "settled", "rse", "errors", "subtracted_s", "points", "hosts",
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
    table = ds.commbench.integrity_errors()
    assert table[["library", "size", "errors"]].values.tolist() == [["libA", 64, 3]]


# --- Real launches ---

def leftovers(workspace: Path) -> list[str]:
    """Live processes of a launch in this workspace: MPI launchers, proxies, ranks, supervisors."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        try:
            cmdline = process.info["cmdline"] or []
            if process.info["status"] == psutil.STATUS_ZOMBIE or not cmdline:
                continue
            named = process.info["name"] in LAUNCHER_NAMES or Path(cmdline[0]).name in LAUNCHER_NAMES
            supervisor = "_supervise()" in " ".join(cmdline)
            if (named or supervisor) and str(workspace) in " ".join(cmdline):
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


def _start(workspace, *args) -> subprocess.Popen:
    """snakemake in a session of its own, so that the test can interrupt or kill its whole group."""
    return subprocess.Popen(workflow_command(workspace, *args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=interruptible)


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
    campaign = write(workspace / "config" / "campaigns",
                     HANG.format(name="resume", timeout=8).replace(
                         "pingpong.send: {sizes: {list: [8, 1Ki]}}",
                         "pingpong.send: {sizes: {list: [8, 1Ki]}}\n  pingpong.isend: {sizes: {list: [8, 1Ki]}}"),
                     "resume.yaml")
    results = workspace / "results" / "resume"
    dataset = "results/resume/resume.nc"
    # Some launches finished before the interruptions.
    first = [f"results/resume/raw/mpich-5.0.2/1N2P/{k}/launch0.jsonl" for k in ("pingpong.send", "pingpong.isend")]
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

    snakemake(workspace, "--unlock", "--configfile", str(campaign))
    snakemake(workspace, dataset, "--configfile", str(campaign))
    after = _snapshot(results)
    for path, (mtime, content) in finished.items():
        assert after[path] == (mtime, content), f"{path} was redone"
    assert len(after) == 6 and no_leftovers(workspace) == []  # 2 libraries x 3 entries
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
            cell = ds.commbench.samples(library=meta["library"], placement=meta["placement"], kernel=meta["kernel"],
                                        launch=meta["launch"], size=point.size)
            assert np.array_equal(cell.values, point.samples)

    # Changed settings for the same campaign name are refused, with the way out.
    changed = write(workspace / "config" / "campaigns",
                    campaign.read_text().replace("rse: 0.2", "rse: 0.05"), "resume-changed.yaml")
    refused = snakemake(workspace, dataset, "--configfile", str(changed), "--dry-run", check=False)
    message = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "holds 4 finished launches measured with other settings" in message, message
    assert "--rse 0.2 -> 0.05" in message and "campaign: resume-2" in message and "--config overwrite=true" in message
    allowed = snakemake(workspace, dataset, "--configfile", str(changed), "--dry-run", "--config", "overwrite=true")
    assert allowed.stdout.count("rule run_launch") == 6  # 4 finished and 2 timed-out launches
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
    table = ds.commbench.integrity_errors()
    assert sorted(table["size"]) == [8, 4096] and (table["errors"] > 0).all()
