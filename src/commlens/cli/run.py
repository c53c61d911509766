"""`commlens run CAMPAIGN [SNAKEMAKE_ARG...]`: the campaign's workflow (workflow/Snakefile, run by
the Snakemake beside this Python), as `make campaign` runs it, then the campaign's summary.

Snakemake's own output (a dozen lines per job, the collect job's list of every raw file) goes to
results/<campaign>/logs/snakemake.log; the console gets commlens's lines only: the progress line
each launch prints (commlens.launch.progress), a line when an MPI environment or kernel build
starts and ends, collect and the report with their estimated and actual durations, the report's
progress per notebook cell (read from its rule's log), and Snakemake's error messages. The job
lines are told apart by the rule names of workflow/rules/*.smk.

Snakemake runs in a session of its own, so that it and its jobs hear of Ctrl-C from commlens only:
Ctrl-C (SIGINT), SIGTERM and SIGHUP are passed to its whole process group as the SIGINT a terminal's
Ctrl-C sends a plain `snakemake`, which ends the running launches (Snakemake itself waits for its jobs
to end) and the workflow cleanly; finished launches are kept and a rerun resumes. The session's first
process is a small guard (commlens.launch.supervision.guarded_workflow) that does the same when
`commlens run` is killed outright and can pass nothing on.
A dry run (-n) puts Snakemake's plan in results/<campaign>/logs/dry-run.log and prints what it comes to:
launches done and to run, libraries to build, an estimated time. Snakemake's other reports go to the
console as they are.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from commlens.campaign import load_campaign
from commlens.cli.bisections import BISECTIONS_FILE, run_bisections
from commlens.cli.until_decided import LAUNCHES_TARGET, refuse_when_asked_for_rounds, run_until_decided
from commlens.launch import locks
from commlens.campaign.kernels import size_count
from commlens.launch.progress import (NOT_RECORDED_LINE, PROGRESS_LINE, WAITING_LINE, plan_summary,
                                      record_stage, stage_estimate_s)
from commlens.launch.supervision import guarded_workflow
from commlens.locations import resolve
from commlens.units import format_duration

# Snakemake's options that print something other than a run: their output is the point.
DRY_RUN = {"-n", "--dry-run", "--dryrun"}
AS_IS = {"-n", "--dry-run", "--dryrun", "--unlock", "-S", "--summary", "-D", "--detailed-summary", "--dag",
         "--rulegraph", "--filegraph", "--lint", "-l", "--list-rules", "--lt", "--list-target-rules", "-h",
         "--help", "--version", "-v"}
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
STAGE_WORDS = {"mpi_environment": "environment", "build_kernels": "build"}
REPORT_PREFIX = "[report] "
# What the workflow says of the campaign's files before any job: one from the future, a dataset out of date.
NOTICE = re.compile(r"^\S+(?:: modified in the future \(| is out of date: )")
# The collect and report jobs' one-line errors (workflow/scripts/collect.py, rules/report.smk).
JOB_ERROR = re.compile(r"^commlens (?:collect|report): ")


# Held by `commlens run` while it runs a campaign, beside its Snakemake log (commlens.launch.locks).
RUN_LOCK = ".run.lock"


class CampaignBusy(OSError):
    """A campaign that another `commlens run` is running: one line naming it, who runs it and its log."""


def run_campaign(args) -> int:
    campaign = load_campaign(args.campaign)          # a broken campaign file is refused before Snakemake starts
    snakefile = resolve(Path("workflow") / "Snakefile")
    if not snakefile.is_file():
        raise FileNotFoundError(f"{snakefile}: no workflow; commlens run runs the workflow of a checkout of the "
                                "repository (an installed commlens carries no workflow/)")
    snakemake = Path(sys.executable).parent / "snakemake"
    if not snakemake.is_file():
        snakemake = shutil.which("snakemake")
        if snakemake is None:
            raise FileNotFoundError("snakemake: not installed here (pip install 'commlens[workflow]', or make "
                                    "campaign in a checkout)")
    # Snakemake's own arguments first: --configfile takes every word after it.
    command = [str(snakemake), "-s", str(snakefile), *args.snakemake_args, "--configfile", args.campaign]
    workdir = Path(_option(args.snakemake_args, "--directory", "-d") or ".")
    results = workdir / "results" / campaign.name
    if DRY_RUN & set(args.snakemake_args):
        return _dry_run(command, campaign, results)
    if AS_IS & set(args.snakemake_args):
        return subprocess.call(command)
    if (workdir / "results").is_symlink():
        print(f"{workdir / 'results'} is a link to {(workdir / 'results').resolve()}: the campaign's results go there",
              flush=True)
    log_path = results / "logs" / "snakemake.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # One run of a campaign at a time: a second one is refused before it touches the first's log.
    with _only_run(log_path, args.campaign, campaign.name):
        print(f"campaign {campaign.name}: {campaign.launches_in_words()}; Snakemake's output: {log_path}", flush=True)
        with open(log_path, "w") as log:
            console = Console(campaign, results)
            if campaign.until_decided is None and not campaign.config.get("bisect"):
                code, interrupted = _supervise(command, log, console)
            else:
                code, interrupted = _run_in_steps(campaign, args.snakemake_args, workdir, lambda targets: _supervise(
                    # A target first: --config, among Snakemake's arguments, would take every word after it.
                    [command[0], *targets, *command[1:]], log, console))
    if interrupted:
        print("commlens run: stopped; finished launches are kept, and running it again resumes", file=sys.stderr)
        return 130
    if code != 0:
        print(f"commlens run: Snakemake stopped with status {code} (the errors above; all of its output: "
              f"{log_path})", file=sys.stderr)
        return code
    dataset = results / f"{campaign.name}.nc"
    if not dataset.exists():      # targets that stop short of the dataset
        return 0
    from commlens.cli.datasets import open_dataset
    from commlens.cli.summary import summary

    path, ds = open_dataset(dataset)
    code = summary(ds, path, check=True)
    failed = [record for record in _bisections(results, campaign) if "error" in record]
    if failed:
        print(f"commlens run: {len(failed)} of the campaign's bisections failed (above; their errors are in the "
              f"report too)", file=sys.stderr)
    return code or int(bool(failed))


def _dry_run(command: list[str], campaign, results: Path) -> int:
    """Snakemake's plan into results/<campaign>/logs/dry-run.log (hundreds of lines for a campaign of a
    few dozen launches), then what it comes to in a few lines (commlens.launch.progress.plan_summary)."""
    log_path = results / "logs" / "dry-run.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)
    if code != 0:
        print(f"commlens run: Snakemake's dry run stopped with status {code}; its output: {log_path}",
              file=sys.stderr)
        return code
    print(f"campaign {campaign.name}: {campaign.launches_in_words()}; Snakemake's plan: {log_path}")
    jobs = planned_jobs(log_path.read_text(errors="replace"))
    if not jobs:
        print("nothing to run: every launch, the dataset and the report are up to date")
        return 0
    to_run = [(job["library"], job["placement"], job["kernel"], int(job["launch"]))
              for rule, job in jobs if rule == "run_launch"]
    to_build = sorted({job["mpi"] for rule, job in jobs if rule in STAGE_WORDS})
    sizes = {name: size_count(spec["sizes"]) for name, spec in campaign.config["kernels"].items()}
    curves = len({run[:3] for run in campaign.runs()})
    for line in plan_summary(to_run, campaign.launch_count, to_build, sizes, curves):
        print(line)
    return 0


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
            jobs[-1][1].update(part.split("=", 1) for part in field["value"].split(", ") if "=" in part)
    return jobs


@contextlib.contextmanager
def _only_run(log_path: Path, campaign_file, name: str):
    """Holds the campaign's run lock (RUN_LOCK, beside its log) for the block; CampaignBusy where another
    `commlens run` holds it."""
    try:
        with locks.held(log_path.with_name(RUN_LOCK), locks.holder_line(f"commlens run {campaign_file}"), wait_s=0):
            yield
    except locks.LockTimeout as busy:
        raise CampaignBusy(f"{campaign_file}: campaign {name} is being run already ({busy.holder}); its output: "
                           f"{log_path}") from None


def _bisections(results: Path, campaign) -> list[dict]:
    """What this run's bisections recorded (none where the campaign has no bisect: entries)."""
    path = results / BISECTIONS_FILE
    return json.loads(path.read_text()) if campaign.config.get("bisect") and path.exists() else []


def _run_in_steps(campaign, snakemake_args: list[str], workdir: Path, workflow) -> tuple[int, bool]:
    """The launches (round by round, for launches until decided), then the campaign's bisections, then
    its dataset and report; (exit status, interrupted) of the step that ended it."""
    if campaign.until_decided is not None:
        refuse_when_asked_for_rounds(snakemake_args)
        build_dir = _option(snakemake_args, "build_dir")
        code, interrupted = run_until_decided(campaign, workdir, workflow,
                                              build_dir=workdir / build_dir if build_dir else None)
    else:
        code, interrupted = workflow([LAUNCHES_TARGET])
    if code != 0 or interrupted:
        return code, interrupted
    if campaign.config.get("bisect"):
        run_bisections(campaign, workdir, snakemake_args)
    return workflow([])


def _option(args: list[str], *names: str) -> str | None:
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _supervise(command: list[str], log, console: "Console") -> tuple[int, bool]:
    """Runs Snakemake with its output into `log` and through `console`; (exit status, interrupted)."""
    process = subprocess.Popen(guarded_workflow(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, bufsize=1, start_new_session=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    interrupted = []

    def stop_workflow():
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    def forward(signum, frame):
        if not interrupted:      # os.write: a signal handler must not re-enter a buffered print
            os.write(sys.stderr.fileno(), b"commlens run: stopping: Snakemake ends the running jobs\n")
        interrupted.append(signum)
        stop_workflow()

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, forward) for sig in handled}
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout] + [lines.put(None)],
                              daemon=True)
    reader.start()
    try:
        while True:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                console.poll()
                continue
            if line is None:
                break
            log.write(line)
            log.flush()
            console.feed(line.rstrip("\n"))
        code = process.wait()
        console.poll()
    except BaseException:
        # This process failing (a full disk under the log, say) must not leave the workflow running unseen.
        stop_workflow()
        process.wait()
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code, bool(interrupted)


class Console:
    """What of Snakemake's output the user sees (see the module's docstring)."""

    def __init__(self, campaign, results: Path):
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
        if field:
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
