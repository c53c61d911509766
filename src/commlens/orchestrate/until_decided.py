"""Launches until decided (`launches: {min: 3, max: 8, until: decided}`): `commlens run` runs the
campaign's launches round by round through the workflow and, from launches.min rounds on, looks after
each round at every `compare:` pair (commlens.analysis.sequential.after_round): another round runs
while a compared cell is undecided and could still be decided, up to launches.max. The dataset and
report are made once, after the last round (commlens.orchestrate.campaign_run).

Each look is kept in results/<campaign>/decisions.json: the workflow reads from it how many rounds to
run (a campaign stopped in the middle goes on where it was), and the collection keeps it in the dataset,
whose Methods say when and why the campaign stopped. A look reads the raw files as the collection
does, into memory only: the looks before the last must not leave a dataset the report could mistake
for the campaign's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from commlens.analysis.sequential import DECIDED, UNDECIDED, after_round
from commlens.campaign import Campaign
from commlens.campaign.rounds import DECISIONS_FILE, recorded_decisions, recorded_seed
from commlens.data.collect import build_dataset, stream_raw
from commlens.io.atomic import write_text
from commlens.orchestrate.workflow_run import Workflow

# The workflow target that runs every launch of the rounds asked for, and nothing after them.
LAUNCHES_TARGET = "launches"


class RoundsSetByLooks(ValueError):
    """Snakemake's arguments set the rounds of a campaign whose looks choose them."""


def run_until_decided(campaign: Campaign, workdir: Path, run_workflow: Workflow,
                      build_dir: Path | None = None) -> tuple[int, bool]:
    """Rounds until decided; (exit status, interrupted) of the last workflow run. `run_workflow(targets)`
    runs the campaign's workflow with those targets."""
    until = campaign.until_decided
    if until is None:
        raise ValueError(f"run_until_decided: campaign {campaign.name} runs a fixed number of launches, "
                         f"not launches until decided")
    results = workdir / "results" / campaign.name
    path = results / DECISIONS_FILE
    record = recorded_decisions(results) or {"min": until["min"], "max": until["max"], "rounds": until["min"],
                                             "looks": []}
    while True:
        rounds = record["rounds"]
        code, interrupted = run_workflow([LAUNCHES_TARGET])
        if code != 0 or interrupted:
            return code, interrupted
        look = _look(campaign, workdir, build_dir or workdir / "build", rounds, until)
        # A rerun after an interrupted look replaces that look; earlier ones stay as they were.
        record["looks"] = [old for old in record["looks"] if old["rounds"] < rounds] + [look]
        more = look["more"] and rounds < until["max"]
        if more:
            record["rounds"] = rounds + 1
            record.pop("stopped", None)
        else:
            record["stopped"] = look["reason"]
        results.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(record, indent=1) + "\n")
        print(f"[decided] after {rounds} rounds: {look['reason']}"
              + (f"; round {rounds + 1} of at most {until['max']} runs next" if more else ""), flush=True)
        if not more:
            return 0, False


def _look(campaign: Campaign, workdir: Path, build_dir: Path, rounds: int, until: dict) -> dict:
    """Where every compare: pair stands after `rounds` rounds: {rounds, more, reason, pairs}."""
    ds = _dataset(campaign, workdir, build_dir, rounds)
    pairs, more, reasons = [], False, []
    for pair in campaign.config["compare"]:
        decision = after_round(ds, pair["baseline"], pair["candidate"], min_rounds=until["min"],
                               max_rounds=until["max"], dim="library")
        if decision.result is None:     # no look: the launches read hold fewer than launches.min rounds
            raise RuntimeError(f"launches until decided: the look after round {rounds} found only {decision.reason} "
                               f"in {campaign.name}'s raw files ({pair['candidate']} against "
                               f"{pair['baseline']})")
        # Cells either row measured: sizes a kernel's placements never ran are no undecided cells.
        measured = (decision.result["baseline_launches"] > 0) | (decision.result["candidate_launches"] > 0)
        verdicts = decision.verdict.values[measured.transpose(*decision.verdict.dims).values].tolist()
        counts = {name: verdicts.count(name) for name in (*DECIDED, UNDECIDED)}
        pairs.append({**pair, **counts, "could_still_decide": int(decision.could_reach.sum()),
                      "more": decision.more})
        more |= decision.more
        reasons.append(f"{pair['candidate']} against {pair['baseline']}: {decision.reason}")
    return {"rounds": rounds, "more": more, "reason": "; ".join(reasons), "pairs": pairs}


def _dataset(campaign: Campaign, workdir: Path, build_dir: Path, rounds: int):
    """The campaign's launches of its first `rounds` rounds, read as the collection reads them."""
    results = workdir / "results" / campaign.name
    config = {**campaign.config, "rounds": rounds}
    seed = recorded_seed(results)
    if campaign.round_seed is None and seed is not None:
        config["round_seed"] = seed
    campaign = Campaign(name=campaign.name, source=campaign.source, config=config)
    records = {}
    for kind, name in (("envs", "library.json"), ("kernels", "build.json")):
        records[kind] = {mpi: json.loads((build_dir / kind / mpi / name).read_text()) for mpi in campaign.mpi_names}
    paths = [results / "raw" / library / placement / kernel / f"launch{launch}.jsonl"
             for library, placement, kernel, launch in campaign.runs()]
    refused: list = []
    with open(results / "logs" / "decisions.log", "a") as log:
        stream, _ = stream_raw(paths, refused, log=log)
        return build_dataset(campaign, stream, records["envs"], records["kernels"], refused)


def refuse_when_asked_for_rounds(snakemake_args: Sequence[str]) -> None:
    """RoundsSetByLooks where Snakemake's arguments have `--config rounds=N`, which would fight the looks
    over how many rounds run."""
    if any(arg.startswith("rounds=") for arg in snakemake_args):
        raise RoundsSetByLooks(f"rounds= is set by launches until decided itself (results/<campaign>/"
                               f"{DECISIONS_FILE}); leave it out")
