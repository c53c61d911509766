"""Before any job starts: the campaign's kernels exist, their options are ones the harness takes, and
every launch fits this machine.

The kernels and their options are checked against the kernel catalogue (commbench.launch.catalogue):
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
from dataclasses import dataclass
from pathlib import Path

from commbench.campaign import Campaign, CampaignError, kernel_of
from commbench.launch.catalogue import KERNELS_DIR, catalogue, launch_needs
from commbench.units import format_size


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


def resource_problems(campaign: Campaign, memory: int | None = None, disk: int | None = None,
                      cache_bytes: int | None = None, kernels_dir: Path = KERNELS_DIR) -> list[str]:
    """One line per (entry, placement) that would not fit, with needed and available bytes."""
    memory = available_memory() if memory is None else memory
    scratch = campaign.config["scratch"]
    problems = []
    for need in needs(campaign, cache_bytes, kernels_dir):
        if need.resource == "memory" and need.bytes > memory:
            problems.append(f"kernels.{need.entry} on {need.placement}: needs about {format_size(need.bytes)} of memory "
                            f"({need.how}), {format_size(memory)} available")
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
        raise ResourceError(f"{campaign.source}: the campaign does not fit this machine; lower the sizes "
                            "(or the window/messages) of these entries, or run them where there is room\n"
                            + "\n".join(f"  {p}" for p in problems))


def check_campaign(campaign: Campaign, resources: bool = True, kernels_dir: Path = KERNELS_DIR) -> None:
    """Everything checked before a job starts: kernel names and options, then (with `resources`, where
    launches run on this host) memory and scratch. Raises CampaignError (ResourceError) naming the file."""
    check_kernels(campaign, kernels_dir)
    if resources:
        check_resources(campaign, kernels_dir)
    else:
        needs(campaign, kernels_dir=kernels_dir)   # the options still have to be ones the harness takes
