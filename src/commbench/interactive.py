"""Interactive exploration: kernels on ipyparallel MPI engines, results in the campaign schema.

    from commbench.interactive import start_engines, run

    with start_engines(library="mpich-5.0.2", placement="1N2P") as cluster:
        ds = run(cluster, "pingpong.send", sizes={"schedule": "powers", "max": "64Ki"})

The engines are Python processes started by the library's own mpiexec (or inside a
Slurm job), in the library's venv, whose mpi4py loads that library's libmpi (see
commbench.libraries.engine_python). A kernel runs through libcommbench-kernels.so: the
same harness as the commbench-kernels binary, called with mpi4py's communicator, and
writing the same JSON Lines records. Those records become a raw launch file, which
commbench.raw reads and commbench.collect turns into a dataset, exactly as a campaign's.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shlex
import signal
import socket
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import xarray as xr

from .campaign import Campaign, validate_campaign
from .collect import build_dataset
from .samples import POINT_DIMS, ragged_positions, start_variable
from .launcher import (RAW_SCHEMA, Placement, emulated_network_env, plan_launch, read_complete_output,
                       write_raw_file)
from .libraries import engine_python
from .raw import Point, read_raw

ENGINE_KINDS = ("mpi", "slurm")
# Keys of run()'s options that belong to the campaign's `precision`, not to the kernel entry.
PRECISION_KEYS = ("rse", "min_samples", "max_samples", "max_point_time")
# Stands for the engine program in a launch plan, to cut mpiexec's own arguments out of it.
_PROGRAM = "<engine>"

# Defined on every engine by start_engines. Engines run the library's Python, which has
# mpi4py and ipyparallel but not commbench, so these travel as source, not as references
# to this module. Only the main thread of an engine calls MPI.
ENGINE_SOURCE = r'''
def _commbench_load(shared_library):
    import ctypes
    from mpi4py import MPI
    global _commbench_entry
    entry = ctypes.CDLL(shared_library).commbench_run_fortran_comm
    entry.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    entry.restype = ctypes.c_int
    _commbench_entry = entry
    return {"rank": MPI.COMM_WORLD.Get_rank(), "size": MPI.COMM_WORLD.Get_size(),
            "library_version": MPI.Get_library_version().strip(),
            "thread_level": MPI.Query_thread(), "host": MPI.Get_processor_name(),
            "libmpi": sorted({line.split()[-1] for line in open("/proc/self/maps") if "/libmpi" in line})}


def _commbench_run(argv):
    import ctypes
    import sys
    from mpi4py import MPI
    words = [word.encode() for word in argv]
    array = (ctypes.c_char_p * (len(words) + 1))(*words, None)
    sys.stdout.flush()
    sys.stderr.flush()
    return _commbench_entry(MPI.COMM_WORLD.py2f(), len(words), array)
'''

_running: "weakref.WeakSet[Engines]" = weakref.WeakSet()


def parse_placement(placement) -> Placement:
    """A Placement from itself, a campaign mapping ({name, nodes, ppn}) or a name like "2N1P"."""
    if isinstance(placement, Placement):
        return placement
    if isinstance(placement, dict):
        return Placement(placement.get("name") or f"{placement['nodes']}N{placement['ppn']}P",
                         int(placement["nodes"]), int(placement["ppn"]), placement.get("network"))
    match = re.fullmatch(r"(\d+)N(\d+)P", str(placement))
    if not match:
        raise ValueError(f"placement {placement!r}: give NODESNPPNP (e.g. 1N2P), a mapping "
                         "{name, nodes, ppn} or a commbench.launcher.Placement")
    return Placement(str(placement), int(match[1]), int(match[2]))


@dataclass(eq=False)
class Engines:
    """A running ipyparallel cluster of MPI engines, one per rank, for one library and placement.

    `view` is a DirectView on all engines (`%%px` uses it once activated); engine i is rank i.
    Stop it with stop(), a `with` block, or let the interpreter's exit do it.
    """

    cluster: object
    client: object
    view: object
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
    stopped: bool = False

    def __enter__(self) -> "Engines":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else f"{len(self.processes)} engines"
        return (f"<Engines {self.library} {self.placement.name} via {self.engines}: {state}>")

    def stop(self) -> None:
        """Stops the engines and the controller; safe to call twice, and after an interruption."""
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
        _reap([pid for host, pid in self.processes if host == socket.gethostname()])

    @property
    def pids(self) -> list[int]:
        """Process ids of the engines on this host."""
        return [pid for host, pid in self.processes if host == socket.gethostname()]


def _reap(pids: list[int], grace_s: float = 5.0) -> None:
    """Kills engine processes that outlived their launcher (mpiexec gone, ranks not)."""
    deadline = time.monotonic() + grace_s
    alive = [pid for pid in pids if _alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [pid for pid in alive if _alive(pid)]
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


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
    launcher.environment = env
    return config


def start_engines(library: str, placement="1N2P", workspace=".", engines: str = "mpi", *,
                  env: dict | None = None, build_dir=None, timeout: float = 120,
                  activate: bool = True, slurm_options=(), log_level=logging.WARNING) -> Engines:
    """Starts one engine per rank of `placement` with `library`'s MPI, and returns when all have
    registered and loaded the kernels' shared library.

    library: an MPI installation built in `workspace` (build/envs/<library>, build/kernels/<library>).
    placement: "1N2P", {"name", "nodes", "ppn"} or a Placement. On one host, nodes > 1 is
        emulated with the same transport settings as a campaign launch (TCP over loopback).
    engines: "mpi" (the library's mpiexec on this host) or "slurm" (a batch job; the ranks
        start with the library's mpiexec inside it; `slurm_options` adds #SBATCH lines).
    env: library settings (MCA parameters, CVARs), as a campaign row's `env`.
    activate: make the engines the target of `%px` / `%%px` in IPython.
    """
    import ipyparallel as ipp

    if engines not in ENGINE_KINDS:
        raise ValueError(f"engines={engines!r}: allowed values: {', '.join(ENGINE_KINDS)}")
    placement = parse_placement(placement)
    if placement.network:
        raise ValueError(f"placement {placement.name}: emulated networks (network:) need a private "
                         "network namespace per launch; run them as a campaign")
    workspace = Path(workspace).resolve()
    build = Path(build_dir).resolve() if build_dir else workspace / "build"
    record = _read_json(build / "envs" / library / "library.json", "environment of " + library)
    build_record = _read_json(build / "kernels" / library / "build.json", "kernel build of " + library)
    shared_library = build_record.get("shared_library", str(build / "kernels" / library / "libcommbench-kernels.so"))
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
    results_dir = workspace / "results" / "interactive"
    results_dir.mkdir(parents=True, exist_ok=True)
    profile_dir = tempfile.mkdtemp(prefix=f"ipyparallel-{library}-", dir=results_dir)
    config = _engine_config(engines, python, Path(record["env_dir"]) / "activate.sh", mpi_args,
                            engine_env, placement, list(slurm_options), profile_dir)
    cluster_kwargs = dict(engines=engines, n=placement.nprocs, profile_dir=profile_dir,
                          config=config, log_level=log_level, shutdown_atexit=True)
    if engines == "slurm":
        # Engines may start on other hosts: listen everywhere, and tell them this host's name.
        cluster_kwargs.update(controller_ip="*", controller_location=socket.gethostname())
    cluster = ipp.Cluster(**cluster_kwargs)
    client = None
    try:
        cluster.start_cluster_sync()
        client = cluster.connect_client_sync()
        client.wait_for_engines(placement.nprocs, timeout=timeout)
        view = client[:]
        view.block = True
        view.execute(ENGINE_SOURCE)
        view.execute(f"_commbench_info = _commbench_load({str(shared_library)!r})")
        info = view.pull("_commbench_info")
        view.execute("import os as _os, socket as _socket\n"
                     "_commbench_process = (_socket.gethostname(), _os.getpid())")
        processes = view.pull("_commbench_process")
    except BaseException:
        # Interrupted or failed while starting: nothing may be left running.
        if client is not None:
            client.close()
        cluster.stop_cluster_sync()
        raise
    by_rank = sorted(info, key=lambda i: i["rank"])
    env_dir = str(Path(record["env_dir"]).resolve())
    foreign = [path for i in by_rank for path in i["libmpi"] if not path.startswith(env_dir)]
    if engines == "mpi" and record.get("kind") == "pip" and foreign:
        client.close()
        cluster.stop_cluster_sync()
        raise RuntimeError(f"{library}: the engines' mpi4py loaded {foreign[0]}, not the MPI of {env_dir}; "
                           "recreate the environment (snakemake builds --forcerun mpi_environment)")
    if [i["rank"] for i in by_rank] != list(range(placement.nprocs)) or by_rank[0]["size"] != placement.nprocs:
        cluster.stop_cluster_sync()
        raise RuntimeError(f"engines are not one MPI job of {placement.nprocs} ranks: {info}")
    result = Engines(cluster=cluster, client=client, view=view, library=library, mpi=library, family=family,
                     placement=placement, engines=engines, library_record=record, build_record=build_record,
                     library_env=library_env, workspace=workspace, results_dir=results_dir,
                     launch_env=launch_env, mpi_command=launcher, info=by_rank,
                     processes=[tuple(p) for p in processes])
    _running.add(result)
    if activate:
        try:
            view.activate()
        except Exception:  # outside IPython there are no magics to register
            pass
    return result


def _sizes_spec(sizes) -> dict:
    if sizes is None:
        return {"schedule": "powers"}
    if isinstance(sizes, str):
        return {"schedule": sizes}
    if isinstance(sizes, dict):
        return dict(sizes)
    return {"list": [int(s) if not isinstance(s, str) else s for s in sizes]}


def interactive_campaign(engines: Engines, kernel: str, sizes=None, launches: int = 1,
                         shuffle: bool = False, timeout: float = 300, name: str = "interactive",
                         **options) -> Campaign:
    """A one-library, one-placement, one-kernel campaign: validated like a file, so the options,
    their defaults and the kernel's command line are exactly a campaign's."""
    precision = {k: options.pop(k) for k in PRECISION_KEYS if k in options}
    p = engines.placement
    config = {
        "campaign": name,
        "libraries": {engines.library: {"mpi": engines.mpi, **({"env": engines.library_env}
                                                                 if engines.library_env else {})}},
        "placements": [{"name": p.name, "nodes": p.nodes, "ppn": p.ppn}],
        "kernels": {kernel: {"sizes": _sizes_spec(sizes), **options}},
        "launches": launches,
        "shuffle": shuffle,
        "precision": precision,
        "timeout": int(timeout),
    }
    config = validate_campaign(config, source=f"<{name}: {kernel}>")
    return Campaign(name=name, source=f"commbench.interactive ({engines.engines} engines)", config=config)


class _Progress:
    """Points as they land in the output file: a progress bar, and a callback per point."""

    def __init__(self, path: Path, label: str, on_point=None, show: bool = True):
        self.path, self.on_point, self.offset, self.buffer = path, on_point, 0, ""
        self.bar = None
        self.points = 0
        if show:
            try:
                from tqdm.auto import tqdm
                self.bar = tqdm(total=None, desc=label, unit="size")
            except ImportError:
                pass

    def poll(self) -> None:
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                chunk = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            if not line.strip():
                continue
            record = json.loads(line)
            if record.get("record") == "run" and self.bar is not None:
                self.bar.reset(total=len(record["args"]["order"]))
            elif record.get("record") == "point":
                self.points += 1
                if self.bar is not None:
                    self.bar.update(1)
                    self.bar.set_postfix(size=record["size"], median_s=f"{np.median(record['samples']):.3g}")
                if self.on_point is not None:
                    self.on_point(Point(size=record["size"], samples=[float(s) for s in record["samples"]],
                                        iters_per_sample=record["iters_per_sample"],
                                        settled=bool(record["settled"]), rse=record.get("rse", np.nan),
                                        errors=record.get("errors"),
                                        subtracted_s=record.get("subtracted_s", np.nan)))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _launch_once(engines: Engines, campaign: Campaign, kernel: str, launch: int, on_point, progress: bool,
                 poll_s: float) -> Path:
    """One launch on the engines; writes and returns its raw file (launch record + the kernel's)."""
    p = engines.placement
    argv = ["commbench-kernels", *campaign.kernel_args(kernel, launch)]
    timeout_s = campaign.config["timeout"]
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    output = engines.results_dir / "raw" / engines.library / p.name / kernel / f"{stamp}-launch{launch}.jsonl"
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    scratch = Path(tempfile.mkdtemp(prefix=f"commbench-{engines.library}-{p.name}-{kernel}-",
                                    dir=campaign.config["scratch"]))
    argv += ["--scratch", str(scratch), "--nodes", str(p.nodes), "-o", str(partial)]
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    watcher = _Progress(partial, f"{kernel} {engines.library} {p.name}", on_point, progress)
    status, exit_code, reason = "ok", None, None
    try:
        pending = engines.view.execute(f"_commbench_status = _commbench_run({argv!r})", block=False)
        while not pending.ready():
            pending.wait(poll_s)
            watcher.poll()
            if time.monotonic() - t0 > timeout_s:
                status, reason = "timeout", f"killed after the {timeout_s:g} s timeout"
                break
        if status == "ok":
            pending.get()
            codes = engines.view.pull("_commbench_status", block=True)
            exit_code = max(codes)
            watcher.poll()
    except KeyboardInterrupt:
        # An MPI kernel cannot be interrupted part-way: the engines are stopped instead.
        engines.stop()
        raise
    except Exception as error:
        status, reason = "failed", f"{type(error).__name__}: {error}"
    finally:
        watcher.close()
        if status == "timeout":
            engines.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    lines, problem = read_complete_output(partial)
    if status == "ok" and (exit_code or problem):
        status, reason = "failed", f"exit status {exit_code}" if exit_code else problem
    record = {
        "record": "launch", "schema": RAW_SCHEMA, "status": status,
        "library": engines.library, "mpi": engines.mpi, "family": engines.family,
        "placement": p.name, "nodes": p.nodes, "ppn": p.ppn, "nprocs": p.nprocs,
        "transport": p.transport if engines.engines == "mpi" else "unknown",
        "emulated": p.emulated and engines.engines == "mpi", "network": None,
        "kernel": kernel, "launch": launch,
        "command": [*engines.mpi_command, f"ipyparallel engines ({engines.engines})", *argv[1:]],
        "env": engines.launch_env, "binding": "none" if "none" in engines.mpi_command else "core",
        "exit_code": exit_code, "started": started.isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - t0, 3), "timeout_s": timeout_s, "interactive": True,
    }
    if status != "ok":
        record["reason"] = reason
    write_raw_file(output, record, lines if status == "ok" else [], partial)
    return output


def run(engines: Engines, kernel: str, sizes=None, *, launches: int = 1, shuffle: bool = False,
        timeout: float = 300, on_point=None, progress: bool = True, poll_s: float = 0.2,
        **options) -> xr.Dataset:
    """Runs `kernel` on the engines and returns its dataset, in the schema of a campaign's.

    sizes: a campaign `sizes` mapping ({"schedule": "netpipe", "max": "1Mi"}), a schedule
        name, or a list of sizes.
    options: a campaign kernel entry's keys (warmup, window, cache, integrity, ...) and the
        precision keys rse, min_samples, max_samples, max_point_time.
    on_point: called with each commbench.raw.Point as it is measured (live plots).
    Each launch is kept as a raw file under <workspace>/results/interactive/raw/.
    """
    if engines.stopped:
        raise RuntimeError("these engines are stopped; start_engines() again")
    campaign = interactive_campaign(engines, kernel, sizes, launches=launches, shuffle=shuffle,
                                    timeout=timeout, **options)
    results = []
    for launch in range(campaign.launches):
        path = _launch_once(engines, campaign, kernel, launch, on_point, progress, poll_s)
        results.append(read_raw(path))
        if results[-1].status != "ok":
            logging.getLogger(__name__).warning("%s launch %d %s: %s", kernel, launch, results[-1].status,
                                                results[-1].launch.get("reason"))
        if engines.stopped:
            break
    ds = build_dataset(campaign, results, {engines.mpi: engines.library_record},
                       {engines.mpi: engines.build_record})
    ds.attrs["engines"] = engines.engines
    return ds


# What a cell holds where a dataset has no such library, placement, kernel, size or launch.
_FILL = {"status": "missing", "settled": False, "iters_per_sample": 0, "position": -1, "sample_count": 0,
         "started": "", "hosts": "", "cpu_binding": "", "kernel_info": "", "reason": ""}


def append_to_campaign(campaign: xr.Dataset, ds: xr.Dataset, library: str | None = None) -> xr.Dataset:
    """The campaign dataset with `ds`'s library added as one more row of the library axis.

    library: the new row's label (default: "<library> (interactive)"), so that a library the
    campaign already measured stays distinct from its interactive measurement. Other axes are
    the union of both; cells one side lacks are NaN with status "missing", as in a campaign.
    """
    if ds.sizes["library"] != 1:
        raise ValueError("append one library at a time")
    label = library or f"{ds['library'].item()} (interactive)"
    if label in campaign["library"].values:
        raise ValueError(f"library {label!r} is already in the campaign dataset; give another label")
    sources = [campaign, ds.assign_coords(library=[label])]
    # The ragged samples are rebuilt for the combined axes below; the rest is reindexed.
    parts = [part.drop_vars(["time", "sample_start"]) for part in sources]
    # A coordinate one side lacks (an older dataset's, an imported row's `source`) is blank there.
    parts = [part.assign_coords({name: (coord.dims, np.full([part.sizes[d] for d in coord.dims], _blank(coord.dtype)),
                                        coord.attrs)
                                 for other in parts for name, coord in other.coords.items()
                                 if name not in part.coords and coord.dims in (("library",), ("placement",),
                                                                              ("kernel",))})
             for part in parts]
    union = {d: (np.union1d(campaign[d].values, ds[d].values) if d in ("size", "launch")
                 else list(dict.fromkeys([*campaign[d].values.tolist(), *ds[d].values.tolist()])))
             for d in ("placement", "kernel", "size", "launch")}
    # Coordinates along placement and kernel: the campaign's where it knows the entry, else ds's.
    axis_coords = {}
    for dim in ("placement", "kernel"):
        for name, coord in campaign.coords.items():
            if coord.dims == (dim,) and name != dim:
                known = {}
                for part in reversed(parts):
                    known.update(zip(part[dim].values.tolist(), part[name].values.tolist()))
                axis_coords[name] = (dim, [known[label_] for label_ in union[dim]], coord.attrs)
    parts = [_reindex_filled(part.drop_vars(list(axis_coords)), union) for part in parts]
    combined = xr.concat(parts, dim="library", data_vars="minimal", coords="different",
                         compat="equals", combine_attrs="override")
    combined = combined.assign_coords(axis_coords)
    combined["size"].attrs = campaign["size"].attrs
    combined = combined.assign(_merged_samples(combined, sources))
    appended = json.loads(campaign.attrs.get("appended", "[]"))
    combined.attrs["appended"] = json.dumps(appended + [{"library": label, "created": ds.attrs.get("created", "")}])
    return combined


def _merged_samples(combined: xr.Dataset, sources: list[xr.Dataset]) -> dict:
    """`time` and `sample_start` for `combined`, whose points (and sample counts) come from
    `sources`: each point's samples copied from its source, in the combined dataset's order."""
    counts = combined["sample_count"].transpose(*POINT_DIMS).values
    starts = ragged_positions(counts)
    time = np.empty(int(counts.sum()))
    for source in sources:
        position = [{label: i for i, label in enumerate(combined[dim].values.tolist())} for dim in POINT_DIMS]
        source_counts = source["sample_count"].transpose(*POINT_DIMS).values
        source_starts = source["sample_start"].transpose(*POINT_DIMS).values
        values = np.asarray(source["time"].values)
        for index in zip(*np.nonzero(source_counts)):
            at = tuple(position[d][source[dim].values[i].item()] for d, (dim, i) in enumerate(zip(POINT_DIMS, index)))
            n, start = int(source_counts[index]), int(source_starts[index])
            time[starts[at]:starts[at] + n] = values[start:start + n]
    return {"time": ("sample", time, sources[0]["time"].attrs), **start_variable(counts)}


def _blank(dtype: np.dtype):
    """What a coordinate of this dtype holds where it says nothing."""
    return {"b": False, "i": 0, "u": 0, "f": np.nan}.get(np.dtype(dtype).kind, "")


def _reindex_filled(ds: xr.Dataset, union: dict) -> xr.Dataset:
    """Reindexed to the union of both datasets' axes, keeping every variable's dtype."""
    # Times (a launch's `started`, datetimes since datasets follow CF) are NaT where there is no launch.
    out = ds.reindex(union, fill_value={name: np.datetime64("NaT") if var.dtype.kind == "M" else _FILL.get(name, np.nan)
                                        for name, var in ds.data_vars.items()})
    for name, var in ds.data_vars.items():
        out[name] = out[name].astype(var.dtype if var.dtype.kind != "U" else str)
    return out
