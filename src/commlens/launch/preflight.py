"""Before any job starts: the campaign's kernels exist, their options are ones the harness takes, and
every launch fits this machine.

The kernels and their options are checked against the kernel catalogue (commlens.launch.catalogue):
the names it describes, and the harness's own option parser. A size schedule that asks for more
memory than the host has ends in an allocation failure at best and in the OOM killer taking an
unrelated process at worst; an I/O size larger than the scratch file system fills it for every other
user. Both are cheaper to catch from the campaign file than from a failed launch an hour in. The
estimates are the harness's own (kernels/harness/buffers.c, through the catalogue tool): per rank,
a send and a receive buffer of the kernel's message slots, at least twice the last-level cache in
rotate mode, and what the kernel's set-up allocates. Launches run one at a time and all ranks of a
placement run on this host (nodes > 1 is emulated here), so each launch must fit on its own.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from commlens.campaign import Campaign, CampaignError, kernel_of
from commlens.launch.catalogue import KERNELS_DIR, catalogue, launch_needs
from commlens.launch.libraries import LibrarySpecError, load_spec
from commlens.launch.vnodes import MAX_NODES
from commlens.locations import ROOT
from commlens.units import format_size

# Ranks beyond the CPUs share them, unbound (commlens.launch.plan): 1N4P on two CPUs measures, slowly;
# 512 ranks on two time out with nothing written, busy-polling MPI ranks starving each other.
RANKS_PER_CPU = 4


class ResourceError(CampaignError):
    """A campaign whose launches would need more memory or scratch space than there is."""


@dataclass(frozen=True)
class Need:
    entry: str          # the campaign's kernel entry, e.g. "pingpong.send@nocache"
    placement: str
    resource: str       # "memory" or "disk"
    bytes: int
    how: str            # how the figure was made, for the message


def kernel_problems(campaign: Campaign, kernels_dir: Path = KERNELS_DIR) -> list[str]:
    """One line per campaign kernel entry that names no kernel of the catalogue, with a did-you-mean."""
    known = list(catalogue(kernels_dir))
    problems = []
    for entry in campaign.kernels:
        kernel = kernel_of(entry)
        if kernel not in known:
            close = difflib.get_close_matches(kernel, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"kernels: {kernel!r} is not a kernel{hint}; allowed values: {', '.join(known)}")
    return problems


def check_kernels(campaign: Campaign, kernels_dir: Path = KERNELS_DIR) -> None:
    """Raises CampaignError naming the campaign file and every entry that is not a kernel."""
    problems = kernel_problems(campaign, kernels_dir)
    if problems:
        raise CampaignError(f"{campaign.source}: invalid campaign file\n" + "\n".join(f"  {p}" for p in problems))


def mpi_spec_path(mpi: str, repository: Path = ROOT) -> Path:
    """envs/mpi/<mpi>.yaml of the working directory (a site's own specs beside a campaign), else the
    repository's (`repository`: the workflow's, so that a workflow using this one as a module finds the
    specs that come with it)."""
    local = Path("envs") / "mpi" / f"{mpi}.yaml"
    shipped = repository / local
    return shipped if not local.exists() and shipped.exists() else local


def spec_problems(campaign: Campaign, repository: Path = ROOT) -> list[str]:
    """One line per library row whose `mpi` names no spec file, with the nearest name there is, or a
    spec file that cannot be used (commlens.launch.libraries.load_spec says why)."""
    folders = [Path("envs") / "mpi", repository / "envs" / "mpi"]
    problems = []
    for row, library in campaign.config["libraries"].items():
        path = mpi_spec_path(library["mpi"], repository)
        try:
            load_spec(path)
        except LibrarySpecError as error:
            if path.exists():
                problems.append(f"libraries.{row}.mpi: {error}")
                continue
            known = sorted({spec.stem for folder in folders for spec in folder.glob("*.yaml")})
            close = difflib.get_close_matches(library["mpi"], known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            places = " or ".join(dict.fromkeys(str(folder.absolute()) for folder in folders))
            problems.append(f"libraries.{row}.mpi: no spec envs/mpi/{library['mpi']}.yaml{hint} (looked in "
                            f"{places}; there: {', '.join(known) or 'none'})")
    return problems


def check_specs(campaign: Campaign, repository: Path = ROOT) -> None:
    """Raises CampaignError naming the campaign file and every library row without a usable spec file."""
    problems = spec_problems(campaign, repository)
    if problems:
        raise CampaignError(f"{campaign.source}: invalid campaign file\n" + "\n".join(f"  {p}" for p in problems))


def _slots_words(needs: dict, spec: dict) -> str:
    """Why the kernel keeps that many message buffers, in words."""
    count, source = needs["slots"], needs["slots_from"]
    if source == "window":
        return f"window {spec['window']} on one buffer" if count == 1 else f"window {spec['window']}, a buffer each"
    return {"one": "1 message", "messages": f"{count} messages", "pieces": f"{count} pieces",
            "ranks": f"one block per rank ({count})", "neighbours": f"{count} neighbours"}.get(
        source, f"{count} {source.replace('_', ' ')}")


def needs(campaign: Campaign, cache_bytes: int | None = None, kernels_dir: Path = KERNELS_DIR) -> list[Need]:
    """Memory (all ranks on this host) and scratch disk of one launch of every (entry, placement).
    `cache_bytes` stands for the last-level cache the harness reads from the system (rotate mode).
    Raises CampaignError where the harness refuses an entry's options."""
    described = catalogue(kernels_dir)
    found, refused = [], []
    for entry, spec in campaign.config["kernels"].items():
        if kernel_of(entry) not in described:
            continue   # kernel_problems says so
        for placement in campaign.placements:
            if not campaign.runs_on(entry, placement):
                continue
            shape = campaign.placement(placement)
            nprocs = shape["nodes"] * shape["ppn"]
            args = campaign.kernel_args(entry, 0)
            if cache_bytes and spec["cache"] == "rotate":
                args += ["--cache-size", str(2 * cache_bytes)]
            try:
                need = launch_needs(args, nprocs, kernels_dir)
            except ValueError as error:
                refused.append(f"kernels.{entry} on {placement}: {error}")
                continue
            how = f"{format_size(need['largest'])} largest size x {_slots_words(need, spec)}"
            if need["rotate"]:
                how += f", rotate buffer {format_size(need['buffer_bytes'])}"
            if need["setup_bytes"]:
                how += f", {format_size(need['setup_bytes'])} its set-up allocates"
            found.append(Need(entry, placement, "memory", need["memory_per_rank"] * nprocs,
                              f"{nprocs} ranks x 2 buffers ({how})"))
            if need["scratch_bytes"]:
                files = described[kernel_of(entry)].scratch_files.format(ranks=nprocs,
                                                                          size=format_size(need["largest"]))
                found.append(Need(entry, placement, "disk", need["scratch_bytes"], files))
    if refused:
        raise CampaignError(f"{campaign.source}: invalid campaign file (the kernels refuse these options)\n"
                            + "\n".join(f"  {line}" for line in refused))
    return found


def available_memory() -> int:
    """MemAvailable: what can be allocated without swapping or the OOM killer."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def available_disk(directory) -> int:
    """Free bytes where `directory` is or would be created (its nearest existing ancestor)."""
    path = Path(directory).absolute()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity: a cgroup's cpuset, taskset), as virtual nodes split them."""
    return len(os.sched_getaffinity(0))


def placement_problems(campaign: Campaign, cpus: int | None = None) -> list[str]:
    """One line per placement that cannot run on this host: more ranks than RANKS_PER_CPU a CPU, or more
    nodes than virtual nodes can be made (all ranks of a launch run here: nodes > 1 is emulated)."""
    cpus = available_cpus() if cpus is None else cpus
    problems = []
    for index, placement in enumerate(campaign.config["placements"]):
        where = f"placements[{index}] {placement['name']}"
        ranks = placement["nodes"] * placement["ppn"]
        if ranks > RANKS_PER_CPU * cpus:
            problems.append(f"{where}: {placement['nodes']} x {placement['ppn']} = {ranks} ranks on this host's "
                            f"{cpus} CPUs; at most {RANKS_PER_CPU * cpus} run here ({RANKS_PER_CPU} a CPU: more "
                            "starve each other until the launch times out)")
        if placement["nodes"] > MAX_NODES and placement.get("emulate") != "loopback":
            problems.append(f"{where}: nodes {placement['nodes']}; at most {MAX_NODES} virtual nodes can be made on "
                            "one host (emulate: loopback runs more nodes, all as TCP on this host)")
    return problems


def partition_nodes(partition: str | None = None) -> dict[str, int] | None:
    """Each node of a Slurm partition (the default one where `partition` is None) and its CPUs, as sinfo
    lists them; None where sinfo cannot say (no Slurm client or controller here)."""
    try:
        done = subprocess.run(["sinfo", "--noheader", "--Node", "--format", "%N %c %P"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    nodes = {}
    for line in done.stdout.splitlines():
        name, cpus, listed = line.split()[:3]
        if listed.rstrip("*") == partition or (partition is None and listed.endswith("*")):
            nodes[name] = int(cpus)
    return nodes


def partition_problems(campaign: Campaign, partition: str | None = None,
                       nodes: dict[str, int] | None = None) -> list[str]:
    """One line per placement that the Slurm partition cannot hold: each launch asks for `nodes` nodes
    with `ppn` CPUs each (workflow/rules/run.smk: one CPU a rank), which Slurm would refuse or never
    start. Nothing where sinfo cannot say; `nodes` (name -> CPUs) stands for what it would."""
    nodes = partition_nodes(partition) if nodes is None else nodes
    if nodes is None:
        return []
    named = f"Slurm partition {partition}" if partition else "the default Slurm partition"
    if not nodes:
        return [f"{named}: sinfo lists no node in it"]
    layout = ", ".join(f"{name} {cpus}" for name, cpus in sorted(nodes.items()))
    problems = []
    for index, placement in enumerate(campaign.config["placements"]):
        fitting = sum(1 for cpus in nodes.values() if cpus >= placement["ppn"])
        if fitting < placement["nodes"]:
            problems.append(f"placements[{index}] {placement['name']}: needs {placement['nodes']} nodes of "
                            f"{placement['ppn']} CPUs or more; {named} has {fitting} (its nodes' CPUs: {layout})")
    return problems


def check_partition(campaign: Campaign, partition: str | None = None) -> None:
    """Raises ResourceError naming the campaign file and every placement the Slurm partition cannot hold."""
    problems = partition_problems(campaign, partition)
    if problems:
        raise ResourceError(f"{campaign.source}: the campaign does not fit the Slurm partition; lower the "
                            "placements' nodes or ppn, or name a larger partition (--default-resources "
                            "slurm_partition=...)\n" + "\n".join(f"  {p}" for p in problems))


def resource_problems(campaign: Campaign, memory: int | None = None, disk: int | None = None,
                      cache_bytes: int | None = None, kernels_dir: Path = KERNELS_DIR, cpus: int | None = None) \
        -> list[str]:
    """One line per placement with more ranks or nodes than this host can run (placement_problems), then one
    per (entry, placement) that would not fit, with needed and available bytes."""
    memory = available_memory() if memory is None else memory
    scratch = campaign.config["scratch"]
    problems = placement_problems(campaign, cpus)
    for need in needs(campaign, cache_bytes, kernels_dir):
        if need.resource == "memory" and need.bytes > memory:
            problems.append(f"kernels.{need.entry} on {need.placement}: needs about {format_size(need.bytes)} "
                            f"of memory ({need.how}), {format_size(memory)} available")
        elif need.resource == "disk":
            free = available_disk(scratch) if disk is None else disk
            if need.bytes > free:
                problems.append(f"kernels.{need.entry} on {need.placement}: needs about {format_size(need.bytes)} of "
                                f"disk in scratch {scratch} ({need.how}), {format_size(free)} free")
    return problems


def check_resources(campaign: Campaign, kernels_dir: Path = KERNELS_DIR, **available) -> None:
    """Raises ResourceError naming the campaign file and every launch that would not fit."""
    problems = resource_problems(campaign, kernels_dir=kernels_dir, **available)
    if problems:
        raise ResourceError(f"{campaign.source}: the campaign does not fit this machine; lower the placements' "
                            "nodes or ppn and the entries' sizes (or window/messages), or run them where there is "
                            "room (a workflow run elsewhere skips these checks: --config resource_checks=false)\n"
                            + "\n".join(f"  {p}" for p in problems))


def check_campaign(campaign: Campaign, resources: bool = True, kernels_dir: Path = KERNELS_DIR,
                   repository: Path = ROOT) -> None:
    """Everything checked before a job starts: the library rows' spec files (found as mpi_spec_path finds
    them), kernel names and options, then (with `resources`, where launches run on this host) ranks,
    nodes, memory and scratch. Raises CampaignError (ResourceError) naming the file."""
    check_specs(campaign, repository)
    check_kernels(campaign, kernels_dir)
    if resources:
        check_resources(campaign, kernels_dir)
    else:
        needs(campaign, kernels_dir=kernels_dir)   # the options still have to be ones the harness takes
