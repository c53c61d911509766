"""What of Snakemake's output a campaign's run shows (Console), and the jobs of its printed plan
(planned_jobs).

Snakemake's own output (a dozen lines per job, the collect job's list of every raw file) goes to the
run's log; the console gets commlens's lines only: the progress line each launch prints
(commlens.launch.progress), a line when an MPI environment or kernel build starts and ends, collect
and the report with their estimated and actual durations, the report's progress per notebook cell
(read from its rule's log), and Snakemake's error messages. The job lines are told apart by the rule
names of workflow/rules/*.smk.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from commlens.campaign import Campaign
from commlens.launch.progress import NOT_RECORDED_LINE, PROGRESS_LINE, WAITING_LINE, record_stage, stage_estimate_s
from commlens.units import format_duration

JOB = re.compile(r"^(?:local)?rule (?P<rule>\w+):$")
JOB_FIELD = re.compile(r"^\s+(?P<key>jobid|wildcards|resources): (?P<value>.*)$")   # resources: the block's last
FINISHED = re.compile(r"^Finished jobid: (?P<jobid>\d+) \(Rule: (?P<rule>\w+)\)$")
ERROR = re.compile(r"^(?:[A-Z]\w*(?:Error|Exception)\b|Error in rule |Exiting because )")
NOTHING = re.compile(r"^Nothing to be done")
# Lines that end an error message: Snakemake's scheduling, never part of one.
SCHEDULING = re.compile(r"^(?:\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]$|Select jobs|Execute \d+ jobs|Finished jobid|"
                        r"\d+ of \d+ steps|Complete log|(?:local)?rule \w+:$|Removing output files|Job stats|"
                        r"Building DAG)")
# Fields of an error message that list every input file: thousands of characters in a large campaign.
LONG_FIELDS = re.compile(r"^\s+(?:input|reason): ")
# The rules that make an MPI library usable (the environment, the kernels' build), by the word shown.
STAGE_WORDS = {"mpi_environment": "environment", "build_kernels": "build"}
REPORT_PREFIX = "[report] "
# What the workflow says of the campaign's files before any job: one from the future, a dataset out of date.
NOTICE = re.compile(r"^\S+(?:: modified in the future \(| is out of date: )")
# The collect and report jobs' one-line errors (workflow/scripts/collect.py, rules/report.smk).
JOB_ERROR = re.compile(r"^commlens (?:collect|report): ")


def planned_jobs(plan: str) -> list[tuple[str, dict[str, str]]]:
    """The jobs of Snakemake's printed plan (or run): (rule, its wildcards by name) in the order printed."""
    jobs: list[tuple[str, dict[str, str]]] = []
    for line in plan.splitlines():
        job = JOB.match(line)
        if job:
            jobs.append((job["rule"], {}))
            continue
        field = JOB_FIELD.match(line)
        if jobs and field and field["key"] == "wildcards":
            jobs[-1][1].update(dict(part.split("=", 1) for part in field["value"].split(", ") if "=" in part))
    return jobs


class Console:
    """What of Snakemake's output the user sees (see the module's docstring): `feed` each line of it,
    `poll` now and then for the report's progress."""

    def __init__(self, campaign: Campaign, results: Path):
        self.campaign, self.results = campaign, results
        self.dataset = results / f"{campaign.name}.nc"
        self.report_log = results / "logs" / "report.log"
        self.pending: dict | None = None      # the job whose lines Snakemake is printing
        self.jobs: dict[str, dict] = {}       # started jobs by id
        self.in_error = False
        self.report_since: float | None = None
        self.report_offset = 0

    def feed(self, line: str) -> None:
        if PROGRESS_LINE.match(line) or NOTHING.match(line) or WAITING_LINE.match(line) or NOTICE.match(line):
            print(line, flush=True)
            return
        if NOT_RECORDED_LINE.match(line) or JOB_ERROR.match(line):
            print(line, file=sys.stderr, flush=True)
            return
        field = JOB_FIELD.match(line) if self.pending is not None else None
        if field and self.pending is not None:
            self.pending[field["key"]] = field["value"]
        if self.pending is not None and ((field and field["key"] == "resources") or not line.startswith(" ")):
            self._started(self.pending)
            self.pending = None
        job = JOB.match(line)
        if job:
            self.pending = {"rule": job["rule"], "at": time.monotonic()}
        finished = FINISHED.match(line)
        if finished:
            self._finished(self.jobs.pop(finished["jobid"], {"rule": finished["rule"], "at": None}))
        if ERROR.match(line):
            self.in_error = True
        elif self.in_error and SCHEDULING.match(line):
            self.in_error = False
        if self.in_error and not LONG_FIELDS.match(line):
            print(line, file=sys.stderr, flush=True)

    def _started(self, job: dict) -> None:
        self.jobs[job.get("jobid", "")] = job
        rule, what = job["rule"], _wildcards(job.get("wildcards", ""))
        if rule == "collect":
            raw = list((self.results / "raw").rglob("*.jsonl"))
            job["units"] = sum(path.stat().st_size for path in raw)
            estimate = stage_estimate_s("collect", job["units"])
            print(f"[collect] {len(raw)} raw files into {self.dataset}, about {format_duration(estimate)}",
                  flush=True)
        elif rule == "report":
            self.report_since, self.report_offset = time.time() - 1, 0
        elif rule in STAGE_WORDS:
            print(f"[{STAGE_WORDS[rule]}] {what}: started", flush=True)

    def _finished(self, job: dict) -> None:
        rule, what = job["rule"], _wildcards(job.get("wildcards", ""))
        took = time.monotonic() - job["at"] if job["at"] is not None else None
        took_text = f"{format_duration(took)}" if took is not None else "done"
        if rule == "collect":
            if took is not None and "units" in job:
                record_stage("collect", job["units"], took)
            print(f"[collect] {took_text}: {self.dataset}", flush=True)
        elif rule == "report":
            self.poll()
            self.report_since = None
            print(f"[report] {took_text}: {self.results / 'report.html'}", flush=True)
        elif rule in STAGE_WORDS:
            print(f"[{STAGE_WORDS[rule]}] {what}: {took_text}", flush=True)

    def poll(self) -> None:
        """The report's progress lines, from its rule's log, as `commlens report` writes them there."""
        if self.report_since is None:
            return
        try:
            stat = self.report_log.stat()
            if stat.st_mtime < self.report_since:     # the last run's log, not yet replaced
                return
            if stat.st_size < self.report_offset:
                self.report_offset = 0
            with open(self.report_log, "rb") as log:
                log.seek(self.report_offset)
                data = log.read()
        except OSError:
            return
        complete = data[:data.rfind(b"\n") + 1]
        self.report_offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            if line.startswith(REPORT_PREFIX):
                print(line, flush=True)


def _wildcards(text: str) -> str:
    """'mpi=mpich-5.0.2' -> 'mpich-5.0.2'; several values joined by spaces."""
    return " ".join(part.split("=", 1)[-1] for part in text.split(", ") if part)
