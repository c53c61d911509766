"""One run of a campaign's workflow (workflow/Snakefile, run by the Snakemake beside this Python), as
`make campaign` runs it: Snakemake's output into results/<campaign>/logs/snakemake.log and through a
Console (commlens.orchestrate.workflow_output), one run of a campaign at a time (its run lock).

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
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from commlens.analysis.bisection import Bisection
from commlens.campaign import Campaign
from commlens.campaign.kernels import size_count
from commlens.launch import locks
from commlens.launch.progress import plan_summary
from commlens.launch.supervision import guarded_workflow
from commlens.locations import resolve
from commlens.orchestrate.workflow_output import STAGE_WORDS, Console, planned_jobs

# Snakemake's options that print something other than a run: their output is the point.
DRY_RUN = {"-n", "--dry-run", "--dryrun"}
AS_IS = {"-n", "--dry-run", "--dryrun", "--unlock", "-S", "--summary", "-D", "--detailed-summary", "--dag",
         "--rulegraph", "--filegraph", "--lint", "-l", "--list-rules", "--lt", "--list-target-rules", "-h",
         "--help", "--version", "-v"}

# Held while a campaign's workflow runs, beside its Snakemake log (commlens.launch.locks).
RUN_LOCK = ".run.lock"

# Runs the campaign's workflow with these targets (none: the workflow's own); (exit status, interrupted).
Workflow = Callable[[list[str]], tuple[int, bool]]
# Runs a campaign in steps through the Workflow it is given, in the workflow's working directory (a Path);
# (exit status, interrupted) of the step that ended it.
InSteps = Callable[[Workflow, Path], tuple[int, bool]]


class CampaignBusy(OSError):
    """A campaign that another `commlens run` is running: one line naming it, who runs it and its log."""


@dataclass(frozen=True)
class CampaignRun:
    """What a run of a campaign came to: the workflow's exit status and whether it was interrupted;
    Snakemake's log, where commlens ran it (None: a dry run, or one of Snakemake's reports, whose output
    was the point); the campaign's dataset where the run ended well and made or kept it; and what the
    campaign's bisections recorded, where it has `bisect:` entries."""

    campaign: Campaign
    code: int
    interrupted: bool = False
    log: Path | None = None
    dataset: Path | None = None
    bisections: tuple[Bisection, ...] = ()


# What a front end makes of a finished run (prints why it stopped, or the campaign's summary): its exit status.
ShowRun = Callable[[CampaignRun], int]


def exit_status(run: CampaignRun) -> int:
    """A run's exit status where nothing is printed of it: 130 (as for Ctrl-C) where it was interrupted."""
    return 130 if run.interrupted else run.code


def run_workflow(campaign_file: str, campaign: Campaign, snakemake_args: Sequence[str],
                 in_steps: InSteps | None = None) -> CampaignRun:
    """Runs the workflow of `campaign` (read from `campaign_file`) with Snakemake's `snakemake_args`, or,
    with `in_steps`, the runs of it that `in_steps` makes, all under the campaign's run lock and into one
    log. Raises CampaignBusy where another run holds the lock."""
    snakefile = resolve(Path("workflow") / "Snakefile")
    if not snakefile.is_file():
        raise FileNotFoundError(f"{snakefile}: no workflow; commlens run runs the workflow of a checkout of the "
                                "repository (an installed commlens carries no workflow/)")
    beside = Path(sys.executable).parent / "snakemake"
    snakemake: Path | str | None = beside
    if not beside.is_file():
        snakemake = shutil.which("snakemake")
        if snakemake is None:
            raise FileNotFoundError("snakemake: not installed here (pip install 'commlens[workflow]', or make "
                                    "campaign in a checkout)")
    # Snakemake's own arguments first: --configfile takes every word after it.
    command = [str(snakemake), "-s", str(snakefile), *snakemake_args, "--configfile", campaign_file]
    workdir = Path(option_value(snakemake_args, "--directory", "-d") or ".")
    results = workdir / "results" / campaign.name
    if DRY_RUN & set(snakemake_args):
        return CampaignRun(campaign, _dry_run(command, campaign, results))
    if AS_IS & set(snakemake_args):
        return CampaignRun(campaign, subprocess.call(command))
    if (workdir / "results").is_symlink():
        print(f"{workdir / 'results'} is a link to {(workdir / 'results').resolve()}: the campaign's results go there",
              flush=True)
    log_path = results / "logs" / "snakemake.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # One run of a campaign at a time: a second one is refused before it touches the first's log.
    with _only_run(log_path, campaign_file, campaign.name):
        print(f"campaign {campaign.name}: {campaign.launches_in_words()}; Snakemake's output: {log_path}", flush=True)
        with open(log_path, "w") as log:
            console = Console(campaign, results)
            if in_steps is None:
                code, interrupted = _supervise(command, log, console)
            else:
                code, interrupted = in_steps(lambda targets: _supervise(
                    # A target first: --config, among Snakemake's arguments, would take every word after it.
                    [command[0], *targets, *command[1:]], log, console), workdir)
    dataset = results / f"{campaign.name}.nc"
    ended_well = code == 0 and not interrupted
    return CampaignRun(campaign, code, interrupted, log_path,
                       # Targets that stop short of the dataset leave none.
                       dataset if ended_well and dataset.exists() else None)


def option_value(args: Sequence[str], *names: str) -> str | None:
    """The value Snakemake's arguments `args` give one of `names` (`--name VALUE` or `--name=VALUE`, or a
    --config entry `name=VALUE`), the first found; None where none is given."""
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _dry_run(command: list[str], campaign: Campaign, results: Path) -> int:
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


@contextlib.contextmanager
def _only_run(log_path: Path, campaign_file: str, name: str) -> Iterator[None]:
    """Holds the campaign's run lock (RUN_LOCK, beside its log) for the block; CampaignBusy where another
    `commlens run` holds it."""
    try:
        with locks.held(log_path.with_name(RUN_LOCK), locks.holder_line(f"commlens run {campaign_file}"), wait_s=0):
            yield
    except locks.LockTimeout as busy:
        raise CampaignBusy(f"{campaign_file}: campaign {name} is being run already ({busy.holder}); its output: "
                           f"{log_path}") from None


def _supervise(command: list[str], log: IO[str], console: Console) -> tuple[int, bool]:
    """Runs Snakemake with its output into `log` and through `console`; (exit status, interrupted)."""
    process = subprocess.Popen(guarded_workflow(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, bufsize=1, start_new_session=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    interrupted: list[int] = []

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
    def read_output() -> None:
        assert process.stdout is not None       # stdout=PIPE
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read_output, daemon=True)
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
