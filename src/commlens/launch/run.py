"""One launch: mpiexec of commlens-kernels for a (library, placement, kernel), with a time limit.

The launch is planned (commlens.launch.plan: the command, its environment, the
emulation of several nodes on one host), then run under a supervisor
(commlens.launch.supervision) that leaves none of its processes behind.

A launch that ends, however it ends, leaves one complete raw file, written
atomically: a "launch" record (what ran, how, and whether it succeeded)
followed, on success, by a "topology" record (the hosts' hwloc topology:
commlens.launch.topology) and the kernel's own run / mpi_t / point / end records. A failed,
timed-out or incomplete launch keeps only its launch record: partial output is
never merged. A launch that cannot run at all (its library's environment or
build failed, or the kernel or placement is unsupported there) is recorded the
same way, with that status and why. A launch interrupted from outside (its
workflow stopped or killed) ends every process of it, says so in its log and
leaves no raw file, so that the next run of the workflow redoes it; so does one
that a full disk cut short (WriteError, naming the file).

A launch holds its own lock while it runs, so that it never runs twice at once
(a rerun after `kill -9` waits for the killed run's launch to end), and, outside
a Slurm allocation, the machine's, so that launches of different campaigns never
overlap (commlens.launch.locks).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import replace
from datetime import datetime, UTC
from pathlib import Path

from commlens.io.atomic import NEARLY_FULL_BYTES, WriteError, free_bytes
from commlens.io.raw import NOT_RUN, read_complete_output, read_launch_record
from commlens.io.raw_writing import failure_reason, launch_record, reserve_record_space, write_raw_file
from commlens.launch import locks, netem, wire
from commlens.launch import vnodes
from commlens.launch.libraries import in_environment
from commlens.launch.placement import Placement, allocated_hosts, slurm_allocation
from commlens.launch.plan import SESSION_DIRECTORY_PREFIX, Unsupported, emulation_of, plan_launch
from commlens.launch.supervision import (KILL_GRACE_S, STDERR_TAIL_CHARS, ConsoleStream, end_launch, interruption,
                                          supervised_command)
from commlens.launch.topology import topology_record

# How much longer than its own timeout a launch waits for a previous run of it to end: that run is
# being stopped (its workflow killed), or, under Slurm, runs out its own time limit.
PREVIOUS_RUN_SLACK_S = 60
# What a launch that ran can end as and be measured again for (the campaign's `retries`): a library that
# could not be built or a kernel it cannot run ends the same way every time, and is retried with its build.
RETRIED_STATUSES = ("failed", "timeout")


def next_attempt(output, retries: int) -> dict:
    """The attempt of the launch whose raw file is `output` that a run of the workflow makes, or made:
    {"attempt": n, "retried_after": [the earlier attempts' status, reason and start]}. A launch that
    failed or timed out is measured again while it has made at most `retries` more attempts than the
    first; otherwise this is the attempt its raw file records (the first, where it has none)."""
    record = read_launch_record(output) or {}
    attempt, after = int(record.get("attempt", 1)), list(record.get("retried_after", []))
    if record.get("status") in RETRIED_STATUSES and attempt <= retries:
        earlier = {key: record.get(key, "") for key in ("status", "reason", "started")}
        return {"attempt": attempt + 1, "retried_after": [*after, earlier]}
    return {"attempt": attempt, "retried_after": after}


def run_launch(*, installation: dict, build: dict, kernel: str, kernel_args: list[str], placement: Placement,
               library: str, launch: int, output, timeout_s: float,
               library_env: dict[str, str] | None = None, log=None, scratch=None,
               settings: dict | None = None, turn: dict[str, int] | None = None,
               attempt: dict | None = None) -> dict:
    """Runs one launch and writes `output`; returns its launch record. Never raises for a failed run;
    raises, leaving no raw file (so that it is redone), where it cannot be recorded (WriteError: a full
    disk) or a previous run of it still holds its lock after the longest it could take (LockTimeout).

    `installation` and `build` are the library's library.json and build.json records. A launch
    they rule out (a failed environment or build, a kernel the build left out) is recorded with
    that status and reason, without starting anything. The launch gets a private directory under
    `scratch` for any files it makes (io kernels); it is removed when the launch ends, however it
    ends. `settings` (the campaign's view of the launch) is kept in the launch record, so that a
    later campaign can tell whether rerunning it would replace these results with differently
    configured ones. `turn` (a campaign's launches: {"round": r, "round_position": p}, from
    Campaign.turn) is the launch's place in the campaign's rounds, kept in its launch record, as is
    `attempt` (next_attempt: a failed launch measured again, and why)."""
    meta = {"library": library, "mpi": installation.get("name"), "family": installation.get("family"),
            "library_version": installation.get("version"), "launcher": installation.get("launcher"),
            "placement": placement.name, "nodes": placement.nodes, "ppn": placement.ppn,
            "nprocs": placement.nprocs, "kernel": kernel, "launch": launch}
    meta.update(turn or {})
    meta.update(attempt or {"attempt": 1})
    if settings is not None:
        meta["settings"] = settings
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    name = f"launch {library}/{placement.name}/{kernel}/{launch}"
    holder = locks.holder_line(f"{name} into {output.resolve()}")   # the raw file says which campaign and checkout
    with locks.held(locks.launch_lock_path(output), holder, remove=True,
                    wait_s=timeout_s + KILL_GRACE_S + PREVIOUS_RUN_SLACK_S,
                    on_wait=lambda other: _say(log, f"{name}: its previous run, {other}, has not ended yet; "
                                                     "waiting for it to end")):
        not_run = _not_runnable(installation, build, kernel_args[0])
        if not_run:
            return record_not_run(output, meta, *not_run)
        # The launch's own folders in shared places (scratch, the temporary folder): unpredictable names
        # made by mkdtemp, never a name another user could have taken first. The launch's supervisor
        # removes them however the launch ends; their names are kept beside the raw file, so that the next
        # run of this launch removes them, should the supervisor too have been killed outright.
        _remove_previous_folders(output)
        try:
            if scratch:
                os.makedirs(scratch, exist_ok=True)     # a campaign's scratch: made where it is missing
            private = tempfile.mkdtemp(prefix=f"commlens-{library}-{placement.name}-{kernel}-{launch}-",
                                       dir=scratch or None)
        except OSError as error:
            return record_not_run(output, meta, "failed", f"its scratch folder could not be made in "
                                                          f"{scratch or tempfile.gettempdir()}: {error.strerror}")
        temporary = Path(tempfile.mkdtemp(prefix=SESSION_DIRECTORY_PREFIX))
        _folders_file(output).write_text(f"{private}\n{temporary}\n")
        try:
            with contextlib.ExitStack() as held:   # the machine, and the launch's virtual nodes if it has them
                if not os.environ.get("SLURM_JOB_ID"):   # in an allocation, the nodes are the launch's own
                    machine = locks.machine(name, lambda line: _say(log, line), holder=holder)
                    meta["waited_for_machine_s"] = round(held.enter_context(machine), 3)
                return _run_launch(installation, build["binary"], kernel_args, private, placement,
                                   meta, output, timeout_s, library_env, log, held, temporary)
        finally:
            shutil.rmtree(private, ignore_errors=True)
            shutil.rmtree(temporary, ignore_errors=True)
            _folders_file(output).unlink(missing_ok=True)


def _folders_file(output: Path) -> Path:
    """Where a launch's folders in shared places are named while it runs."""
    return output.with_name(output.name + ".folders")


def _remove_previous_folders(output: Path) -> None:
    """The folders a previous run of this launch made and, killed outright, left: each removed only where
    it is still a folder of this user's (not a link, nothing another user made since under its name)."""
    try:
        named = _folders_file(output).read_text().splitlines()
    except OSError:
        return
    for folder in filter(None, named):
        with contextlib.suppress(OSError):
            info = os.lstat(folder)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
                shutil.rmtree(folder, ignore_errors=True)
    _folders_file(output).unlink(missing_ok=True)


def _say(log, message: str) -> None:
    """A line for the console (the workflow's, which may be gone) and the launch's log."""
    with contextlib.suppress(OSError):
        print(message, flush=True)
    if log is not None:
        with contextlib.suppress(OSError):
            log.write(message + "\n")
            log.flush()


def _not_runnable(installation: dict, build: dict, kernel: str) -> tuple[str, str] | None:
    """(status, reason) when this library cannot run the kernel at all, else None."""
    if installation.get("status", "ok") != "ok":
        return installation["status"], installation.get("reason", "")
    if build.get("status", "ok") != "ok":
        return build["status"], build.get("reason", "")
    if kernel in build.get("unsupported", {}):
        return "unsupported", build["unsupported"][kernel]
    return None


def record_not_run(output: Path, meta: dict, status: str, reason: str) -> dict:
    """The raw file of a launch that was never started: its launch record alone, saying why (failed:
    its virtual nodes could not be made)."""
    assert status in (*NOT_RUN, "failed"), status
    output.parent.mkdir(parents=True, exist_ok=True)
    record = launch_record(status, meta, reason=reason)
    write_raw_file(output, record, output.with_name(output.name + ".partial"), with_output=False)
    return record


def _run_launch(installation, binary, kernel_args, scratch: str, placement, meta, output, timeout_s, library_env,
                log, cleanup: contextlib.ExitStack, temporary: Path) -> dict:
    kernel_args = [*kernel_args, "--scratch", scratch]
    partial = output.with_name(output.name + ".partial")
    partial.unlink(missing_ok=True)   # a previous run's, killed before it could remove it
    allocation = slurm_allocation(os.environ)
    placement = replace(placement, hosts=allocated_hosts({**os.environ, **allocation}))
    meta = {**meta, "transport": placement.transport, "emulated": placement.emulated, "network": placement.network,
            "switch": placement.switch, **({"faults": placement.faults} if placement.faults else {}),
            **({"topology": placement.topology} if placement.topology else {})}
    cluster = None
    try:
        meta["emulation"] = emulation_of(placement)
        if placement.emulated and (placement.network or placement.switch):
            # netem, wire or tbf: what the links were (commlens.launch.netem)
            meta["link_shaper"] = netem.shaper(meta["emulation"], placement.faults)
            if placement.network and meta["link_shaper"] == "wire":
                meta["link_burst_s"] = wire.BURST_S     # the most of the link's time one frame carries
            if placement.switch or placement.topology:     # the switch's and the uplinks' shaper
                meta["switch_shaper"] = netem.switch_shaper()
            if placement.network and meta["link_shaper"] in netem.QUEUEING_SHAPERS:
                netem.link_arguments(placement.network, meta["link_shaper"])   # refuses what this host cannot make
        if meta["emulation"] == "namespaces":
            cluster = cleanup.enter_context(vnodes.virtual_cluster(placement.nodes, placement.network, placement.switch,
                                                                   faults=placement.faults,
                                                                   topology=placement.topology))
            if cluster.link_priority:   # how the links' processes ran, as the host allowed
                meta["link_priority"] = wire.launch_priority(cluster.link_priority)
        plan = plan_launch(installation, placement, str(Path(binary).resolve()), kernel_args,
                           str(partial.resolve()), library_env, cluster=cluster)
    except Unsupported as refusal:
        return record_not_run(output, meta, "unsupported", str(refusal))
    except vnodes.VirtualNodesError as error:
        return record_not_run(output, meta, "failed", f"its virtual nodes could not be made: {error}")
    except netem.LinkError as error:
        return record_not_run(output, meta, "failed", f"its emulated links could not be made: {error}")
    env = {**os.environ, **allocation, **plan.env}
    # The launch's own directories, removed by its supervisor however the launch ends.
    private: tuple[str, ...] = (scratch,)
    if placement.hosts == 1:
        # The launcher's and the ranks' session files in a directory of the launch's own, not /tmp
        # (SESSION_DIRECTORY_PREFIX says why). Virtual nodes have one each (their node-exec sets it);
        # hosts of an allocation have their own /tmp.
        # Not in the launch record: a path that differs every launch and changes nothing measured.
        env["TMPDIR"] = str(temporary)
        private += (env["TMPDIR"],)   # removed by the supervisor however the launch ends, this process killed or not
    argv = in_environment(installation["env_dir"], shlex.join(plan.command))
    if (placement.network or placement.switch) and not placement.emulated:
        # The emulated link is a network namespace on one host; real hosts have their own links.
        argv = ["sh", "-c", f"echo 'placement {placement.name}: an emulated network (network:, switch:) runs on "
                f"one host only; this allocation has {placement.hosts} hosts' >&2; exit 2"]
    elif cluster is not None:
        # mpiexec starts on the first node, as on a cluster's first host; the links carry `network`.
        argv = cluster.command_on(cluster.hostnames[0], argv)
    elif placement.network:
        argv = netem.wrap(shlex.join(argv), placement.network)
    reserve = reserve_record_space(output)   # so that a kernel filling the disk still leaves room for its record
    started = datetime.now(UTC)
    t0 = time.monotonic()
    try:
        # The supervisor holds the launch's locks too (held_descriptors): killed outright, this process
        # drops its own at once, and the next launch waits until the supervisor has ended this one.
        process = subprocess.Popen(supervised_command(argv, KILL_GRACE_S, plan.leftovers, private), env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace", start_new_session=True, pass_fds=locks.held_descriptors())
        streamed = ConsoleStream(process.stdout, log)
        try:
            process.wait(timeout=timeout_s)
            status = "ok" if process.returncode == 0 else "failed"
        except subprocess.TimeoutExpired:
            end_launch(process, KILL_GRACE_S)
            status = "timeout"
        except BaseException as stopped:
            # Interrupted (Ctrl-C, the workflow stopping or losing us): the launch must not outlive us,
            # and what it wrote is not a result.
            end_launch(process, KILL_GRACE_S)
            _say(log, f"launch {meta['library']}/{placement.name}/{meta['kernel']}/{meta['launch']} interrupted "
                      f"after {time.monotonic() - t0:.1f} s ({interruption(stopped)}): every process of it was "
                      f"ended; it has no raw file, so the next run of the workflow redoes it")
            raise
    except BaseException:
        partial.unlink(missing_ok=True)
        reserve.unlink(missing_ok=True)
        raise
    duration = time.monotonic() - t0
    console = streamed.tail()
    _, problem = read_complete_output(partial)
    if status == "ok" and problem:
        status = "failed"
    if status != "ok" and (free := free_bytes(output.parent)) is not None and free < NEARLY_FULL_BYTES:
        # Not the launch's failure but the disk's: no raw file, so that the next run redoes it.
        partial.unlink(missing_ok=True)
        reserve.unlink(missing_ok=True)
        raise WriteError(f"no space left on device ({free} bytes free) writing {partial} (the kernel's output; "
                         f"the launch {status}: {failure_reason(status, process.returncode, problem, timeout_s)})",
                         partial, errno.ENOSPC)
    record = launch_record(status, meta, started, command=plan.command, env=plan.env, binding=plan.binding,
                           exit_code=process.returncode, duration_s=round(duration, 3), timeout_s=timeout_s)
    if status != "ok":
        record["reason"] = failure_reason(status, process.returncode, problem, timeout_s)
        if placement.network and cluster is None and (reason := netem.unavailable_reason()):
            record["reason"] += f"; {reason}"
        record["console_tail"] = console[-STDERR_TAIL_CHARS:]
    # The machine the launch ran on, once the kernel is done: it costs the measurement nothing.
    launcher_records = [topology_record(cluster.hostnames if cluster is not None else None,
                                        allocation_hosts=placement.hosts, env=env)] if status == "ok" else []
    write_raw_file(output, record, partial, with_output=status == "ok", launcher_records=launcher_records)
    return record
