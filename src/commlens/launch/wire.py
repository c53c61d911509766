"""The userspace link of a virtual node (kernels/emulation/wire.c): where the kernel has no netem, a
commlens-wire process in each node serialises every frame at the link's rate, both ways, and gives the
link its delay and loss. The node's eth0 is then a TAP device that the process holds; the veth that
plugs the node into the switch is its `uplink`.

`binary()` builds the program on first use (a C compiler, a second), `start()` runs one in a node's
network namespace and returns once its eth0 exists; the node's maker then gives it PRIORITY where the
host allows one (commlens.launch.vnodes.lifecycle, where the nodes' cgroups are made), and each launch
records the answer as `link_priority`. The process ends with the process that started it
(PR_SET_PDEATHSIG), and the cluster's removal ends it with everything else on the node.
"""

from __future__ import annotations

import functools
import hashlib
import os
import select
import shutil
import subprocess
from pathlib import Path

from commlens.locations import ROOT, built_in_cache, cache_dir

SOURCE = ROOT / "kernels" / "emulation" / "wire.c"
PROGRAM = "commlens-wire"
READY_S = 10.0
# The most of a link's time one frame may carry. A node's TCP hands its eth0 bursts of up to 64 KiB
# (segmentation offload), and the wire delivers a frame whole, when its last segment would have arrived:
# the receiver then acknowledges them all at once, late, where a real wire's receiver acknowledges the
# first segments while the last are still on their way. Left whole, bursts made some pairs of six clean
# nodes at 20 Mbit/s 20-40% slower than the others, the same pairs in every launch, whatever the library.
# 125 us is what a gigabit network card hands its host at once under its default interrupt moderation
# (8000 interrupts a second); it leaves one segment a frame up to about 100 Mbit/s, and 10 at 1 Gbit/s,
# where single segments cost two cores too much work to keep the rate (bulk TCP at 1 Gbit/s here: 0.89-0.92
# of the rate with one segment a frame, 0.90 with 50 us, 0.99 with 100 us, 0.98-0.99 with 125 us).
BURST_S = 125e-6


# The link process's real-time (SCHED_FIFO) priority: above every rank, so that ranks busy-polling on its
# cores delay a frame by the time to wake it, not by a time slice; below the kernel's own threads (50).
PRIORITY = 10
REALTIME = "real-time"


def burst_segments(rate_bits_per_s: float, mtu: int) -> int:
    """The most TCP segments a node's stack may put in one frame to its link of this rate (at least one):
    BURST_S of the link's time, each segment an MTU and its 14-byte link header."""
    return max(1, int(BURST_S * rate_bits_per_s / 8 / (mtu + 14)))


class WireError(RuntimeError):
    """The link process could not be built or started; the message says why."""


@functools.cache
def binary() -> Path:
    """commlens-wire for this source, built once per source into the cache."""
    program = cache_dir() / "wire" / hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16] / PROGRAM
    compiler = os.environ.get("CC", "cc")
    if not program.exists() and shutil.which(compiler) is None:
        raise WireError(f"the emulated links need a C compiler ({compiler}) to build {PROGRAM} from {SOURCE}")
    partial = program.with_name(PROGRAM + ".partial")
    return built_in_cache(program, [compiler, "-O2", "-std=c11", "-o", str(partial), str(SOURCE)], WireError, partial)


def start(netns: str, tap: str, device: str, log: Path, rate_bits: float, delay_s: float = 0.0,
          loss_percent: float = 0.0, seed: int = 1, paths=()) -> subprocess.Popen:
    """A link process in `netns` between the TAP device it makes (`tap`) and `device`, its complaints in
    `log`; returns once `tap` exists. `paths`: (peer IPv4 address, rate, delay, loss) of planted path faults,
    what the node sends that peer. Raises WireError, with what the process said, when it does not start."""
    command = ["ip", "netns", "exec", netns, str(binary()), tap, device, f"{rate_bits:.0f}", f"{delay_s:.9f}",
               f"{loss_percent:g}", str(seed),
               *(f"{peer}={rate:.0f}:{delay:.9f}:{loss:g}" for peer, rate, delay, loss in paths)]
    with open(log, "a") as errors:   # a file, not a pipe: a pipe nobody reads would stop the link when full
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
    output = process.stdout
    assert output is not None       # stdout=PIPE
    ready, _, _ = select.select([output], [], [], READY_S)
    line = output.readline() if ready else ""
    output.close()   # it says nothing after "ready": no descriptor kept per link
    if line.strip() != "ready":
        process.kill()
        process.wait()
        said = log.read_text(errors="replace").strip() if log.exists() else ""
        raise WireError(f"{PROGRAM} in {netns} did not start: {(said or line).strip()[-300:] or 'no answer'}")
    return process


def launch_priority(priorities: dict[str, str]) -> str:
    """A launch's `link_priority`: REALTIME where every node's link process ran at it, else each node's."""
    if set(priorities.values()) == {REALTIME}:
        return REALTIME
    return "; ".join(f"{host}: {how}" for host, how in priorities.items())


def placement_priority(launches: list[str]) -> str:
    """A placement's `link_priority` from its launches' (each '' where it recorded none): REALTIME where
    each recording launch's links ran at it, else in how many they did not and the first such one's words."""
    recorded = [how for how in launches if how]
    other = [how for how in recorded if how != REALTIME]
    if not other:
        return REALTIME if recorded else ""
    return f"not real-time in {len(other)} of {len(recorded)} launches ({other[0]})"
