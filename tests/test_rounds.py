"""Launches in rounds (commlens.campaign.rounds): round r runs every (library, placement, kernel) once, in
an order drawn from the campaign's round_seed, and round r+1 starts after round r has ended; every launch
records its round and position, the dataset holds them, a resumed campaign keeps its design."""

import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from commlens import open_campaign
from commlens.analysis.sequential import SPENDING_POWER
from commlens.campaign import Campaign, load_campaign
from commlens.campaign.rounds import SEED_FILE, recorded_seed, round_order, sequence
from commlens.io.raw import read_launch_record
from commlens.report.methods.rounds import rounds_paragraph, until_decided_paragraph

from conftest import LIBRARIES, campaign_error, interruptible, snakemake, workflow_command, write_campaign

COMMLENS = Path(sys.executable).parent / "commlens"


def commlens_run(workspace: Path, campaign: Path) -> list[str]:
    """`commlens run` as a user types it, with the tests' builds (conftest.workflow_command)."""
    return [str(COMMLENS), "run", str(campaign), "--directory", str(workspace),
            "--config", "strict_build=" + ",".join(LIBRARIES)]


CELLS = [(library, placement, kernel) for library in ("mpich", "openmpi", "tuned")
         for placement in ("1N2P", "2N1P") for kernel in ("pingpong.send", "coll.bcast")]


def test_each_round_is_a_permutation_drawn_from_the_seed_alone():
    orders = [round_order(CELLS, 7, r) for r in range(6)]
    assert all(sorted(order) == sorted(CELLS) for order in orders)
    assert len({tuple(order) for order in orders}) == 6                 # a new order every round
    assert round_order(CELLS, 7, 3) == orders[3]                        # the seed reproduces it
    assert round_order(list(reversed(CELLS)), 7, 3) == orders[3]        # whatever order the file lists rows in
    assert round_order(CELLS, 8, 3) != orders[3]
    # A row added to the campaign takes places in each round without reordering the others.
    added = [cell for cell in round_order(CELLS + [("new", "1N2P", "pingpong.send")], 7, 3) if cell[0] != "new"]
    assert added == orders[3]
    # Every cell is about as often first as any other: the order is no fixed rotation.
    firsts = [round_order(CELLS, seed, 0)[0] for seed in range(1200)]
    assert min(firsts.count(cell) for cell in CELLS) > 1200 / len(CELLS) / 2


def test_the_sequence_runs_round_after_round_and_each_launch_knows_its_turn(tmp_path):
    campaign = load_campaign(write_campaign(tmp_path, """
        campaign: turns
        libraries: {a: {mpi: mpich-5.0.2}, b: {mpi: openmpi-5.0.11}}
        placements: [{name: 1N2P, nodes: 1, ppn: 2}, {name: 2N1P, nodes: 2, ppn: 1}]
        kernels:
          pingpong.send: {sizes: {list: [8]}}
          coll.bcast: {sizes: {list: [8]}, placements: [2N1P]}
        launches: 3
        round_seed: 11
    """))
    runs = campaign.in_rounds()
    assert sorted(runs) == sorted(campaign.runs()) and len(runs) == 2 * 3 * 3
    assert [run[3] for run in runs] == [0] * 6 + [1] * 6 + [2] * 6
    assert runs == sequence(campaign.cells(), 11, 3)
    for position, run in enumerate(runs):
        assert campaign.turn(*run) == {"round": run[3], "round_position": position % 6}
    assert campaign.launch_settings(*runs[0])["round_seed"] == 11
    unseeded = Campaign(campaign.name, campaign.source, {k: v for k, v in campaign.config.items() if k != "round_seed"})
    with pytest.raises(ValueError, match="has no round_seed yet"):
        unseeded.in_rounds()


def test_a_damaged_seed_record_is_named_never_replaced(tmp_path):
    assert recorded_seed(tmp_path) is None
    (tmp_path / SEED_FILE).write_text('{"round_seed": 12}\n')
    assert recorded_seed(tmp_path) == 12
    (tmp_path / SEED_FILE).write_text("{")
    with pytest.raises(ValueError, match=f"{tmp_path / SEED_FILE}: cannot read the recorded round_seed"):
        recorded_seed(tmp_path)


# --- Real campaigns: the recorded order is the design, and rounds never overlap ---

def launch_records(results: Path) -> list[dict]:
    return [read_launch_record(path) for path in sorted((results / "raw").rglob("launch*.jsonl"))]


def interval(record: dict) -> tuple[float, float]:
    """When the launch ran: `started` is cut to the millisecond, `duration_s` rounded to one."""
    start = datetime.fromisoformat(record["started"]).timestamp()
    return start, start + record["duration_s"]


def assert_ran_as_designed(results: Path, campaign: Campaign) -> list[dict]:
    """The launches' records against the design of the seed results/<campaign>/ recorded: each round's
    positions a permutation, each launch where the design puts it, and each launch started after the
    one before it in the design had ended. Returns the records in the order they ran."""
    seed = recorded_seed(results)
    designed = Campaign(campaign.name, campaign.source, {**campaign.config, "round_seed": seed}).in_rounds()
    records = launch_records(results)
    assert len(records) == len(designed)
    cells = len(campaign.cells())
    for round_ in range(campaign.launches):
        positions = sorted(r["round_position"] for r in records if r["round"] == round_)
        assert positions == list(range(cells)), (round_, positions)
    ran = sorted(records, key=lambda r: interval(r)[0])
    assert [(r["library"], r["placement"], r["kernel"], r["launch"]) for r in ran] == designed
    assert [(r["round"], r["round_position"]) for r in ran] == [(i // cells, i % cells) for i in range(len(ran))]
    for before, after in zip(ran, ran[1:]):
        # 2 ms: the start is cut to the millisecond and the duration rounded to one.
        assert interval(after)[0] + 0.002 >= interval(before)[1], (before, after)
    return ran


@pytest.mark.mpi
def test_a_campaign_runs_in_its_recorded_rounds_and_the_dataset_holds_them(workspace, tiny_campaign):
    campaign_file, _ = tiny_campaign
    results = workspace / "results" / "tiny"
    campaign = load_campaign(campaign_file)
    ran = assert_ran_as_designed(results, campaign)
    ds = open_campaign(results / "tiny.nc")
    assert ds.attrs["round_seed"] == recorded_seed(results)
    assert json.loads(ds.attrs["campaign_config"])["round_seed"] == recorded_seed(results)
    assert ds["round"].dtype == np.int64 and ds["round_position"].dtype == np.int64
    assert ds["round"].dims == ds["round_position"].dims == ("library", "placement", "kernel", "launch")
    for record in ran:
        cell = {key: record[key] for key in ("library", "placement", "kernel", "launch")}
        assert int(ds["round"].sel(**cell)) == record["round"] == record["launch"]
        assert int(ds["round_position"].sel(**cell)) == record["round_position"]
    text = rounds_paragraph(ds)
    assert "Launches ran in 2 rounds" in text and f"round_seed {recorded_seed(results)}" in text, text
    assert "no launch of a round started before one of the round before it" in text, text


RESUMED = textwrap.dedent("""
    campaign: resumed
    libraries:
      mpich-5.0.2: {mpi: mpich-5.0.2}
    placements: [{name: 1N2P, nodes: 1, ppn: 2}]
    kernels:
      pingpong.send: {sizes: {list: [8, 1Ki]}}
      pingpong.isend: {sizes: {list: [8, 1Ki]}}
      pingpong.ssend: {sizes: {list: [8, 1Ki]}}
    launches: 2
    precision: {rse: 0.2, min_samples: 3, max_samples: 30, max_point_time: 0.3}
    timeout: 60
""")


def started_unfinished(results: Path) -> bool:
    """Whether a launch has started (holds its lock) and not yet ended. The launch before it in the design
    then ended, and its job too: a job cut short before Snakemake recorded its end is redone."""
    return any(not lock.with_suffix("").exists() for lock in (results / "raw").rglob("launch*.jsonl.lock"))


@pytest.mark.mpi
def test_an_interrupted_campaign_resumes_with_its_design(workspace, built):
    """Ctrl-C once two launches have ended and a third is under way: the rerun keeps the seed drawn by the
    first run, leaves the finished launches as they are and runs the rest in the order that seed gives."""
    campaign_file = write_campaign(workspace / "config" / "campaigns", RESUMED, "resumed.yaml")
    results = workspace / "results" / "resumed"
    target = "results/resumed/resumed.nc"
    process = subprocess.Popen(workflow_command(workspace, target, "--configfile", str(campaign_file)),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True, preexec_fn=interruptible)
    deadline = time.monotonic() + 600     # launches wait for the machine while others run
    while True:
        # Launches whose jobs have ended: taken before a later launch is seen under way. That one may
        # still end and leave its raw file, but Snakemake, stopped before it recorded the job's end,
        # redoes it.
        finished = {path: path.read_bytes() for path in (results / "raw").rglob("launch*.jsonl")}
        if len(finished) >= 2 and started_unfinished(results):
            break
        assert time.monotonic() < deadline and process.poll() is None, process.stdout.read()
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    output = process.communicate(timeout=60)[0]
    seed = recorded_seed(results)
    assert 2 <= len(finished) < 6 and not (results / "resumed.nc").exists(), output[-3000:]

    snakemake(workspace, "--unlock", "--configfile", str(campaign_file))
    snakemake(workspace, target, "--configfile", str(campaign_file))
    assert recorded_seed(results) == seed
    assert all(path.read_bytes() == content for path, content in finished.items())
    ran = assert_ran_as_designed(results, load_campaign(campaign_file))
    assert (open_campaign(results / "resumed.nc")["round"] >= 0).all()

    # A launch redone redoes those after it in the design, and only those: the order recorded stays
    # the order they ran in.
    redone = "results/resumed/raw/{library}/{placement}/{kernel}/launch{launch}.jsonl"
    plan = snakemake(workspace, target, "--configfile", str(campaign_file), "--dry-run",
                     "--forcerun", redone.format(**ran[3])).stdout
    planned = re.findall(r"rule run_launch:\n\s+input: [^\n]*\n\s+output: (\S+)", plan)
    assert sorted(planned) == sorted(redone.format(**record) for record in ran[3:]), plan[-3000:]


# --- Launches until decided: rounds until the compare: pairs are decided (commlens.orchestrate.until_decided) ---

UNTIL_DECIDED = textwrap.dedent("""
    campaign: {name}
    libraries:
      sm:  {{mpi: openmpi-5.0.11}}
      tcp: {{mpi: openmpi-5.0.11, env: {{OMPI_MCA_btl: "self,tcp"}}}}
    placements: [{{name: 1N2P, nodes: 1, ppn: 2}}]
    kernels:
      pingpong.send: {{sizes: {{list: [8, 1Ki]}}}}
    launches: {launches}
    compare: [{{baseline: sm, candidate: tcp}}]
    precision: {{rse: 0.05, min_samples: 10, max_samples: 300, max_point_time: 0.3}}
    timeout: 60
""")
# A bisection that cannot run (no such release): recorded with its error, and the campaign goes on.
NO_BISECTION = ("bisect: [{baseline: openmpi-0.0.1, candidate: openmpi-5.0.11, kernel: pingpong.send, "
                "placement: 1N2P, sizes: [8]}]\n")


def test_launches_until_decided_are_checked_as_the_file_is_read(tmp_path):
    def text(launches, extra=""):
        return UNTIL_DECIDED.format(name="u", launches=launches) + extra

    campaign = load_campaign(write_campaign(tmp_path, text("{min: 3, max: 8, until: decided}")))
    assert campaign.until_decided == {"min": 3, "max": 8, "until": "decided"} and campaign.launches == 3
    assert campaign.launches_in_words() == "2 launches a round, 3 to 8 rounds until the compare: pairs are decided"
    assert Campaign(campaign.name, campaign.source, {**campaign.config, "rounds": 5}).launches == 5
    assert load_campaign(write_campaign(tmp_path, text(4))).launches_in_words() == "8 launches"
    assert "launches.min (5) is larger than launches.max (4)" in campaign_error(
        tmp_path, text("{min: 5, max: 4, until: decided}"))
    assert "launches.until: 'decide' is not allowed (did you mean 'decided'?); allowed values: decided" in \
        campaign_error(tmp_path, text("{min: 3, max: 4, until: decide}"))
    assert "launches: 0 is less than the minimum of 1" in campaign_error(tmp_path, text(0))
    assert "launches: 'abc' is not allowed; allowed: an integer, at least 1, at most 1000 or a mapping with keys " \
        "min, max, until" in campaign_error(tmp_path, text("abc"))
    assert "launches: unknown key 'untl' (did you mean 'until'?)" in campaign_error(
        tmp_path, text("{min: 3, max: 4, untl: decided}"))
    assert "kernels.pingpong.send.sizes: unknown key 'maxx' (did you mean 'max'?)" in campaign_error(
        tmp_path, text(3).replace("{list: [8, 1Ki]}", "{schedule: powers, min: 8, maxx: 1Ki}"))
    assert "rounds: 9 is outside launches.min..launches.max (3..8)" in campaign_error(
        tmp_path, text("{min: 3, max: 8, until: decided}", "rounds: 9\n"))
    assert "rounds: only with launches until decided" in campaign_error(tmp_path, text(3, "rounds: 2\n"))
    alone = text("{min: 3, max: 8, until: decided}").replace("compare: [{baseline: sm, candidate: tcp}]\n", "")
    assert "launches: until decided needs `compare:` pairs" in campaign_error(tmp_path, alone)
    # A dataset without the looks (the workflow run alone) says so, and claims no look.
    paragraph = until_decided_paragraph(xr.Dataset(), {"min": 3, "max": 8, "until": "decided"})
    assert paragraph == ("Launches until decided: at least 3 and at most 8 rounds. The looks that chose the rounds: "
                         "not recorded (the workflow was run without commlens run).")


@pytest.mark.mpi
def test_a_campaign_runs_rounds_until_its_pairs_are_decided_and_its_report_says_when_it_stopped(workspace, built):
    """Open MPI on one node over TCP against shared memory, a real knob tens of times slower at 8 B and
    1 KiB: decided at the first look, after launches.min rounds, though launches.max allows one more. (Two
    rounds leave the paired test one degree of freedom, and a 40x change went undecided at 2 rounds.) The
    looks are kept for a rerun and in the dataset; the report's verdicts and Methods are the looks'. Its
    bisection cannot run (no such release): the campaign ends all the same, exits 1 and says why."""
    from commlens.report.analysis_table import ReportData
    from commlens.report.comparisons import library_row_comparisons
    from commlens.report.methods import methods

    name = "decided"
    campaign = write_campaign(workspace / "config" / "campaigns",
                              UNTIL_DECIDED.format(name=name, launches="{min: 3, max: 4, until: decided}")
                              + NO_BISECTION, f"{name}.yaml")
    run = subprocess.run(commlens_run(workspace, campaign), capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "commlens run: 1 of the campaign's bisections failed" in run.stderr, run.stderr[-3000:]
    results = workspace / "results" / name
    [bisection] = json.loads((results / "bisections.json").read_text())
    assert "openmpi-0.0.1" in bisection["error"] and f"[bisect] openmpi-0.0.1 -> openmpi-5.0.11 failed: " \
        f"{bisection['error']}" in run.stdout
    assert "2 launches a round, 3 to 4 rounds until the compare: pairs are decided" in run.stdout
    assert "[decided] after 3 rounds: tcp against sm: decided after 3 rounds: 2 regressed" in run.stdout, run.stdout
    raw = results / "raw" / "tcp" / "1N2P" / "pingpong.send"
    assert sorted(p.name for p in raw.iterdir()) == ["launch0.jsonl", "launch1.jsonl", "launch2.jsonl"]
    record = json.loads((results / "decisions.json").read_text())
    assert record["rounds"] == 3 and [look["rounds"] for look in record["looks"]] == [3]
    assert record["looks"][0]["pairs"][0]["regressed"] == 2 and record["stopped"].startswith("tcp against sm")

    ds = open_campaign(results / f"{name}.nc")
    assert ds.sizes["launch"] == 3 and json.loads(ds.attrs["until_decided"]) == record
    launches = next(section for section in methods(ds) if section.heading == "Launches and order")
    text = " ".join(launches.paragraphs)
    assert "until decided (3 to 4 rounds)" in text and "After 3 rounds: tcp against sm: 2 regressed." in text, text
    assert f"Stopped after 3 rounds: {record['stopped']}." in text
    [comparison] = library_row_comparisons(ReportData(ds))
    assert comparison.counts["regressed"] == 2 and f"(rounds/4)^{SPENDING_POWER}" in comparison.statement
    # The dataset keeps the bisection's record with its paths made relative (no machine's paths in a dataset).
    [kept] = json.loads(ds.attrs["bisections"])
    assert "openmpi-0.0.1" in kept["error"] and str(workspace) not in kept["error"]
    assert comparison.causes == (f"Bisecting openmpi-0.0.1 -> openmpi-5.0.11 failed: {kept['error']}.",)
    assert (comparison.result["decided_at"] == 3).all()

    # Run again: nothing is measured again, and the look gives the same decision.
    again = subprocess.run(commlens_run(workspace, campaign), capture_output=True, text=True, timeout=600)
    assert again.returncode == 1 and "[decided] after 3 rounds" in again.stdout, again.stdout[-3000:]
    assert "launches]" not in again.stdout and json.loads((results / "decisions.json").read_text()) == record

    # A campaign stopped while a 4th round ran goes on with it: the workflow reads the rounds recorded.
    (results / "decisions.json").write_text(json.dumps({**record, "rounds": 4}))
    snakemake(workspace, "launches", "--configfile", str(campaign))
    assert sorted(p.name for p in raw.iterdir())[-1] == "launch3.jsonl"
    assert read_launch_record(raw / "launch3.jsonl")["round"] == 3
