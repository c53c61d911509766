"""Engines: one ipyparallel engine per MPI rank of a placement, started by the library's own mpiexec
(or inside a Slurm job), in the library's venv, whose mpi4py loads that library's libmpi (see
commlens.launch.libraries.engine_python); stopped, and their processes reaped, when done.
"""

from __future__ import annotations

import atexit
import json
import logging
import shlex
import shutil
import socket
import tempfile
import weakref
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

from commlens.campaign import shape_from_placement_name
from commlens.launch import locks
from commlens.launch.libraries import engine_python
from commlens.launch.placement import Placement
from commlens.launch.supervision import end_processes, leftover_files, remove_leftovers
from commlens.launch.plan import SESSION_DIRECTORY_PREFIX, emulated_network_env, plan_launch
from commlens.locations import candidates

ENGINE_KINDS = ("mpi", "slurm")
LEFTOVER_WAIT_S = 10   # how long stop() waits for a launch that holds the machine before leaving the files
# The controller's heartbeat (ipyparallel's default: 3 s). An engine counts as registered once a beat has seen
# it, so the default made every start wait 5 s after the engines had connected; one still counts as dead
# after 10 beats missed (10 s here, MPI kernels run in C with the heartbeat's thread free meanwhile).
HEARTBEAT_MS = 1000
# Stands for the engine program in a launch plan, to cut mpiexec's own arguments out of it.
_PROGRAM = "<engine>"

# Defined on every engine by start_engines. Engines run the library's Python, which has
# mpi4py and ipyparallel but not commlens, so these travel as source, not as references
# to this module. Only the main thread of an engine calls MPI.
ENGINE_SOURCE = r'''
def _commlens_load(shared_library):
    import ctypes
    from mpi4py import MPI
    global _commlens_entry
    entry = ctypes.CDLL(shared_library).commlens_run_fortran_comm
    entry.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    entry.restype = ctypes.c_int
    _commlens_entry = entry
    return {"rank": MPI.COMM_WORLD.Get_rank(), "size": MPI.COMM_WORLD.Get_size(),
            "library_version": MPI.Get_library_version().strip(),
            "thread_level": MPI.Query_thread(), "host": MPI.Get_processor_name(),
            "libmpi": sorted({line.split()[-1] for line in open("/proc/self/maps") if "/libmpi" in line})}


def _commlens_run(argv):
    import ctypes
    import sys
    from mpi4py import MPI
    words = [word.encode() for word in argv]
    array = (ctypes.c_char_p * (len(words) + 1))(*words, None)
    sys.stdout.flush()
    sys.stderr.flush()
    return _commlens_entry(MPI.COMM_WORLD.py2f(), len(words), array)
'''

_running: weakref.WeakSet[Engines] = weakref.WeakSet()


def parse_placement(placement) -> Placement:
    """A Placement from itself, a campaign mapping ({name, nodes, ppn}) or a name like "2N1P" or "2N1P-ib"."""
    if isinstance(placement, Placement):
        return placement
    if isinstance(placement, dict):
        return Placement(placement.get("name") or f"{placement['nodes']}N{placement['ppn']}P",
                         int(placement["nodes"]), int(placement["ppn"]), placement.get("network"))
    shape = shape_from_placement_name(str(placement))
    if shape is None:
        raise ValueError(f"placement {placement!r}: give NODESNPPNP (e.g. 1N2P or 2N1P-ib), a mapping "
                         "{name, nodes, ppn} or a commlens.launch.placement.Placement")
    return Placement(str(placement), *shape)


@dataclass(eq=False)
class Engines:
    """A running ipyparallel cluster of MPI engines, one per rank, for one library and placement.

    `view` is a DirectView on all engines (`%%px` uses it once activated); engine i is rank i.
    Stop it with stop(), a `with` block, or let the interpreter's exit do it.
    """

    # ipyparallel's Cluster, Client and DirectView (ipyparallel ships no types: Any)
    cluster: Any
    client: Any
    view: Any
    library: str
    mpi: str
    family: str
    placement: Placement
    engines: str
    library_record: dict
    build_record: dict
    library_env: dict[str, str]
    workspace: Path
    results_dir: Path
    launch_env: dict[str, str] = field(default_factory=dict)
    mpi_command: list[str] = field(default_factory=list)
    info: list[dict] = field(default_factory=list)
    processes: list[tuple[str, int]] = field(default_factory=list)   # (host, pid) of every engine
    log_file: Path | None = None       # the engines' and controller's output
    stopped: bool = False
    # What the launcher leaves when its processes are killed, and what of it was there before the engines.
    leftovers: tuple[str, ...] = ()
    leftovers_before: set[str] = field(default_factory=set)
    session_directory: str | None = None    # the engines' TMPDIR on this host (SESSION_DIRECTORY_PREFIX)

    def __enter__(self) -> Engines:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else f"{len(self.processes)} engines"
        return (f"<Engines {self.library} {self.placement.name} via {self.engines}: {state}>")

    def stop(self, machine_is_ours: bool = False) -> None:
        """Stops the engines and the controller; safe to call twice, and after an interruption.
        machine_is_ours: called by a launch on the engines, which has the machine to itself (it holds
        the machine's lock, or its engines run in a Slurm allocation, whose nodes are theirs)."""
        if self.stopped:
            return
        self.stopped = True
        _running.discard(self)
        try:
            self.client.close()
        except Exception:
            pass
        try:
            self.cluster.stop_cluster_sync()
        except Exception as error:  # a half-dead cluster must still lose its processes below
            logging.getLogger(__name__).warning("stopping the cluster: %s", error)
        # Engines that outlived their launcher (mpiexec gone, ranks not) are killed after a grace period.
        end_processes(self.pids, first=None)
        self._remove_leftovers(machine_is_ours)
        if self.session_directory:
            shutil.rmtree(self.session_directory, ignore_errors=True)
        log = getattr(self.cluster, "log", None)
        if isinstance(log, logging.Logger) and log.name.startswith(f"{__name__}."):
            for handler in log.handlers:
                handler.close()

    def _remove_leftovers(self, machine_is_ours: bool) -> None:
        """What the killed launcher left (Hydra's topology files in /tmp), removed while this process holds
        the machine: a campaign's launch running meanwhile has files of its own that appeared since the
        engines started, and removes them itself. Left, and said, while the machine stays busy."""
        if not self.leftovers:
            return
        if machine_is_ours:
            remove_leftovers(self.leftovers, self.leftovers_before)
            return
        what = f"stopping interactive engines {self.library}/{self.placement.name}"
        try:
            with locks.machine(what, wait_s=LEFTOVER_WAIT_S):
                remove_leftovers(self.leftovers, self.leftovers_before)
        except locks.LockError as busy:
            logging.getLogger(__name__).warning("%s: what the launcher left (%s) is left: %s", what,
                                                ", ".join(self.leftovers), busy)

    @property
    def pids(self) -> list[int]:
        """Process ids of the engines on this host."""
        return [pid for host, pid in self.processes if host == socket.gethostname()]


def _stop_all() -> None:
    for engines in list(_running):
        engines.stop()


atexit.register(_stop_all)


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no {what}; build it first, e.g. `snakemake builds "
                                "--configfile config/campaigns/quick.yaml` in the workspace") from None


def find_workspace(workspace, library: str) -> Path:
    """The folder whose build/ holds `library`'s environment. A relative `workspace` is looked for as
    datasets are (commlens.locations): from the working directory, then from the checkout that holds
    it and the checkout commlens runs from, so that "." means the checkout in a notebook JupyterLab
    started in notebooks/. FileNotFoundError naming every place tried where none has it."""
    record = Path(workspace) / "build" / "envs" / library / "library.json"
    places = candidates(record)
    found = next((place for place in places if place.is_file()), None)
    if found is None:
        raise FileNotFoundError(f"{record}: no environment of {library} (tried {', '.join(map(str, places))}); "
                                "build it first, e.g. `snakemake builds --configfile config/campaigns/quick.yaml` "
                                "in the workspace")
    return found.parents[3].resolve()


def _cluster_log(profile_dir: str, level) -> tuple[logging.Logger, Path]:
    """The cluster's logger, into a file of its own: ipyparallel logs to a notebook's output by default,
    and stopping MPI engines (mpiexec ends with status 1 when its ranks are killed) dumps their whole
    output there."""
    path = Path(profile_dir) / "engines.log"
    log = logging.getLogger(f"commlens.interactive.engines.{Path(profile_dir).name}")
    log.handlers = [logging.FileHandler(path)]
    log.handlers[0].setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.setLevel(level)
    log.propagate = False
    return log, path


def _engine_config(kind: str, python: str, activate: Path, mpi_args: list[str], env: dict[str, str],
                   placement: Placement, slurm_options: list[str], profile_dir: str):
    from traitlets.config import Config

    config = Config()
    # The library's mpiexec, found the way every build and launch finds it: its activate.sh.
    mpiexec = ["bash", "-c", f'. {shlex.quote(str(activate))} && exec mpiexec "$@"', "mpiexec"]
    engine_cmd = [python, "-m", "ipyparallel.engine"]
    if kind == "mpi":
        launcher = config.MPIEngineSetLauncher
        launcher.mpi_cmd = mpiexec
        launcher.mpi_args = mpi_args
    else:
        launcher = config.SlurmEngineSetLauncher
        # Inside the allocation the library's own mpiexec starts the ranks (Hydra and PRRTE
        # both read Slurm's allocation), as `mpi` does locally: no PMI plugin is assumed.
        lines = ["#!/bin/sh", "#SBATCH --export=ALL", "#SBATCH --job-name=ipengine-{cluster_id}",
                 f"#SBATCH --nodes={placement.nodes}", f"#SBATCH --ntasks-per-node={placement.ppn}",
                 "#SBATCH --ntasks={n}", f"#SBATCH --output={profile_dir}/slurm-%j.out",
                 *[f"#SBATCH {option}" for option in slurm_options],
                 shlex.join(mpiexec)
                 + f" -n {{n}} {shlex.join(mpi_args)} {{program_and_args}} --mpi"]
        launcher.batch_template = "\n".join(lines) + "\n"
        # An absolute name: the script lands beside the cluster's files, not in the current directory.
        launcher.batch_file_name = str(Path(profile_dir) / "engines.sbatch")
    launcher.engine_cmd = engine_cmd
    # No nanny process beside each engine: it only forwards signals, and an MPI kernel is never interrupted
    # part-way (run() stops the engines instead). With it, stopping MPICH's engines took 3.4 s: mpiexec
    # waited for the nannies, which held the ranks' output open until they gave up on the stopped hub.
    launcher.engine_args = ["--IPEngine.enable_nanny=False"]
    launcher.environment = env
    return config


def start_engines(library: str, placement="1N2P", workspace=".", engines: str = "mpi", *,
                  env: dict | None = None, build_dir=None, timeout: float = 120,
                  activate: bool = True, slurm_options=(), log_level=logging.WARNING) -> Engines:
    """Starts one engine per rank of `placement` with `library`'s MPI, and returns when all have
    registered and loaded the kernels' shared library.

    Parameters
    ----------
    library
        an MPI installation built in `workspace` (build/envs/<library>, build/kernels/<library>);
        a relative workspace is found as datasets are (find_workspace): "." is the checkout from
        notebooks/ as well. The engines' and controller's logs go to engines.log in the cluster's
        folder under <workspace>/results/interactive/ (Engines.log_file), not to the notebook.
    placement
        "1N2P", {"name", "nodes", "ppn"} or a Placement. On one host, nodes > 1 is
        emulated with the same transport settings as a campaign launch (TCP over loopback).
    engines
        "mpi" (the library's mpiexec on this host) or "slurm" (a batch job; the ranks
        start with the library's mpiexec inside it; `slurm_options` adds #SBATCH lines).
    env
        library settings (MCA parameters, CVARs), as a campaign row's `env`.
    activate
        make the engines the target of `%px` / `%%px` in IPython.
    """
    import ipyparallel as ipp

    if engines not in ENGINE_KINDS:
        raise ValueError(f"engines={engines!r}: allowed values: {', '.join(ENGINE_KINDS)}")
    placement = parse_placement(placement)
    if placement.network:
        raise ValueError(f"placement {placement.name}: emulated networks (network:) need a private "
                         "network namespace per launch; run them as a campaign")
    workspace = Path(workspace).resolve() if build_dir else find_workspace(workspace, library)
    build = Path(build_dir).resolve() if build_dir else workspace / "build"
    record = _read_json(build / "envs" / library / "library.json", "environment of " + library)
    build_record = _read_json(build / "kernels" / library / "build.json", "kernel build of " + library)
    shared_library = build_record.get("shared_library", str(build / "kernels" / library / "libcommlens-kernels.so"))
    if not Path(shared_library).exists():
        raise FileNotFoundError(f"{shared_library}: no kernels library; rebuild the kernels (snakemake builds)")
    python = str(engine_python(record))
    family = record["family"]
    library_env = {str(k): str(v) for k, v in (env or {}).items()}

    # The same mpiexec options and environment a campaign launch of this placement gets.
    plan = plan_launch(record, placement, _PROGRAM, [], "", library_env,
                       cores=placement.ppn if engines == "slurm" else None)
    launcher = plan.command[:plan.command.index(_PROGRAM)]
    mpi_args = launcher[3:]            # after "mpiexec -n N", which ipyparallel writes itself
    launch_env = dict(plan.env)
    if engines == "slurm":             # real nodes: no transport forcing
        for key in emulated_network_env(record):
            if key not in library_env:
                launch_env.pop(key, None)
    engine_env = {
        **launch_env,
        # The binary initialises MPI single-threaded; engines only call MPI from the main thread.
        "MPI4PY_RC_THREAD_LEVEL": "funneled",
        # The analysis venv's packages must not shadow the library venv's mpi4py.
        "PYTHONPATH": "", "PYTHONNOUSERSITE": "1",
    }
    # On this host, the MPI runtime's session files in a directory of the engines' own (removed at stop);
    # the hosts of a Slurm job have their own /tmp.
    session_directory = None if engines == "slurm" else tempfile.mkdtemp(prefix=SESSION_DIRECTORY_PREFIX)
    if session_directory:
        engine_env["TMPDIR"] = session_directory
    results_dir = workspace / "results" / "interactive"
    results_dir.mkdir(parents=True, exist_ok=True)
    profile_dir = tempfile.mkdtemp(prefix=f"ipyparallel-{library}-", dir=results_dir)
    config = _engine_config(engines, python, Path(record["env_dir"]) / "activate.sh", mpi_args,
                            engine_env, placement, list(slurm_options), profile_dir)
    log, log_file = _cluster_log(profile_dir, log_level)
    cluster_kwargs = dict(engines=engines, n=placement.nprocs, profile_dir=profile_dir,
                          config=config, log_level=log_level, log=log, shutdown_atexit=True,
                          controller_args=[f"--HeartMonitor.period={HEARTBEAT_MS}"])
    if engines == "slurm":
        # Engines may start on other hosts: listen everywhere, and tell them this host's name.
        cluster_kwargs.update(controller_ip="*", controller_location=socket.gethostname())
    cluster = ipp.Cluster(**cluster_kwargs)
    leftovers_before = leftover_files(plan.leftovers)
    client = None
    try:
        cluster.start_cluster_sync()
        client = cluster.connect_client_sync()
        client.wait_for_engines(placement.nprocs, timeout=timeout)
        view = client[:]
        view.block = True
        view.execute(ENGINE_SOURCE)
        view.execute(f"_commlens_info = _commlens_load({str(shared_library)!r})")
        info = view.pull("_commlens_info")
        view.execute("import os as _os, socket as _socket\n"
                     "_commlens_process = (_socket.gethostname(), _os.getpid())")
        processes = view.pull("_commlens_process")
        by_rank = sorted(info, key=lambda i: i["rank"])
        env_dir = Path(record["env_dir"]).resolve()
        # The environment's own MPI is in its venv, wherever a link to the venv leads.
        own = (env_dir, (env_dir / "venv").resolve())
        foreign = [path for i in by_rank for path in i["libmpi"]
                   if not any(Path(path).resolve().is_relative_to(root) for root in own)]
        if engines == "mpi" and record.get("kind") == "pip" and foreign:
            raise RuntimeError(f"{library}: the engines' mpi4py loaded {foreign[0]}, not the MPI of {env_dir}; "
                               "recreate the environment (snakemake builds --forcerun mpi_environment)")
        if [i["rank"] for i in by_rank] != list(range(placement.nprocs)) or by_rank[0]["size"] != placement.nprocs:
            raise RuntimeError(f"engines are not one MPI job of {placement.nprocs} ranks: {info}")
    except BaseException as error:
        # Interrupted, failed or wrong while starting: nothing may be left running, nor its files.
        if client is not None:
            client.close()
        cluster.stop_cluster_sync()
        if session_directory:
            shutil.rmtree(session_directory, ignore_errors=True)
        error.add_note(f"the engines' output: {log_file}")
        raise
    result = Engines(cluster=cluster, client=client, view=view, library=library, mpi=library, family=family,
                     placement=placement, engines=engines, library_record=record, build_record=build_record,
                     library_env=library_env, workspace=workspace, results_dir=results_dir,
                     launch_env=launch_env, mpi_command=launcher, info=by_rank,
                     processes=[tuple(p) for p in processes], log_file=log_file,
                     leftovers=plan.leftovers, leftovers_before=leftovers_before,
                     session_directory=session_directory)
    _running.add(result)
    if activate:
        try:
            view.activate()
        except Exception:  # outside IPython there are no magics to register
            pass
    return result
