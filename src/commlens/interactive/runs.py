"""Running a kernel on the engines: a one-kernel campaign validated like a file, each launch through
libcommlens-kernels.so (the same harness as the commlens-kernels binary, called with mpi4py's
communicator, writing the same JSON Lines records) into a raw launch file, which commlens.io.raw
reads and commlens.data.collect turns into a dataset, exactly as a campaign's.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from datetime import datetime, UTC
from pathlib import Path

import numpy as np
import xarray as xr

from commlens.campaign import Campaign, validate_campaign
from commlens.data.collect import build_dataset
from commlens.interactive.engines import Engines
from commlens.io.raw import Point, read_complete_output, read_raw
from commlens.io.raw_writing import failure_reason, launch_record, write_raw_file
from commlens.launch import locks
from commlens.launch.topology import topology_record

# Keys of run()'s options that belong to the campaign's `precision`, not to the kernel entry.
PRECISION_KEYS = ("rse", "min_samples", "max_samples", "max_point_time")


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
    return Campaign(name=name, source=f"commlens.interactive.engines ({engines.engines} engines)", config=config)


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
                    self.on_point(Point(size=record["size"], samples=np.asarray(record["samples"], dtype=np.float64),
                                        iters_per_sample=record["iters_per_sample"],
                                        settled=bool(record["settled"]), rse=record.get("rse", np.nan),
                                        errors=record.get("errors"),
                                        subtracted_s=record.get("subtracted_s", np.nan),
                                        short_samples_dropped=record.get("short_samples_dropped", 0)))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _launch_once(engines: Engines, campaign: Campaign, kernel: str, launch: int, on_point, progress: bool,
                 poll_s: float) -> Path:
    """One launch on the engines; writes and returns its raw file (launch record + the kernel's). It holds
    the machine as a campaign's launch does (commlens.launch.locks), so that a notebook and a campaign on
    one host never measure at once; engines in a Slurm allocation have its nodes to themselves."""
    if engines.engines == "slurm":
        return _measure_once(engines, campaign, kernel, launch, on_point, progress, poll_s, waited_s=0.0)
    what = f"interactive launch {engines.library}/{engines.placement.name}/{kernel}/{launch}"
    with locks.machine(what, logging.getLogger(__name__).warning) as waited_s:
        return _measure_once(engines, campaign, kernel, launch, on_point, progress, poll_s, waited_s)


def _measure_once(engines: Engines, campaign: Campaign, kernel: str, launch: int, on_point, progress: bool,
                  poll_s: float, waited_s: float) -> Path:
    p = engines.placement
    argv = ["commlens-kernels", *campaign.kernel_args(kernel, launch)]
    timeout_s = campaign.config["timeout"]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    output = engines.results_dir / "raw" / engines.library / p.name / kernel / f"{stamp}-launch{launch}.jsonl"
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    scratch = Path(tempfile.mkdtemp(prefix=f"commlens-{engines.library}-{p.name}-{kernel}-",
                                    dir=campaign.config["scratch"]))
    argv += ["--scratch", str(scratch), "--nodes", str(p.nodes), "-o", str(partial)]
    started = datetime.now(UTC)
    t0 = time.monotonic()
    watcher = _Progress(partial, f"{kernel} {engines.library} {p.name}", on_point, progress)
    status, exit_code, reason = "ok", None, None
    try:
        pending = engines.view.execute(f"_commlens_status = _commlens_run({argv!r})", block=False)
        while not pending.ready():
            pending.wait(poll_s)
            watcher.poll()
            if time.monotonic() - t0 > timeout_s:
                status, reason = "timeout", f"killed after the {timeout_s:g} s timeout"
                break
        if status == "ok":
            pending.get()
            codes = engines.view.pull("_commlens_status", block=True)
            exit_code = max(codes)
            watcher.poll()
    except KeyboardInterrupt:
        # An MPI kernel cannot be interrupted part-way: the engines are stopped instead.
        engines.stop(machine_is_ours=True)
        raise
    except Exception as error:
        status, reason = "failed", f"{type(error).__name__}: {error}"
    finally:
        watcher.close()
        if status == "timeout":
            engines.stop(machine_is_ours=True)
        shutil.rmtree(scratch, ignore_errors=True)
    _, problem = read_complete_output(partial)
    if status == "ok" and (exit_code or problem):
        status = "failed"
        reason = failure_reason(status, exit_code, problem, timeout_s)
    meta = {"library": engines.library, "mpi": engines.mpi, "family": engines.family,
            "placement": p.name, "nodes": p.nodes, "ppn": p.ppn, "nprocs": p.nprocs,
            "transport": p.transport if engines.engines == "mpi" else "unknown",
            "emulated": p.emulated and engines.engines == "mpi", "network": None, "kernel": kernel, "launch": launch,
            "waited_for_machine_s": round(waited_s, 3)}
    record = launch_record(status, meta, started,
                           command=[*engines.mpi_command, f"ipyparallel engines ({engines.engines})", *argv[1:]],
                           env=engines.launch_env, binding="none" if "none" in engines.mpi_command else "core",
                           exit_code=exit_code, duration_s=round(time.monotonic() - t0, 3), timeout_s=timeout_s,
                           interactive=True)
    if status != "ok":
        record["reason"] = reason
    # The host's topology, as a campaign's launcher takes it once the kernel is done (the engines run on
    # this host: emulated nodes are not made for engines).
    write_raw_file(output, record, partial, with_output=status == "ok",
                   launcher_records=[topology_record()] if status == "ok" else [])
    return output


def run(engines: Engines, kernel: str, sizes=None, *, launches: int = 1, shuffle: bool = False,
        timeout: float = 300, on_point=None, progress: bool = True, poll_s: float = 0.2,
        **options) -> xr.Dataset:
    """Runs `kernel` on the engines and returns its dataset, in the schema of a campaign's.
    Each launch is kept as a raw file under <workspace>/results/interactive/raw/.

    Parameters
    ----------
    sizes
        a campaign `sizes` mapping ({"schedule": "netpipe", "max": "1Mi"}), a schedule
        name, or a list of sizes.
    on_point
        called with each commlens.io.raw.Point as it is measured (live plots).
    **options
        a campaign kernel entry's keys (warmup, window, cache, integrity, ...) and the
        precision keys rse, min_samples, max_samples, max_point_time.
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

