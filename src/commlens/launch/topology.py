"""The machine a launch ran on, as hwloc describes it: each host's topology (`lstopo --of xml`: packages,
NUMA nodes, caches, cores, processing units, I/O devices), taken by the launcher once per launch and host
and kept, compressed, in the raw file's "topology" record (commlens.io.raw reads it, commlens.io.hwloc
parses it). Where each rank ran is the run record's `cpu_binding`, which the topology turns into hwloc's
objects.

Virtual nodes share this host's hardware (their cpusets are parts of it): one topology, named for every
virtual node, is the truth for all of them. In a Slurm allocation of several hosts each host's topology is
taken on that host (srun, one task per node). Taken after the kernel ended, it costs the measurement
nothing; where it cannot be taken (no hwloc: envs/system.txt installs Debian's), the record says why, and
the launch is as good as without it.
"""

from __future__ import annotations

import base64
import functools
import gzip
import os
import shutil
import socket
import subprocess

RECORD = "topology"
LSTOPO = ("lstopo-no-graphics", "lstopo")   # Debian's hwloc-nox has both; hwloc's X build only the second
TIMEOUT_S = 60
UNAVAILABLE = "no lstopo on PATH: install hwloc (Debian's hwloc-nox, in envs/system.txt) to record the topology"


def compressed(xml: str) -> str:
    """The XML as the record keeps it: gzip, then base64 (a topology of a large node is some 300 KB of XML,
    some 30 KB so)."""
    return base64.b64encode(gzip.compress(xml.encode(), compresslevel=9, mtime=0)).decode("ascii")


def decompressed(text: str) -> str:
    return gzip.decompress(base64.b64decode(text)).decode()


@functools.cache
def lstopo() -> tuple[str, str] | None:
    """(command, its version line) of the lstopo on PATH, None where there is none."""
    for name in LSTOPO:
        if path := shutil.which(name):
            try:
                version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                continue
            return path, version.stdout.strip()
    return None


def local_xml() -> str:
    """This host's topology as hwloc's XML; OSError or subprocess errors where lstopo fails."""
    found = lstopo()
    if found is None:
        raise FileNotFoundError(UNAVAILABLE)
    done = subprocess.run([found[0], "--of", "xml", "-"], capture_output=True, text=True, timeout=TIMEOUT_S,
                          check=True)
    return done.stdout


def topology_record(hostnames: list[str] | None = None, allocation_hosts: int = 1, env: dict | None = None) -> dict:
    """The raw file's topology record of a launch: this host's topology, named for `hostnames` (the virtual
    nodes it carries; None: this host's own name), or, with `allocation_hosts` > 1 (a Slurm allocation),
    each host's, taken there. {"record": "topology", "status": "ok", "machines": [{"hosts": [...],
    "xml_gz_base64": ..., "lstopo": version, "shared": bool}]}, or a status of "unavailable" (no lstopo) or
    "failed" with its reason. Never raises."""
    try:
        if allocation_hosts > 1:
            machines = _allocation_machines(allocation_hosts, env)
        else:
            machines = [{"hosts": list(hostnames or [socket.gethostname()]), "physical_host": socket.gethostname(),
                         "shared": len(hostnames or []) > 1, "xml_gz_base64": compressed(local_xml())}]
    except FileNotFoundError as error:
        return {"record": RECORD, "status": "unavailable", "reason": str(error)}
    except subprocess.CalledProcessError as error:
        return {"record": RECORD, "status": "failed",
                "reason": f"{' '.join(map(str, error.cmd))} exited with {error.returncode}: "
                          f"{(error.stderr or '')[-500:]}"}
    except (OSError, subprocess.TimeoutExpired, ValueError) as error:
        return {"record": RECORD, "status": "failed", "reason": str(error)}
    found = lstopo()
    return {"record": RECORD, "status": "ok", "lstopo": found[1] if found else "",
            "machines": [{**machine, "lstopo": found[1] if found else ""} for machine in machines]}


# One line per host: its name, a tab, its topology compressed (gzip, base64 on one line).
_PER_HOST = ("command -v lstopo-no-graphics >/dev/null && l=lstopo-no-graphics || l=lstopo; "
             "printf '%s\\t%s\\n' \"$(hostname)\" \"$($l --of xml - | gzip -9n | base64 -w0)\"")


def _allocation_machines(hosts: int, env: dict | None) -> list[dict]:
    """Each host of a Slurm allocation, its topology taken on it (one srun task per node)."""
    if shutil.which("srun") is None:
        raise FileNotFoundError("no srun on PATH to reach the allocation's other hosts")
    done = subprocess.run(["srun", f"--nodes={hosts}", f"--ntasks={hosts}", "--ntasks-per-node=1", "--overlap",
                           "sh", "-c", _PER_HOST], capture_output=True, text=True, timeout=TIMEOUT_S, check=True,
                          env={**os.environ, **(env or {})})
    machines = []
    for line in done.stdout.splitlines():
        host, _, xml = line.partition("\t")
        if host and xml:
            decompressed(xml)      # ValueError (bad base64, gzip's OSError) where a host's output is damaged
            machines.append({"hosts": [host], "physical_host": host, "shared": False, "xml_gz_base64": xml})
    if not machines:
        raise ValueError(f"srun gave no host's topology: {done.stderr[-500:]}")
    return machines
