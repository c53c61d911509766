"""The userspace link of a virtual node (kernels/emulation/wire.c): where the kernel has no netem, a
commbench-wire process in each node serialises every frame at the link's rate, both ways, and gives the
link its delay and loss. The node's eth0 is then a TAP device that the process holds; the veth that
plugs the node into the switch is its `uplink`.

`binary()` builds the program on first use (a C compiler, a second), `start()` runs one in a node's
network namespace and returns once its eth0 exists. The process ends with the process that started it
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

from commbench.locations import ROOT, built_in_cache, cache_dir

SOURCE = ROOT / "kernels" / "emulation" / "wire.c"
PROGRAM = "commbench-wire"
READY_S = 10.0


class WireError(RuntimeError):
    """The link process could not be built or started; the message says why."""


@functools.cache
def binary() -> Path:
    """commbench-wire for this source, built once per source into the cache."""
    program = cache_dir() / "wire" / hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16] / PROGRAM
    compiler = os.environ.get("CC", "cc")
    if not program.exists() and shutil.which(compiler) is None:
        raise WireError(f"the emulated links need a C compiler ({compiler}) to build {PROGRAM} from {SOURCE}")
    partial = program.with_name(PROGRAM + ".partial")
    return built_in_cache(program, [compiler, "-O2", "-std=c11", "-o", str(partial), str(SOURCE)], WireError, partial)


def start(netns: str, tap: str, device: str, log: Path, rate_bits: float, delay_s: float = 0.0,
          loss_percent: float = 0.0, seed: int = 1) -> subprocess.Popen:
    """A link process in `netns` between the TAP device it makes (`tap`) and `device`, its complaints in
    `log`; returns once `tap` exists. Raises WireError, with what the process said, when it does not start."""
    command = ["ip", "netns", "exec", netns, str(binary()), tap, device, f"{rate_bits:.0f}", f"{delay_s:.9f}",
               f"{loss_percent:g}", str(seed)]
    with open(log, "a") as errors:   # a file, not a pipe: a pipe nobody reads would stop the link when full
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
    ready, _, _ = select.select([process.stdout], [], [], READY_S)
    line = process.stdout.readline() if ready else ""
    process.stdout.close()   # it says nothing after "ready": no descriptor kept per link
    if line.strip() != "ready":
        process.kill()
        process.wait()
        said = log.read_text(errors="replace").strip() if log.exists() else ""
        raise WireError(f"{PROGRAM} in {netns} did not start: {(said or line).strip()[-300:] or 'no answer'}")
    return process
