"""End to end: a tiny campaign through Snakemake on two real MPI libraries and two placements."""

import json
import os
import re
import textwrap

import numpy as np
import pytest

from commbench.dataset import open_campaign

from conftest import snakemake

pytestmark = pytest.mark.mpi



def jobs_planned(workdir, campaign) -> list[str]:
    """The (rule, output) pairs a dry run would execute."""
    out = snakemake(workdir, "--configfile", campaign, "--dry-run").stdout
    return re.findall(r"rule (\w+):\n(?:.*\n)*?\s+output: (\S+)", out)


def test_tiny_campaign_end_to_end(workspace, tiny_campaign):
    campaign, run = tiny_campaign
    assert "tiny: 8 of 8 launches ok" in run.stdout + run.stderr  # the collect step's report
    assert (workspace / "results" / "tiny" / "report.html").exists(), "the campaign ends by writing its report"
    ds = open_campaign(workspace / "results" / "tiny" / "tiny.nc")

    assert ds["time"].dims == ("sample",) and ds["sample_count"].dims == ("library", "placement", "kernel",
                                                                            "size", "launch")
    assert {d: n for d, n in ds.sizes.items() if d in ds["sample_count"].dims} == {
        "library": 2, "placement": 2, "kernel": 1, "size": 5, "launch": 2}
    assert ds.sizes["sample"] == int(ds["sample_count"].sum())   # stored in proportion to the data
    assert (ds["status"] == "ok").all()
    assert list(ds["size"].values) == [1, 8, 1024, 65536, 1048576]
    measured = ds["sample_count"]
    assert (measured >= 1).all(), "every point of every launch has samples"
    times = ds["time"].values
    assert (times > 0).all() and np.isfinite(times).all()
    versions = dict(zip(ds.library.values, ds.library_version.values))
    assert "MPICH" in versions["mpich-5.0.2"] and "5.0.2" in versions["mpich-5.0.2"]
    assert "Open MPI" in versions["openmpi-5.0.11"] and "5.0.11" in versions["openmpi-5.0.11"]
    assert list(ds["transport"].values) == ["shm", "tcp"]
    # Ranks were bound one core each where the machine has a core per rank.
    assert all(b in ("0 1", "1 0") for b in ds["cpu_binding"].sel(placement="1N2P").values.ravel())

    # The emulated network path is slower than shared memory for small messages, for both libraries.
    median = ds.commbench.summary()["median"].sel(kernel="pingpong.send")
    small = median.sel(size=[1, 8])
    ratio = small.sel(placement="2N1P") / small.sel(placement="1N2P")
    assert (ratio > 1).all(), ratio.values

    # Nothing changed: nothing to do.
    again = snakemake(workspace, "--configfile", str(campaign), "--dry-run").stdout
    assert "Nothing to be done" in again

    # A changed spec reruns that library's environment, build and launches, the collection and the report.
    spec = workspace / "envs" / "mpi" / "mpich-5.0.2.yaml"
    original, stat = spec.read_text(), spec.stat()
    spec.write_text(original + "# touched by the test\n")
    planned = jobs_planned(workspace, str(campaign))
    # Put the spec back as it was, so that later tests use the environment already built.
    spec.write_text(original)
    os.utime(spec, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    rules = sorted({rule for rule, _ in planned})
    assert rules == ["build_kernels", "collect", "mpi_environment", "report", "run_launch"], planned
    launched = [output for rule, output in planned if rule == "run_launch"]
    assert len(launched) == 4 and all("/mpich-5.0.2/" in o for o in launched), launched
    assert not any("openmpi" in output for rule, output in planned if rule not in ("collect", "report"))


def test_failed_launch_is_recorded_and_the_campaign_completes(workspace, built):
    """A library row whose launches cannot start (a bogus MCA transport) fails alone."""
    campaign = workspace / "config" / "campaigns" / "broken.yaml"
    campaign.write_text(textwrap.dedent("""
        campaign: broken
        libraries:
          mpich-5.0.2: {mpi: mpich-5.0.2}
          openmpi-nobtl: {mpi: openmpi-5.0.11, env: {OMPI_MCA_pml: ob1, OMPI_MCA_btl: "no-such-btl"}}
        placements: [{name: 1N2P, nodes: 1, ppn: 2}]
        kernels: {pingpong.send: {sizes: {list: [8]}}}
        launches: 1
        precision: {rse: 0.1, min_samples: 3, max_samples: 20, max_point_time: 1}
        timeout: 60
    """))
    snakemake(workspace, "--configfile", str(campaign))
    ds = open_campaign(workspace / "results" / "broken" / "broken.nc")
    assert ds["status"].sel(library="mpich-5.0.2").values.ravel().tolist() == ["ok"]
    assert ds["status"].sel(library="openmpi-nobtl").values.ravel().tolist() == ["failed"]
    assert (ds["sample_count"].sel(library="openmpi-nobtl") == 0).all()
    # The report is still written, and says that launches gave no data.
    report = (workspace / "results" / "broken" / "report.html").read_text()
    assert "1 launch(es) gave no data" in report
    raw = workspace / "results" / "broken" / "raw" / "openmpi-nobtl" / "1N2P" / "pingpong.send" / "launch0.jsonl"
    record = json.loads(raw.read_text().splitlines()[0])
    assert record["status"] == "failed" and record["exit_code"] != 0 and record["console_tail"]
