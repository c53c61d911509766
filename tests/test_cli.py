"""The commlens command as a newcomer types it: the verbs they expect (--version, kernels, run), and
every typo fed back with the message it must get: one line naming the file or name and what is
allowed, exit status 2, nothing written."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from commlens import __version__, cli, open_campaign
from commlens.data import synthetic as syn
from commlens.data.export import points_table
from commlens.data.imported import import_files
from commlens.io.netcdf import write_dataset
from commlens.launch.catalogue import catalogue
from commlens.units import format_size, format_us

from conftest import LIBRARIES, interruptible, small_campaign, write_campaign
from test_compare import campaign as two_rows

OSU = Path(__file__).parent / "data" / "osu-7.4"
COMMLENS = Path(sys.executable).parent / "commlens"


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = cli.main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str) -> str:
    """The error a verb printed: one line, no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def saved(ds: xr.Dataset, path: Path) -> Path:
    ds.attrs.setdefault("commlens_version", "test")
    ds.to_netcdf(path)
    return path


# ----------------------------------------------------------------------------- the verbs a newcomer expects

def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"commlens {__version__}"


def test_kernels_one_line_each_from_the_catalogue(capsys):
    described = catalogue()
    code, out, _ = run_cli(capsys, "kernels")
    lines = out.splitlines()
    assert code == 0 and len(lines) == len(described) > 40
    for line, (name, kernel) in zip(lines, described.items()):
        assert re.fullmatch(rf"{re.escape(name)} +{re.escape(kernel.metric)}", line), line
    code, out, _ = run_cli(capsys, "kernels", "--json")
    records = json.loads(out)
    assert [r["name"] for r in records] == list(described)
    assert records[0]["metric"] == described[records[0]["name"]].metric and "min_ranks" in records[0]


def test_run_refuses_a_broken_campaign_before_snakemake_starts(tmp_path, capsys):
    campaign = write_campaign(tmp_path, "campaign: c\nlaunchs: 3\n")
    code, out, err = run_cli(capsys, "run", campaign, "--directory", tmp_path)
    assert code == 2 and err.startswith(f"commlens run: {campaign}") and "'launchs'" in err
    assert "Traceback" not in err and out == "" and not (tmp_path / "results").exists()


# ----------------------------------------------------------------------------- compare

@pytest.fixture(scope="module")
def before_after(tmp_path_factory):
    """Two library rows, before and after, 5 launches each; after 30% slower from 1 KiB to 8 KiB."""
    folder = tmp_path_factory.mktemp("compare")
    base = saved(two_rows(8).sel(library=["before"]), folder / "base.nc")
    cand = saved(two_rows(9, change=(1.3, 1024, 8192)).sel(library=["after"]), folder / "cand.nc")
    return base, cand


@pytest.mark.parametrize("mapping, side, name, nearest", [
    ("before=afterr", "candidate", "afterr", "after"),      # the typo on the right: once silently compared
    ("befor=after", "baseline", "befor", "before"),
])
def test_compare_map_refuses_unknown_rows_on_either_side(before_after, capsys, mapping, side, name, nearest):
    code, out, err = run_cli(capsys, "compare", *before_after, "--map", mapping)
    assert code == 2 and out == ""
    assert one_line_error(err) == (f"commlens compare: --map: the {side} has no library row {name!r} "
                                   f"(did you mean {nearest!r}?); its rows: {nearest}")


def test_compare_says_how_many_launches_each_side_had(before_after, capsys):
    base, cand = before_after
    code, out, err = run_cli(capsys, "compare", base, cand, "--map", "before=after")
    assert code == 0 and "launches per cell: baseline 5, candidate 5" in out
    assert "one launch" not in out and "same dataset" not in err
    one = [saved(ds.isel(launch=[0]), path.with_name(f"one-{path.name}"))
           for ds, path in ((open_campaign(base), base), (open_campaign(cand), cand))]
    code, out, _ = run_cli(capsys, "compare", *one, "--map", "before=after")
    assert code == 0 and "launches per cell: baseline 1, candidate 1" in out
    method = next(line for line in out.splitlines() if line.startswith("method:"))
    assert "cells with one launch a side" in method and "Welch" not in method


def test_compare_of_a_dataset_with_itself_is_warned(before_after, capsys):
    base, _ = before_after
    code, out, err = run_cli(capsys, "compare", base, base)
    assert code == 0
    assert f"commlens compare: warning: baseline and candidate are the same dataset ({base})" in err
    assert "no size range changed" in out and "launches per cell: baseline 5, candidate 5" in out


def test_compare_splits_a_range_where_the_ratio_steps(tmp_path, capsys):
    """A known step in the ratio: 0.4 up to 512 B, 0.85 from 1 KiB to 128 KiB. The two must be two
    ranges with their own ratios, not one pooled '1 B-128 KiB' range."""
    truth = syn.GroundTruth(2e-6, 5e9, switches=(syn.Switch(16384, 4e-6, 8e9),))
    noise = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, outlier_scale=3, launch_relative=0.03)
    grid = syn.powers_of_two(1, 2**20)
    before = syn.generate(grid, truth, noise, n_samples=60, n_launches=5, seed=11)
    after = syn.generate(grid, truth, noise, n_samples=60, n_launches=5, seed=12)
    after = syn.with_change(syn.with_change(after, 0.4, 1, 512), 0.85, 1024, 131072)
    path = saved(syn.campaign_dataset({("mpich", "1N2P", "pingpong.send"): before}), tmp_path / "before.nc")
    other = saved(syn.campaign_dataset({("mpich", "1N2P", "pingpong.send"): after}), tmp_path / "after.nc")
    code, out, _ = run_cli(capsys, "compare", path, other)
    ranges = [line.split(None, 1)[1] for line in out.splitlines() if line.startswith("  improved")]
    assert code == 0 and len(ranges) == 2, out
    assert ranges[0].startswith("mpich pingpong.send 1N2P: 1 B–512 B 2.") and "x faster" in ranges[0]   # ratio 0.4
    assert ranges[1].startswith("mpich pingpong.send 1N2P: 1 KiB–128 KiB 1.1") and "x faster" in ranges[1]  # 0.85


# ----------------------------------------------------------------------------- export

@pytest.fixture(scope="module")
def osu_dataset(tmp_path_factory) -> Path:
    ds = import_files([OSU / "osu_bw-openmpi-5.0.11-1N2P.txt"], "osu", "openmpi-5.0.11", "1N2P")
    path = tmp_path_factory.mktemp("export") / "osu.nc"
    write_dataset(ds, path, keep_previous=False)
    return path


def test_export_to_standard_output(osu_dataset, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "export", osu_dataset, "--output", "-")
    assert code == 0 and not (tmp_path / "-").exists()
    from io import StringIO

    printed = pd.read_csv(StringIO(out))
    expected = points_table(open_campaign(osu_dataset))
    assert list(printed.columns) == list(expected.columns) and len(printed) == len(expected) == 23
    code, out, _ = run_cli(capsys, "export", osu_dataset, "--output", "-", "--format", "json")
    assert code == 0 and len(json.loads(out)) == 23


@pytest.mark.parametrize("args, message", [
    (["--output", "points.xlsx"], "--output points.xlsx: .xlsx is not a format commlens writes; give a file "
                                  "ending in .csv, .parquet, .json (or - for standard output)"),
    (["--output", "points.parquet", "--format", "csv"],
     "--output points.parquet ends in .parquet but --format is csv; give one format"),
])
def test_export_refuses_an_output_it_would_not_write_as_named(osu_dataset, tmp_path, capsys, monkeypatch, args,
                                                              message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "export", osu_dataset, *args)
    assert code == 2 and one_line_error(err) == f"commlens export: {message}"
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- summary

def test_summary_columns_fit_long_row_names(tmp_path, capsys):
    """The library-update study's row 'openmpi-5.0.11-eager16k' ran into its placement."""
    ds = import_files([OSU / f"{name}-openmpi-5.0.11-1N2P.txt" for name in ("osu_latency-z", "osu_bw")], "osu",
                      "openmpi-5.0.11-eager16k", "1N2P")
    path = tmp_path / "study.nc"
    write_dataset(ds, path, keep_previous=False)
    code, out, _ = run_cli(capsys, "summary", path)
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("library"))
    rows = [line for line in lines if line.startswith("openmpi-5.0.11-eager16k")]
    assert code == 0 and len(rows) == 2
    for row in rows:
        assert row.startswith("openmpi-5.0.11-eager16k  1N2P")                # never run together
        # Every value sits under its header, the columns right-aligned to it.
        for name in ("P50", "P99", "MB/s"):
            end = header.index(name) + len(name)
            assert row[end - 1] != " " and (end == len(row) or row[end] == " "), (name, header, row)
    stats = open_campaign(path).commlens.summary(ci=False).sel(kernel="pingpong.send").isel(library=0, placement=0)
    smallest = stats.isel(size=int(np.flatnonzero(np.isfinite(stats["median"].values))[0]))
    latency = next(row for row in rows if "pingpong.send" in row).split()
    assert latency[3:5] == format_size(int(smallest["size"])).split()
    assert latency[5:9] == [format_us(float(smallest[name])) for name in ("mean", "p50", "p90", "p99")]
    bandwidth = next(row for row in rows if "stream.uni" in row).split()
    assert bandwidth[6:9] == ["-", "-", "-"]            # osu_bw gives no percentiles: said, not left blank


def no_data_dataset() -> xr.Dataset:
    """A campaign where no launch gave data: one library row whose three launches failed."""
    times = np.full((3, 3, 5), np.nan)
    ds = syn.dataset_from_cubes({("openmpi-nobtl", "1N2P", "pingpong.send"): (np.array([1, 8, 64]), times)})
    point = ("library", "placement", "kernel", "launch")
    ds["status"] = (point, np.full((1, 1, 1, 3), "failed", dtype=object))
    ds["reason"] = (point, np.full((1, 1, 1, 3), "exit code 14: MPI_Init failed", dtype=object))
    ds["library_status"] = ("library", np.array(["ok"], dtype=object))
    ds["library_reason"] = ("library", np.array([""], dtype=object))
    return ds


def test_summary_of_a_campaign_where_no_launch_gave_data(tmp_path, capsys):
    path = saved(no_data_dataset(), tmp_path / "nodata.nc")
    code, out, _ = run_cli(capsys, "summary", path)
    assert code == 0
    assert re.search(r"^openmpi-nobtl +1N2P +pingpong.send +no data \(launches: 3 failed\)$", out, re.MULTILINE), out
    assert "launch openmpi-nobtl/1N2P/pingpong.send/0: failed: exit code 14: MPI_Init failed" in out
    assert "0 library row(s) and 3 launch(es) gave no data" in out
    assert run_cli(capsys, "summary", path, "--check")[0] == 1


@pytest.mark.parametrize("verb", [["summary"], ["export"], ["report"], ["compare", "OTHER"]])
def test_a_file_that_is_no_dataset_is_one_line_naming_it(tmp_path, capsys, verb):
    bad = tmp_path / "notes.nc"
    bad.write_text("not a dataset\n")
    args = [verb[0], bad] + [bad for _ in verb[1:]]
    code, out, err = run_cli(capsys, *args)
    line = one_line_error(err)
    assert code == 2 and line.startswith(f"commlens {verb[0]}: {bad}: ") and out == ""
    assert list(tmp_path.iterdir()) == [bad]


# ----------------------------------------------------------------------------- run, on real MPI

STRICT = ["--config", "strict_build=" + ",".join(LIBRARIES)]     # the tests' builds (conftest.workflow_command)


def commlens_run(workspace: Path, campaign: Path, *args: str) -> list[str]:
    return [str(COMMLENS), "run", str(campaign), "--directory", str(workspace), *args, *STRICT]


def test_run_shows_snakemakes_error_without_its_chatter(tmp_path, capsys):
    """A --config override the campaign's schema refuses: the workflow stops before any job, and the
    console has Snakemake's error message and where its whole output is, nothing else of it."""
    campaign = write_campaign(tmp_path, small_campaign("refused", launches=2, timeout=60))
    code, out, err = run_cli(capsys, "run", campaign, "--directory", tmp_path, "--config", "launches=0")
    log = tmp_path / "results" / "refused" / "logs" / "snakemake.log"
    assert code == 1 and out == f"campaign refused: 2 launches; Snakemake's output: {log}\n"
    assert "launches: 0 is less than the minimum of 1" in err and "Traceback" not in err
    assert err.rstrip().endswith(f"commlens run: Snakemake stopped with status 1 (the errors above; all of its "
                                 f"output: {log})")
    assert "Using workflow specific profile" in log.read_text() and "Using workflow" not in err


def test_run_says_where_a_linked_results_folder_leads(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "results").symlink_to(elsewhere)
    campaign = write_campaign(tmp_path, small_campaign("linked", launches=2, timeout=60))
    code, out, err = run_cli(capsys, "run", campaign, "--directory", tmp_path, "--config", "launches=0")
    assert out.startswith(f"{tmp_path / 'results'} is a link to {elsewhere}: the campaign's results go there\n")
    assert (elsewhere / "linked" / "logs" / "snakemake.log").exists()


@pytest.mark.mpi
def test_run_shows_progress_not_snakemake_and_ends_with_the_summary(workspace, built, tmp_path):
    campaign = write_campaign(workspace / "config" / "campaigns", small_campaign("runverb", launches=2, timeout=60),
                              "runverb.yaml")
    done = subprocess.run(commlens_run(workspace, campaign), cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "COMMLENS_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    log = workspace / "results" / "runverb" / "logs" / "snakemake.log"
    # Snakemake's chatter is in its log, not on the console; commlens's progress is.
    assert "localrule run_launch:" in log.read_text() and "input:" in log.read_text()
    for chatter in ("rule ", "input:", "jobid", "Select jobs", "steps ("):
        assert chatter not in out, out
    progress = re.findall(r"^\[(\d)/2 launches\] mpich-5.0.2 1N2P pingpong.send launch \d: .*; (\d) left, about "
                          r"[\d.]+ (?:s|min)$", out, re.MULTILINE)
    assert sorted(done for done, _ in progress) == ["1", "2"], out
    assert ("2", "0") in progress           # the last launch still counts collect and the report in
    results = re.escape(str(workspace / "results" / "runverb"))
    assert re.search(rf"^\[collect\] 2 raw files into {results}/runverb.nc, about [\d.]+ s$", out, re.MULTILINE), out
    assert re.search(rf"^\[collect\] [\d.]+ s: {results}/runverb.nc$", out, re.MULTILINE), out
    cells = [int(n) for n in re.findall(r"^\[report\] cell (\d+)/\d+, [\d.]+ (?:s|min): ", out, re.MULTILINE)]
    assert cells and cells == list(range(1, len(cells) + 1)), out
    assert re.search(rf"^\[report\] [\d.]+ (?:s|min): {results}/report.html$", out, re.MULTILINE), out
    assert "launches: 2 ok of 2" in out and re.search(r"^mpich-5.0.2 +1N2P +pingpong.send +8 B ", out, re.MULTILINE)
    # The launches, collect and the report were timed for the next estimates.
    timings = (tmp_path / "cache" / "stage-durations.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["stage"] for line in timings) == ["collect", "launch", "launch", "report"]


@pytest.mark.mpi
def test_ctrl_c_stops_a_run_and_leaves_nothing_running(workspace, built, tmp_path):
    from test_reliability import leftovers, no_leftovers

    text = small_campaign("runstop", launches=2, timeout=120).replace(
        "pingpong.send: {sizes: {list: [8, 1Ki]}}",
        "pingpong.send@hang: {sizes: {list: [8, 1Ki]}, test_hang_after: 1}")
    campaign = write_campaign(workspace / "config" / "campaigns", text, "runstop.yaml")
    process = subprocess.Popen(commlens_run(workspace, campaign), cwd=workspace, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=interruptible,
                               env={**os.environ, "COMMLENS_CACHE": str(tmp_path / "cache")})
    raw = workspace / "results" / "runstop" / "raw"
    deadline = time.monotonic() + 120
    while not (list(raw.rglob("*.jsonl.partial")) and leftovers(workspace)):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.3)
    time.sleep(1.0)
    # A second run of the same campaign meanwhile is refused in one line, before it touches the first's log.
    log = workspace / "results" / "runstop" / "logs" / "snakemake.log"
    logged = log.read_text()
    second = subprocess.run(commlens_run(workspace, campaign), cwd=workspace, capture_output=True, text=True,
                            timeout=60)
    assert second.returncode == 2 and second.stdout == "", second.stdout + second.stderr
    assert one_line_error(second.stderr).startswith(f"commlens run: {campaign}: campaign runstop is being run "
                                                    f"already (commlens run {campaign} (pid {process.pid} on ")
    assert log.read_text().startswith(logged) and "run_launch" in logged
    process.send_signal(signal.SIGINT)            # to commlens alone, as a terminal's Ctrl-C reaches it
    out, err = process.communicate(timeout=90)
    assert process.returncode == 130, out + err
    assert "commlens run: stopped; finished launches are kept" in err
    assert no_leftovers(workspace) == [] and not list(raw.rglob("*.partial"))


def workflows(workspace: Path) -> list[str]:
    """Live Snakemake processes working in `workspace`."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            cmdline = " ".join(process.info["cmdline"] or [])
            if process.info["status"] != psutil.STATUS_ZOMBIE and "snakemake" in cmdline and str(workspace) in cmdline:
                found.append(f"{process.pid} {cmdline[:160]}")
        except psutil.Error:
            continue
    return found


@pytest.mark.mpi
def test_a_run_killed_outright_takes_its_workflow_and_launch_along(workspace, built, tmp_path):
    """SIGKILL (the OOM killer) gives `commlens run` no chance to stop Snakemake, which runs in a session
    of its own: its workflow and the launch under way must end all the same, and leave Snakemake's lock
    free, so that running the campaign again resumes it."""
    from test_reliability import leftovers, no_leftovers

    text = small_campaign("killedrun", timeout=120).replace(
        "pingpong.send: {sizes: {list: [8, 1Ki]}}",
        "pingpong.send@hang: {sizes: {list: [8, 1Ki]}, test_hang_after: 1}")
    campaign = write_campaign(workspace / "config" / "campaigns", text, "killedrun.yaml")
    process = subprocess.Popen(commlens_run(workspace, campaign), cwd=workspace, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True,
                               env={**os.environ, "COMMLENS_CACHE": str(tmp_path / "cache")})
    raw = workspace / "results" / "killedrun" / "raw"
    deadline = time.monotonic() + 120
    while not (list(raw.rglob("*.jsonl.partial")) and leftovers(workspace)):   # the launch is measuring
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.3)
    process.kill()
    process.wait()
    assert no_leftovers(workspace, within_s=30) == []
    deadline = time.monotonic() + 30
    while workflows(workspace) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert workflows(workspace) == []
    assert not list((workspace / ".snakemake" / "locks").glob("*")), "Snakemake's lock was left behind"
    assert not list(raw.rglob("*.partial"))
