"""A campaign's progress lines: counts that go up by one per finished launch, even when launches
finish together, and time left estimated from the launches measured most like those left, with
collect and the report estimated from their timings on this machine."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from commlens.launch.progress import (KEPT_STAGES, PROGRESS_LINE, STAGE_MODELS, Progress, campaign_progress,
                                       progress_line, raw_file_beside, record_stage, stage_estimate_s)
from commlens.units import format_duration

from conftest import REPO

RUNS = [(library, "1N2P", kernel, launch)
        for library in ("mpich", "openmpi") for kernel in ("pingpong.send", "coll.bcast") for launch in range(3)]


def write_launch(raw_dir, run, duration_s, mtime_ns, status="ok"):
    """A raw file as the launcher writes it (its launch record first), with the time it was written."""
    library, placement, kernel, launch = run
    path = raw_dir / library / placement / kernel / f"launch{launch}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"record": "launch", "schema": 1, "status": status, "library": library, "placement": placement,
              "kernel": kernel, "launch": launch}
    if duration_s is not None:   # a launch never started has none
        record["duration_s"] = duration_s
    path.write_text(json.dumps(record) + "\n")
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def test_launches_finishing_together_count_one_after_another(tmp_path):
    """Three launches whose raw files carry the same time (parallel jobs, a coarse file clock) and
    one written later: each job's count is its own, and none counts one written after it."""
    raw = tmp_path / "raw"
    t = 1_700_000_000 * 10**9
    together = [write_launch(raw, run, 2.0, t) for run in RUNS[:3]]
    later = write_launch(raw, RUNS[3], 2.0, t + 10**9)
    counts = sorted(campaign_progress(RUNS, path).done for path in together)
    assert counts == [1, 2, 3]
    assert campaign_progress(RUNS, later).done == 4
    assert {campaign_progress(RUNS, path).total for path in together} == {len(RUNS)}


def test_a_stale_raw_file_of_a_launch_still_to_come_is_not_done(tmp_path):
    """A rerun after a rebuild: every launch is redone in order, each waiting for the one before it, and
    the raw files of those still to come are the last run's, older than the one just written."""
    raw = tmp_path / "raw"
    t = 1_700_000_000 * 10**9
    for i, run in enumerate(RUNS):
        write_launch(raw, run, 2.0, t + i)
    redone = write_launch(raw, RUNS[0], 2.0, t + 10**12)
    assert campaign_progress(RUNS, redone).done == len(RUNS)     # by their times alone, all would be done
    progress = campaign_progress(RUNS, redone, not_yet=RUNS[1:])
    assert (progress.done, progress.left) == (1, len(RUNS) - 1)


def test_time_left_comes_from_the_most_alike_measured_launches(tmp_path):
    """Planted durations: mpich's pingpong launches take 2 s and its bcast launches 10 s; openmpi's
    pingpong 4 s, nothing of its bcast measured yet. Left: one mpich pingpong (2), one mpich bcast
    (10), two openmpi pingpong (4 each), three openmpi bcast, estimated from every bcast measured (10)."""
    raw = tmp_path / "raw"
    t = 1_700_000_000 * 10**9
    measured = {("mpich", "1N2P", "pingpong.send", 0): 2.0, ("mpich", "1N2P", "pingpong.send", 1): 2.0,
                ("mpich", "1N2P", "coll.bcast", 0): 9.0, ("mpich", "1N2P", "coll.bcast", 1): 11.0,
                ("openmpi", "1N2P", "pingpong.send", 0): 4.0}
    paths = [write_launch(raw, run, duration, t + i) for i, (run, duration) in enumerate(measured.items())]
    progress = campaign_progress(RUNS, paths[-1])
    assert (progress.done, progress.left) == (5, 7)
    assert progress.left_s == pytest.approx(2 + 10 + 2 * 4 + 3 * 10)


def test_launches_that_never_ran_are_done_and_take_no_time(tmp_path):
    raw = tmp_path / "raw"
    t = 1_700_000_000 * 10**9
    refused = [write_launch(raw, run, None, t + i, status="build_failed") for i, run in enumerate(RUNS[6:])]
    progress = campaign_progress(RUNS, refused[-1])
    assert (progress.done, progress.left_s) == (6, 0.0)


def test_the_line_says_what_is_done_what_is_left_and_about_how_long():
    run = ("mpich-5.0.2", "1N2P", "pingpong.send", 2)
    line = progress_line(Progress(done=12, total=40, left_s=372.0), run, {"status": "ok", "duration_s": 14.2})
    assert line == "[12/40 launches] mpich-5.0.2 1N2P pingpong.send launch 2: 14 s; 28 left, about 6 min"
    last = progress_line(Progress(done=40, total=40, left_s=0.0), run, {"status": "timeout", "duration_s": 300.4})
    assert last == "[40/40 launches] mpich-5.0.2 1N2P pingpong.send launch 2 timeout: 5 min; none left"
    assert [format_duration(s) for s in (0.42, 14.2, 372, 9000)] == ["0.4 s", "14 s", "6 min", "2.5 h"]


def test_collect_and_the_report_are_in_the_time_left(tmp_path, monkeypatch):
    """The time left runs to the end of the campaign: collect, estimated from the raw files' bytes
    (those left as large as those written), and the report, from its curves (2 libraries x 2 kernels)."""
    monkeypatch.setenv("COMMLENS_CACHE", str(tmp_path / "cache"))
    raw = tmp_path / "raw"
    t = 1_700_000_000 * 10**9
    paths = [write_launch(raw, run, 2.0, t + i) for i, run in enumerate(RUNS[:6])]
    progress = campaign_progress(RUNS, paths[-1])
    raw_bytes = sum(path.stat().st_size for path in paths) / 6 * len(RUNS)
    assert progress.after_s == pytest.approx(stage_estimate_s("collect", raw_bytes) + stage_estimate_s("report", 4))
    assert progress.left_s == pytest.approx(6 * 2.0)
    line = progress_line(progress, RUNS[5], {"status": "ok", "duration_s": 2.0})
    assert line.endswith(f"; 6 left, about {format_duration(progress.left_s + progress.after_s)}")
    last = progress_line(Progress(done=40, total=40, left_s=0.0, after_s=20.0), RUNS[0], {"status": "ok",
                                                                                          "duration_s": 3.0})
    assert last.endswith("launch 0: 3.0 s; 0 left, about 20 s") and PROGRESS_LINE.match(last)


def test_stage_estimates_follow_this_machines_timings(tmp_path, monkeypatch):
    """Before any timing the model's; then the model scaled by the median ratio of the timings here to
    what it said, so a machine twice as slow is estimated twice as long at any size."""
    monkeypatch.setenv("COMMLENS_CACHE", str(tmp_path / "cache"))
    fixed, per_curve = STAGE_MODELS["report"]
    assert stage_estimate_s("report", 4) == pytest.approx(fixed + per_curve * 4)
    for curves in (1, 10, 40):
        record_stage("report", curves, 2 * (fixed + per_curve * curves))
    record_stage("collect", 1e6, 100.0)                 # another stage's timings change nothing here
    assert stage_estimate_s("report", 4) == pytest.approx(2 * (fixed + per_curve * 4))
    (tmp_path / "cache" / "stage-durations.jsonl").open("a").write("not json\n")
    assert stage_estimate_s("report", 4) == pytest.approx(2 * (fixed + per_curve * 4))
    with pytest.raises(ValueError, match="stage 'draw': allowed values: collect, report"):
        record_stage("draw", 1, 1.0)
    for _ in range(KEPT_STAGES):             # the log keeps its latest timings, not every one ever
        record_stage("report", 4, 3 * (fixed + per_curve * 4))
    assert len((tmp_path / "cache" / "stage-durations.jsonl").read_text().splitlines()) <= KEPT_STAGES
    assert stage_estimate_s("report", 4) == pytest.approx(3 * (fixed + per_curve * 4))


def test_raw_files_are_found_in_the_workflow_layout(tmp_path):
    this = tmp_path / "results" / "c" / "raw" / "mpich" / "1N2P" / "pingpong.send" / "launch0.jsonl"
    other = raw_file_beside(this, ("openmpi", "2N1P", "coll.bcast", 4))
    assert other == tmp_path / "results" / "c" / "raw" / "openmpi" / "2N1P" / "coll.bcast" / "launch4.jsonl"
    rule = (REPO / "workflow" / "rules" / "run.smk").read_text()
    assert 'RESULTS / "raw" / "{library}" / "{placement}" / "{kernel}" / "launch{launch}.jsonl"' in rule


def test_waiting_for_the_machine_counts_in_the_time_left(tmp_path):
    """A launch that waited 30 s for the machine lock took 32 s of the campaign: the launches left like it
    are estimated at that, not at the 2 s it measured for."""
    raw = tmp_path / "raw"
    path = write_launch(raw, RUNS[0], 2.0, 1_700_000_000 * 10**9)
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "waited_for_machine_s": 30.0}) + "\n")
    progress = campaign_progress(RUNS[:3], path)
    assert progress.left_s == pytest.approx(2 * 32.0)


def test_a_dry_run_ends_with_what_the_campaign_would_do(tmp_path, monkeypatch):
    """`commlens run CAMPAIGN -n`: Snakemake's plan goes to a log (hundreds of lines), the console gets the
    launches to run, the libraries to build and an estimated time scaled by this machine's launches."""
    campaign = tmp_path / "dry.yaml"
    campaign.write_text(TWO_KERNELS)
    monkeypatch.setenv("COMMLENS_CACHE", str(tmp_path / "cache"))

    def dry_run():
        return subprocess.run([str(Path(sys.executable).parent / "commlens"), "run", str(campaign), "-n",
                               "--directory", str(tmp_path)], capture_output=True, text=True,
                              check=True, cwd=REPO).stdout.splitlines()

    lines = dry_run()
    assert len(lines) == 3, lines
    plan = tmp_path / "results" / "dry" / "logs" / "dry-run.log"
    assert lines[0] == f"campaign dry: 8 launches; Snakemake's plan: {plan}"
    assert len(plan.read_text().splitlines()) > 50
    assert lines[1] == "8 of 8 launches to run; 2 libraries to install or build (mpich-5.0.2, openmpi-5.0.11)"
    first = re.fullmatch(r"about (.+): launches (.+) \(from a 2-core host's timings: none recorded here yet\), "
                         r"collect and report (.+), about 60 s a library to build; .*", lines[2])
    assert first, lines[2]
    launches_s = 4 * (stage_estimate_s("launch", 3) + stage_estimate_s("launch", 30))   # 2 libraries x 2 launches
    assert first[2] == format_duration(launches_s)
    # Launches measured here at 3 times the model: the launches' estimate triples.
    fixed, per_size = STAGE_MODELS["launch"]
    for _ in range(3):
        record_stage("launch", 10, 3 * (fixed + per_size * 10))
    again = re.fullmatch(r"about .+: launches (.+) \(from 3 launches timed on this machine\), .*", dry_run()[2])
    assert again and again[1] == format_duration(3 * launches_s)


TWO_KERNELS = """
campaign: dry
libraries:
  mpich-5.0.2:    {mpi: mpich-5.0.2}
  openmpi-5.0.11: {mpi: openmpi-5.0.11}
placements:
  - {name: 1N2P, nodes: 1, ppn: 2}
kernels:
  pingpong.send: {sizes: {list: [1, 8, 1Ki]}}
  pingpong.isend: {sizes: {schedule: small, min: 1, max: 30, step: 1}}
launches: 2
"""
