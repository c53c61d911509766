"""How a launch is made: the mpiexec command line and environment for a library and placement, or
why the library cannot make it (Unsupported).

A placement's `nodes > 1` on one host (commlens.launch.placement) is emulated in
one of two ways, the placement's `emulate:`. `namespaces` (the default where this
host can make them) runs each node's ranks on a virtual node of its own
(commlens.launch.vnodes): mpiexec starts on the first node and reaches the others
through its own remote shell, as on a cluster, so each library takes its normal
path between hosts, TCP over the virtual links. `loopback` (where virtual nodes
cannot be made) forces each library onto its TCP path over loopback.

How mpiexec is called depends on the library's launcher, read from its
`mpiexec --version` when its environment was made: MPICH's Hydra, Open MPI 4's
ORTE or Open MPI 5's PRRTE. The emulation uses only control variables the
library lists (MPICH 3.4 has MPIR_CVAR_NOLOCAL but no MPIR_CVAR_CH4_NETMOD), and
a campaign row's own settings must be among them: a CVAR or MCA parameter the
library does not know would be ignored without a word, so such a launch is
refused (`unsupported`) with the reason instead of measuring the defaults.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field

from commlens.launch import vnodes
from commlens.launch.families import Unsupported, family_named, launcher_named
from commlens.launch.libraries import read_controls
from commlens.launch.placement import Placement

# A launch on one host, and interactive engines there, get a TMPDIR of their own named with this prefix in
# the system's temporary folder: the MPI runtimes keep session files in TMPDIR named by host and pid, and a
# daemon killed earlier left files that a later daemon given the same pid took for its own and failed on
# (PRRTE's exit status 213). Short: PMIx's sockets live there, and a socket's path has at most 107 bytes.
SESSION_DIRECTORY_PREFIX = "commlens-tmp-"

def emulated_network_env(library: dict) -> dict[str, str]:
    """What makes ranks on one host take this library's network path (TCP over loopback), built
    from the control variables the library has; Unsupported where it has no way to."""
    return family_named(library["family"]).emulated_network_env(library, read_controls(library))


def unknown_controls(library: dict, settings: dict[str, str]) -> list[str]:
    """Settings of a campaign row that look like this library's control variables but are not
    among those it lists, each with the closest names it does know."""
    controls, prefix = read_controls(library), family_named(library["family"]).control_prefix
    if controls is None or not prefix:
        return []
    problems = []
    for name in sorted(settings):
        if name.startswith(prefix) and name not in controls:
            close = difflib.get_close_matches(name, sorted(controls), n=2, cutoff=0.75)
            problems.append(name + (f" (similar: {', '.join(close)})" if close else ""))
    return problems


def emulation_of(placement: Placement) -> str:
    """How the placement's nodes are emulated on this host: "" where they are not (one node, or
    enough real hosts), else its `emulate:`, by default namespaces where this host can make
    virtual nodes and loopback where it cannot. Unsupported where virtual nodes are needed (asked
    for, or a switch) and cannot be made."""
    if not placement.emulated:
        return ""
    if placement.emulate == "loopback":
        return "loopback"
    reason = vnodes.unavailable_reason()
    if reason is None:
        return "namespaces"
    if placement.emulate == "namespaces" or placement.switch or placement.faults or placement.topology:
        wanted = ("emulate: namespaces" if placement.emulate == "namespaces" else "a switch:" if placement.switch
                  else "faults:" if placement.faults else "a topology:")
        raise Unsupported(f"placement {placement.name} has {wanted}, which needs virtual nodes: {reason}")
    return "loopback"


@dataclass
class LaunchPlan:
    """The exact command and environment of one launch, recorded with its result."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    binding: str = "core"
    leftovers: tuple[str, ...] = ()    # what the launcher leaves when killed (Launcher.leftovers)


def plan_launch(library: dict, placement: Placement, binary: str, kernel_args: list[str],
                output: str, library_env: dict[str, str] | None = None,
                cores: int | None = None, cluster: vnodes.VirtualCluster | None = None) -> LaunchPlan:
    """mpiexec command line and environment for this library (its library.json record: family,
    launcher, control variables) and placement on the local host, or on the virtual nodes of
    `cluster` (then run on its first node). Raises Unsupported when the library cannot emulate
    the placement or does not know a setting of the campaign row."""
    family = family_named(library["family"])
    cores = cores or os.cpu_count() or 1
    nprocs = placement.nprocs
    oversubscribed = nprocs > cores
    binding = "none" if oversubscribed else "core"
    unknown = unknown_controls(library, library_env or {})
    if unknown:
        raise Unsupported(f"{family.describe(library)} does not know {'; '.join(unknown)} (its control "
                          f"variables, as {family.controls_source} lists them); the setting would be ignored and "
                          f"the row measure the defaults")
    env: dict[str, str] = {}
    if placement.emulated and cluster is None:
        env.update(emulated_network_env(library))
    launcher = launcher_named(library.get("launcher") or family.launcher(library.get("version"), "").name)
    command = ["mpiexec", "-n", str(nprocs)]
    if cluster is not None:
        command += launcher.remote_start_options(str(cluster.exec_script), cluster.host_list(placement.ppn))
    env.update(family.launch_env(as_root=os.geteuid() == 0))
    command += family.bind_options(binding)
    if oversubscribed:
        command += launcher.oversubscribe_options()
    # The campaign's own settings (MCA parameters, CVARs) win over the defaults above.
    env.update(library_env or {})
    # Kernels that pair ranks across nodes need to know where the node boundaries are.
    command += [binary, *kernel_args, "--nodes", str(placement.nodes), "-o", output]
    return LaunchPlan(command=command, env=env, binding=binding, leftovers=launcher.leftovers)
