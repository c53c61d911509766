"""Resource guards: refuse, before any job starts, a campaign whose launches cannot fit this machine.

A size schedule that asks for more memory than the host has ends in an allocation
failure at best and in the OOM killer taking an unrelated process at worst; an I/O
size larger than the scratch file system fills it for every other user. Both are
cheaper to catch from the campaign file than from a failed launch an hour in.

The estimates follow how commbench-kernels allocates (kernels/harness/main.c): per
rank, a send and a receive buffer of `slots` page-rounded copies of the largest
size (slots: messages in flight), at least twice the last-level cache in rotate
mode; halo.jacobi2d adds two (n + 2)^2 grids of doubles. Launches run one at a
time and all ranks of a placement run on this host (nodes > 1 is emulated here),
so each launch must fit on its own.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .campaign import Campaign, CampaignError, kernel_of, schedule_range
from .units import format_size, parse_size

PAGE = 4096
DEFAULT_LAST_LEVEL_CACHE = 32 << 20   # what the harness assumes where the system does not say


class ResourceError(CampaignError):
    """A campaign whose launches would need more memory or scratch space than there is."""


@dataclass(frozen=True)
class Need:
    entry: str          # the campaign's kernel entry, e.g. "pingpong.send@nocache"
    placement: str
    resource: str       # "memory" or "disk"
    bytes: int
    how: str            # how the figure was made, for the message


def _page_round(size: int) -> int:
    return max(1, -(-size // PAGE)) * PAGE


def largest_size(spec: dict) -> int:
    sizes = spec["sizes"]
    if "list" in sizes:
        return max(parse_size(s) for s in sizes["list"])
    return schedule_range(sizes)[1]


# Kernels that keep a window of messages in flight (--window, --window-buffers).
WINDOWED_KERNELS = ("stream.uni", "stream.bi", "multipair.stream", "rma.put", "rma.get")


def window_buffers(spec: dict) -> str:
    """What the harness does with a windowed kernel's buffers when the campaign does not say."""
    return spec.get("window_buffers", "distinct" if spec.get("integrity") else "shared")


def slots(kernel: str, spec: dict, nprocs: int) -> tuple[int, str]:
    """Buffers of the largest size one rank keeps at once (messages in flight), and why."""
    if kernel in WINDOWED_KERNELS:
        if window_buffers(spec) == "shared":
            return 1, f"window {spec['window']} on one buffer"
        return spec["window"], f"window {spec['window']}, a buffer each"
    if kernel.startswith("multipingpong."):
        return spec["messages"], f"{spec['messages']} messages"
    if kernel == "pieces":
        return spec["pieces"], f"{spec['pieces']} pieces"
    if kernel.startswith("coll."):
        return nprocs, f"one block per rank ({nprocs})"
    if kernel.startswith("ring."):
        return 2, "2 neighbours"
    return 1, "1 message"


def last_level_cache_bytes() -> int:
    """The largest CPU cache, as the harness sizes its rotate buffer."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            sizes.append(parse_size(path.read_text().strip().replace("K", "Ki").replace("M", "Mi")))
        except (OSError, ValueError):
            continue
    return max(sizes, default=DEFAULT_LAST_LEVEL_CACHE)


def needs(campaign: Campaign, cache_bytes: int | None = None) -> list[Need]:
    """Memory (all ranks on this host) and scratch disk of one launch of every (entry, placement)."""
    cache_bytes = cache_bytes or last_level_cache_bytes()
    found = []
    for entry, spec in campaign.config["kernels"].items():
        kernel = kernel_of(entry)
        largest = largest_size(spec)
        for placement in campaign.placements:
            if not campaign.runs_on(entry, placement):
                continue
            p = campaign.placement(placement)
            nprocs = p["nodes"] * p["ppn"]
            count, why = slots(kernel, spec, nprocs)
            buffer = _page_round(largest) * count
            how = f"{format_size(largest)} largest size x {why}"
            if spec["cache"] == "rotate":
                buffer = max(2 * cache_bytes, 2 * buffer)
                how += f", rotate buffer {format_size(buffer)}"
            per_rank = 2 * (buffer + spec["align"] + PAGE)
            if kernel == "halo.jacobi2d":
                edge = largest // 8 + 2
                per_rank += 2 * edge * edge * 8
                how += f", two {edge}x{edge} grids"
            found.append(Need(entry, placement, "memory", per_rank * nprocs,
                              f"{nprocs} ranks x 2 buffers ({how})"))
            if kernel in ("io.own_file", "io.shared_file", "io.read_same"):
                found.append(Need(entry, placement, "disk", 2 * nprocs * largest,
                                  f"{nprocs} own files and a shared file of {nprocs} x {format_size(largest)}"))
            elif kernel == "io.mpiio_all":
                found.append(Need(entry, placement, "disk", nprocs * largest,
                                  f"one file of {nprocs} x {format_size(largest)}"))
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
                      cache_bytes: int | None = None) -> list[str]:
    """One line per (entry, placement) that would not fit, with needed and available bytes."""
    memory = available_memory() if memory is None else memory
    scratch = campaign.config["scratch"]
    problems = []
    for need in needs(campaign, cache_bytes):
        if need.resource == "memory" and need.bytes > memory:
            problems.append(f"kernels.{need.entry} on {need.placement}: needs about {format_size(need.bytes)} of memory "
                            f"({need.how}), {format_size(memory)} available")
        elif need.resource == "disk":
            free = available_disk(scratch) if disk is None else disk
            if need.bytes > free:
                problems.append(f"kernels.{need.entry} on {need.placement}: needs about {format_size(need.bytes)} of "
                                f"disk in scratch {scratch} ({need.how}), {format_size(free)} free")
    return problems


def check_resources(campaign: Campaign, **available) -> None:
    """Raises ResourceError naming the campaign file and every launch that would not fit."""
    problems = resource_problems(campaign, **available)
    if problems:
        raise ResourceError(f"{campaign.source}: the campaign does not fit this machine; lower the sizes "
                            "(or the window/messages) of these entries, or run them where there is room\n"
                            + "\n".join(f"  {p}" for p in problems))
