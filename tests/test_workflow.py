"""End to end: a tiny campaign through Snakemake on two real MPI libraries and two placements."""

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import yaml

from commlens import open_campaign
from commlens.campaign import Campaign, load_campaign
from commlens.campaign.rounds import recorded_seed

from conftest import (LIBRARIES, SNAKEFILE, SNAKEMAKE, small_campaign, snakemake, workflow_command,
                      write_campaign)

pytestmark = pytest.mark.mpi



def jobs_planned(workdir, campaign) -> list[str]:
    """The (rule, output) pairs a dry run would execute."""
    out = snakemake(workdir, "--configfile", campaign, "--dry-run").stdout
    return re.findall(r"rule (\w+):\n(?:.*\n)*?\s+output: (\S+)", out)


PROGRESS = re.compile(r"^\[(\d+)/(\d+) launches\] (\S+) (\S+) (\S+) launch (\d+)(?: \w+)?: [\d.]+ (?:s|min|h); "
                      r"(?:(\d+) left, about [\d.]+ (?:s|min|h)|none left)$", re.MULTILINE)


def progress_counts(output: str) -> list[int]:
    """The launches done that the campaign's progress lines give, in the order they were printed;
    each line's count left must agree with its count done."""
    counts = []
    for done, total, *_, left in PROGRESS.findall(output):
        assert int(left or 0) == int(total) - int(done), (done, total, left)
        counts.append(int(done))
    return counts


def test_tiny_campaign_end_to_end(workspace, tiny_campaign):
    campaign, run = tiny_campaign
    assert "tiny: 8 of 8 launches ok" in run.stdout + run.stderr  # the collect step's report
    assert (workspace / "results" / "tiny" / "report.html").exists(), "the campaign ends by writing its report"
    assert progress_counts(run.stdout) == list(range(1, 9)), "one progress line per launch, counting up"
    # The notebook kernel's own warnings (transport and the like) are kept in a log of their own.
    kernel_log = workspace / "results" / "tiny" / "logs" / "report-kernel.log"
    assert "IPKernelApp" in kernel_log.read_text() and "IPKernelApp" not in run.stdout + run.stderr
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
    median = ds.commlens.summary()["median"].sel(kernel="pingpong.send")
    small = median.sel(size=[1, 8])
    ratio = small.sel(placement="2N1P") / small.sel(placement="1N2P")
    assert (ratio > 1).all(), ratio.values

    # Nothing changed: nothing to do.
    again = snakemake(workspace, "--configfile", str(campaign), "--dry-run").stdout
    assert "Nothing to be done" in again

    # A changed spec reruns that library's environment, build and launches, the launches after its first
    # in the campaign's rounds (so that the recorded order stays the order they ran in), the collection
    # and the report.
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
    tiny = load_campaign(campaign)
    seed = recorded_seed(workspace / "results" / "tiny")
    tiny = Campaign(tiny.name, tiny.source, {**tiny.config, "round_seed": seed})
    designed = [f"results/tiny/raw/{library}/{placement}/{kernel}/launch{launch}.jsonl"
                for library, placement, kernel, launch in tiny.in_rounds()]
    first = min(designed.index(output) for output in designed if "/mpich-5.0.2/" in output)
    assert sorted(launched) == sorted(designed[first:]), launched
    assert not any("openmpi" in output for rule, output in planned if rule not in ("collect", "report", "run_launch"))


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
        timeout: 20
    """))
    snakemake(workspace, "--configfile", str(campaign))
    ds = open_campaign(workspace / "results" / "broken" / "broken.nc")
    assert ds["status"].sel(library="mpich-5.0.2").values.ravel().tolist() == ["ok"]
    # Usually the launch fails at once; now and then (2 in 8 here) Open MPI 5.0.11 leaves the other
    # rank waiting in MPI_Init after one aborts, and only the launch's timeout ends it.
    assert ds["status"].sel(library="openmpi-nobtl").values.ravel().tolist() in (["failed"], ["timeout"])
    assert (ds["sample_count"].sel(library="openmpi-nobtl") == 0).all()
    # The report is still written, and says that launches gave no data.
    report = (workspace / "results" / "broken" / "report.html").read_text()
    assert "1 launch(es) gave no data" in report
    raw = workspace / "results" / "broken" / "raw" / "openmpi-nobtl" / "1N2P" / "pingpong.send" / "launch0.jsonl"
    record = json.loads(raw.read_text().splitlines()[0])
    assert record["exit_code"] != 0 and "MPI_Init" in record["console_tail"], record


def test_config_overrides_change_the_campaign_and_are_recorded(workspace, built):
    """`--config launches=3` and a nested `precision={max_samples: 40}` change what is measured,
    as if the file said so, and the dataset records the campaign it was measured with."""
    campaign = write_campaign(workspace / "config" / "campaigns", small_campaign("override"), "override.yaml")
    run = snakemake(workspace, "results/override/override.nc", "--configfile", str(campaign),
                    "--config", "launches=3", "precision={max_samples: 40}")
    ds = open_campaign(workspace / "results" / "override" / "override.nc")
    assert ds.sizes["launch"] == 3 and (ds["status"] == "ok").all()
    config = json.loads(ds.attrs["campaign_config"])
    assert config["launches"] == 3
    assert config["precision"] == {"rse": 0.2, "min_samples": 3, "max_samples": 40, "max_point_time": 0.5}
    # Relative to the project, as every path the dataset records: no machine's absolute path travels with it.
    assert ds.attrs["campaign_file"] == (f"{campaign.relative_to(workspace)} with --config launches=3 "
                                         "precision={max_samples: 40}")
    raw = workspace / "results" / "override" / "raw" / "mpich-5.0.2" / "1N2P" / "pingpong.send" / "launch2.jsonl"
    command = json.loads(raw.read_text().splitlines()[0])["command"]
    assert command[command.index("--max-samples") + 1] == "40"
    # Each launch says how far the campaign has come and estimates what is left from those measured.
    assert progress_counts(run.stdout) == [1, 2, 3]
    assert len(re.findall(r"\[[12]/3 launches\].*; \d left, about ", run.stdout)) == 2

    # The same overrides again: nothing to do. Without them, the file's one launch is already there.
    again = snakemake(workspace, "results/override/override.nc", "--configfile", str(campaign), "--dry-run",
                      "--config", "launches=3", "precision={max_samples: 40}")
    assert "Nothing to be done" in again.stdout


@pytest.mark.parametrize("override, message", [
    ("launches=0", "launches: 0 is less than the minimum of 1"),
    ("launches=abc", "launches: 'abc' is not allowed; allowed: an integer, at least 1"),
    ("precision={rse: high}", "precision.rse: 'high' is not allowed; allowed: a number, above 0, at most 1"),
    ("launchs=5", "unknown key 'launchs' (did you mean 'launches'?)"),
])
def test_bad_config_override_is_refused_naming_the_file_and_key(workspace, override, message):
    campaign = write_campaign(workspace / "config" / "campaigns", small_campaign("refused"), "refused.yaml")
    run = snakemake(workspace, "--configfile", str(campaign), "--dry-run", "--config", override, check=False)
    assert run.returncode != 0
    output = run.stdout + run.stderr
    assert f"{campaign} with --config {override}: invalid campaign file" in output, output[-3000:]
    assert message in output, output[-3000:]


def test_the_workflow_runs_as_a_module_of_another_workflow(workspace, built, tmp_path):
    """A workflow in a directory of its own uses commlens's rules as a Snakemake module, with the
    campaign in its own config and the libraries already built: the campaign's DAG, report included,
    is built from there, and its dataset is measured there."""
    user = tmp_path / "analysis"
    user.mkdir()
    (user / "Snakefile").write_text(textwrap.dedent(f"""
        configfile: "config.yaml"

        module commlens:
            snakefile: "{SNAKEFILE}"
            config: config["commlens"]

        use rule * from commlens as commlens_*
    """))
    campaign = {"build_dir": str(workspace / "build"), "strict_build": ",".join(LIBRARIES),
                **yaml.safe_load(textwrap.dedent(small_campaign("moduled")))}
    (user / "config.yaml").write_text(json.dumps({"commlens": campaign}))

    def run(*args):
        proc = subprocess.run([str(SNAKEMAKE), "--cores", "2", *args], cwd=user, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        return proc.stdout

    planned = re.findall(r"rule (\w+):", run("--dry-run"))
    assert sorted(set(planned)) == ["commlens_all", "commlens_collect", "commlens_report",
                                    "commlens_run_launch"], planned
    run("results/moduled/moduled.nc")
    ds = open_campaign(user / "results" / "moduled" / "moduled.nc")
    assert (ds["status"] == "ok").all() and ds.sizes["launch"] == 1
    assert ds.attrs["campaign_file"] == "the config of module commlens"


HANG = """
    campaign: watched
    libraries:
      mpich-5.0.2: {mpi: mpich-5.0.2}
    placements: [{name: 1N2P, nodes: 1, ppn: 2}]
    kernels:
      pingpong.send: {sizes: {list: [8, 1Ki, 64Ki]}, test_hang_after: 2}
    launches: 1
    shuffle: false
    precision: {rse: 0.2, min_samples: 3, max_samples: 30, max_point_time: 0.5}
    timeout: 5
"""


def test_a_launch_log_shows_each_size_as_it_is_measured(workspace, built):
    """The launch measures two sizes, then hangs until its timeout: its log shows both sizes while
    it still runs, as `tail -f` on it would."""
    campaign = write_campaign(workspace / "config" / "campaigns", HANG, "watched.yaml")
    logs = workspace / "results" / "watched" / "logs" / "mpich-5.0.2" / "1N2P" / "pingpong.send"
    raw = workspace / "results" / "watched" / "raw" / "mpich-5.0.2" / "1N2P" / "pingpong.send" / "launch0.jsonl"
    process = subprocess.Popen(workflow_command(workspace, "results/watched/watched.nc", "--configfile", str(campaign)),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen_while_running = None
    deadline = time.monotonic() + 180
    while process.poll() is None and time.monotonic() < deadline and seen_while_running is None:
        log = logs / "launch0.log"
        text = log.read_text() if log.exists() else ""
        if "pingpong.send 8 B:" in text and "pingpong.send 1024 B:" in text and not raw.exists():
            seen_while_running = text
        time.sleep(0.1)
    output, _ = process.communicate(timeout=180)
    assert seen_while_running is not None, output[-4000:]
    record = json.loads(raw.read_text().splitlines()[0])
    assert record["status"] == "timeout", record
    assert "65536 B:" not in seen_while_running


def test_the_workflow_reads_its_script_rules_without_building_the_iri_grammar(workspace):
    """Snakemake imports jsonschema while it builds the DAG; the workflow has it imported first without
    rfc3987-syntax's grammar (commlens.lean_imports), which cost every run of the workflow 2.4 s. The
    package stays installed and importable for whatever validates IRIs."""
    campaign = write_campaign(workspace / "config" / "campaigns", small_campaign("lean"), "lean.yaml")
    run = subprocess.run([sys.executable, "-X", "importtime", *workflow_command(
        workspace, "results/lean/lean.nc", "--configfile", str(campaign), "--dry-run")],
        capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    # (The hidden package's import is tried and refused: its module that builds the grammar never runs.)
    assert {"jsonschema", "nbformat"} <= imported and "rfc3987_syntax.syntax_helpers" not in imported
    check = subprocess.run([sys.executable, "-c", "from commlens.lean_imports import import_jsonschema; "
                            "import_jsonschema(); import rfc3987_syntax"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
