"""How tests share the machine when `make test` runs several at once (pytest-xdist, `-n 4`).

Most of the suite waits more than it computes (a workflow polling its jobs, a hung launch's timeout,
Slurm's scheduler, a notebook's kernel starting, another test's launch holding the machine's lock):
run one at a time on two cores it kept one of them busy on average (21 CPU-minutes in 21 minutes);
two at a time used 1.55 of the two cores beside each other, three 1.64 (and ended 150 s sooner),
four 1.60-1.69 in the part of the run where tests share the machine (and ended 140-230 s sooner than three).
Two kinds of test must not have a neighbour, and are marked `alone`:

- tests that time something and check a ratio of two measurements (a protocol switch, a link's
  rate, a clock's drift): a neighbour's load on the other core would be in their numbers;
- tests that watch what the whole host has (Hydra's files in /tmp, every process): a neighbour's
  launch would be in what they see.

Each test takes a reader-writer lock for its whole run (set-up, call, tear-down): shared by default,
exclusive when marked `alone`. An exclusive holder first closes a gate that new shared tests pass
through, so that it waits for the neighbours' current tests only, not for their whole queues.

Tests are sent to the workers in groups (xdist's scope scheduling, with this module's groups):
- the `alone` tests together and first, run in a row by one worker that keeps the lock between them;
  the other workers are given nothing until they have run, so that no test of theirs is half-way
  through when the first `alone` test wants the machine (a Slurm campaign would hold it for 80 s);
- the Slurm tests together and next, the longest group after them: they share one cluster per host
  (tests/slurm_cluster.py holds its lock for a session), stopped once the last of them has run; in
  the `alone` group where any of them is `alone`;
- the tests that share a module's fixture, which their worker then makes once, larger groups first;
- every other test on its own: those that launch MPI or run a workflow first, the quick ones last.
The longest work goes first so that the workers end together.
Launches through commlens itself already take turns on the machine (commlens.launch.locks).

Without xdist (`pytest -p no:xdist`, `-n 0`) none of this applies: every test runs alone.
"""

import fcntl
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

ALONE = "alone"
SHARE_FOLDER = "commlens_machine_share"   # the key under which workers are told the run's folder
GROUPS = "groups.json"                     # in that folder: test id -> group, written by the workers


def run_folder(config) -> Path:
    """The run's lock files and groups: made by the controller, given to each worker."""
    if hasattr(config, "workerinput"):
        return Path(config.workerinput[SHARE_FOLDER])
    if _FOLDER not in config.stash:
        config.stash[_FOLDER] = tempfile.mkdtemp(prefix="commlens-tests-")
    return Path(config.stash[_FOLDER])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist, in the controller, as it starts each worker."""
    node.workerinput[SHARE_FOLDER] = str(run_folder(node.config))


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput") and _FOLDER in config.stash:
        shutil.rmtree(config.stash[_FOLDER], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`-n N` (xdist's `--dist load`, its default): tests in this module's groups."""
    if config.getvalue("dist") != "load":
        return None
    config.option.loadscopereorder = False   # the groups in the workers' order (pytest_collection_modifyitems)
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """xdist's scope scheduling, where a test's scope is its group, or the test itself."""

        groups: dict[str, str] | None = None

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.held = set()   # workers given nothing while another runs the `alone` group

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:   # first asked once every worker has collected, and so written it
                self.groups = json.loads((run_folder(config) / GROUPS).read_text())
            return self.groups.get(nodeid, nodeid)

        def _alone_runner(self):
            """The worker running the `alone` group, until all of its tests have run."""
            for node, units in self.assigned_work.items():
                if not all(units.get(ALONE, {}).values()):
                    return node
            return None

        def _assign_work_unit(self, node) -> None:
            runner = self._alone_runner()
            if runner is not None and runner is not node:
                self.held.add(node)
                return
            super()._assign_work_unit(node)

        def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
            super().mark_test_complete(node, item_index, duration)
            if self.held and self._alone_runner() is None:
                held, self.held = self.held, set()
                for waiting in held:
                    if waiting in self.assigned_work:   # not removed meanwhile
                        # Two units, as xdist starts a worker: it runs a test once it knows the next.
                        self._reschedule(waiting)
                        self._reschedule(waiting)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """In each worker (the controller collects nothing): the groups, for the controller's scheduler."""
    if not hasattr(config, "workerinput"):
        return
    slurm = {item for item in items   # marked `slurm`; or asking for the cluster, marked or not
             if item.get_closest_marker("slurm") or "local_slurm" in getattr(item, "fixturenames", ())}
    slurm_group = ALONE if any(item.get_closest_marker(ALONE) for item in slurm) else "slurm"
    groups = {}
    for item in items:
        if item.get_closest_marker(ALONE):
            groups[item.nodeid] = ALONE
        elif item in slurm:
            groups[item.nodeid] = slurm_group
        elif _uses_a_module_fixture(item):
            groups[item.nodeid] = item.nodeid.split("::")[0]
    # The order in which the controller hands the groups out (xdist's own reordering is off): the `alone`
    # group first, on a machine no earlier test has loaded (run last, after the rest of the suite, the
    # eager-limit ground truth failed in 2 of 4 clean runs; first, and one at a time, it has not); then
    # the longest work first, so that what is left at the end is short and both workers end together
    # (the Slurm group, 104 s, handed out last kept one worker busy 108 s after the other had ended;
    # a module's group handed out last, 100 s): the Slurm group, the modules' groups, larger first, the
    # tests that launch MPI or run a workflow (they ask for the workspace), the rest.
    sizes = Counter(groups.values())

    def order(item):
        group = groups.get(item.nodeid)
        if group in (ALONE, slurm_group):
            return (0 if group == ALONE else 1, 0)
        if group is not None:
            return (2, -sizes[group])
        return (3 if "workspace" in getattr(item, "fixturenames", ()) else 4, 0)

    items.sort(key=order)
    config.stash[_SLURM_TESTS] = {item.nodeid for item in slurm}
    folder = run_folder(config)
    draft = folder / f"{GROUPS}.{os.getpid()}"
    draft.write_text(json.dumps(groups))
    draft.replace(folder / GROUPS)   # whole: the workers' collections, and so their groups, are alike


def _uses_a_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(definition.scope in ("class", "module", "package")
                                    for definitions in info.name2fixturedefs.values() for definition in definitions)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not hasattr(item.config, "workerinput"):   # not an xdist worker: nothing runs beside this test
        return (yield)
    if _SHARE not in item.config.stash:
        item.config.stash[_SHARE] = MachineShare(run_folder(item.config))
    share = item.config.stash[_SHARE]
    alone = item.get_closest_marker(ALONE) is not None
    share.acquire(alone)
    try:
        return (yield)
    finally:
        try:
            slurm = item.config.stash.get(_SLURM_TESTS, set())
            if item.nodeid in slurm and (nextitem is None or nextitem.nodeid not in slurm):
                # The Slurm group's last test: its cluster's daemons would otherwise run until this worker's
                # session ends, beside every test after it (those that time something among them).
                from slurm_cluster import stop_early

                stop_early()
        finally:   # whatever stopping the cluster raised, the neighbour is not kept waiting
            share.release(keep=alone and nextitem is not None and nextitem.get_closest_marker(ALONE) is not None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed `alone` test's report says how fast the host ran just after it, beside how fast it ran
    when the `alone` group began: a timing test fails for a slowed host too (a virtual machine that
    loses its CPU for minutes failed eight of them in a row once), and this tells the two apart."""
    report = yield
    share = item.config.stash.get(_SHARE, None)
    if report.failed and share is not None and share.loop_at_start is not None and item.get_closest_marker(ALONE):
        now = fixed_loop_time()
        report.sections.append(("host speed", f"a fixed loop took {now * 1e3:.1f} ms after this failure, "
                                              f"{share.loop_at_start * 1e3:.1f} ms as the `alone` tests began "
                                              f"({now / share.loop_at_start:.2f} times as long)"))
    return report


def fixed_loop_time() -> float:
    """The fastest of three runs of a fixed loop of Python (6-11 ms here): what one core gives now."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for number in range(200_000):
            total += number
        best = min(best, time.perf_counter() - started)
    return best


class MachineShare:
    """One worker's side of the run's reader-writer lock (flock(2) on two files: the kernel drops
    a dead worker's locks, so a crashed worker never blocks the other)."""

    def __init__(self, folder: Path):
        self.gate = open(folder / "gate", "a")
        self.lock = open(folder / "lock", "a")
        self.exclusive = False
        self.loop_at_start: float | None = None   # the fixed loop's time once this worker first held the machine

    def acquire(self, alone: bool) -> None:
        if alone:
            if not self.exclusive:          # kept from the previous `alone` test otherwise
                fcntl.flock(self.gate, fcntl.LOCK_EX)   # no new shared test starts beside us
                fcntl.flock(self.lock, fcntl.LOCK_EX)   # the neighbours' current tests have ended
                self.exclusive = True
                if self.loop_at_start is None:
                    self.loop_at_start = fixed_loop_time()
        else:
            fcntl.flock(self.gate, fcntl.LOCK_SH)       # waits while an `alone` test waits or runs
            fcntl.flock(self.gate, fcntl.LOCK_UN)
            fcntl.flock(self.lock, fcntl.LOCK_SH)

    def release(self, keep: bool) -> None:
        if keep:
            return
        fcntl.flock(self.lock, fcntl.LOCK_UN)
        if self.exclusive:
            fcntl.flock(self.gate, fcntl.LOCK_UN)
            self.exclusive = False


_FOLDER = pytest.StashKey[str]()
_SLURM_TESTS = pytest.StashKey[set]()
_SHARE = pytest.StashKey[MachineShare]()
