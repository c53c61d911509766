"""Where a launch's ranks go: its placement (nodes, ranks per node, an emulated network or switch)
and the hosts it may spread over, which a Slurm allocation gives.

The placement decides the transport. On one host, `nodes: 1` runs over shared
memory, and `nodes > 1` is emulated (`transport="tcp", emulated=True`; how,
commlens.launch.plan says). In a Slurm allocation with as many hosts as the
placement has nodes, the ranks run on those hosts over the real network
(`transport="network", emulated=False`).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass


@dataclass
class Placement:
    name: str
    nodes: int
    ppn: int
    network: dict | None = None   # {"rate": "1gbit", "mtu": 1500}: an emulated interconnect
    hosts: int = 1                # hosts the launch may use: 1 here, the allocation's under Slurm
    emulate: str | None = None    # namespaces | loopback; None: namespaces where they can be made
    switch: dict | None = None    # {"rate": "1gbit"}: the virtual nodes' shared switch
    # [{"node": 3, "rate": "10mbit"}, {"link": [1, 4], "delay": "1ms"}]: faults planted on virtual nodes'
    # links, or on the path between two of them (rate, delay, loss)
    faults: list | None = None
    # {"leaf_nodes": 4, "uplink": {"rate": "20mbit"}}: virtual nodes on leaf switches joined through uplinks
    topology: dict | None = None

    @property
    def nprocs(self) -> int:
        return self.nodes * self.ppn

    @property
    def emulated(self) -> bool:
        """True when ranks meant for different nodes share one host."""
        return self.nodes > 1 and self.hosts < self.nodes

    @property
    def transport(self) -> str:
        return "tcp" if self.emulated else "shm" if self.nodes == 1 else "network"


def slurm_allocation(environ=os.environ) -> dict[str, str]:
    """Inside a Slurm job, the allocation as the variables that MPI launchers read for their
    hosts and slots (MPICH's Hydra and Open MPI's PRRTE). A Snakemake job step keeps only
    the job id of them, so they are restored from `scontrol show job`. Empty outside Slurm,
    or when the allocation's node list is there already."""
    job = environ.get("SLURM_JOB_ID")
    if not job or environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST"):
        return {}
    try:
        shown = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True,
                               timeout=30, env=environ)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    fields = dict(word.split("=", 1) for word in shown.stdout.split() if "=" in word)
    try:
        nodelist, nodes = fields["NodeList"], int(fields["NumNodes"].split("-")[0])
        tasks, cpus = int(fields["NumTasks"]), int(fields["NumCPUs"])
    except (KeyError, ValueError):
        return {}

    def per_node(total: int) -> str:   # Slurm's compressed form: 2(x3) is 2 on each of 3 nodes
        return str(total // nodes) + (f"(x{nodes})" if nodes > 1 else "")

    return {"SLURM_JOB_NODELIST": nodelist, "SLURM_NODELIST": nodelist,
            "SLURM_JOB_NUM_NODES": str(nodes), "SLURM_NNODES": str(nodes),
            "SLURM_NTASKS": str(tasks), "SLURM_NPROCS": str(tasks),
            "SLURM_TASKS_PER_NODE": per_node(tasks), "SLURM_JOB_CPUS_PER_NODE": per_node(cpus)}


def allocated_hosts(environ) -> int:
    """How many hosts this launch may spread over: a Slurm allocation's nodes, else this one."""
    try:
        return int(environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or 1)
    except ValueError:
        return 1
