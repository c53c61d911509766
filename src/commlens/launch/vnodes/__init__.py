"""Virtual nodes: several hosts on one machine, each a network namespace with its own hostname,
address and CPUs, all plugged into a Linux bridge that plays the switch.

A virtual node is what a process started by its `node-exec` script sees: the node's network
namespace (an `eth0` on the private subnet, loopback), a UTS namespace with the node's hostname,
an IPC namespace and a mount namespace with a private /dev/shm, a temporary directory of its own
(TMPDIR), an /etc/hosts that names every node, and a boot id of its own, and a cpuset cgroup
holding the node's CPUs. The boot id and the IPC namespace are how communication libraries tell
hosts apart (UCX compares them before it uses shared memory or cross-memory attach between
processes), the hostname is how MPI tells nodes apart, and the cpuset is what the launchers bind
ranks within: with those, every library takes its own path between nodes, as it would between
real hosts.

The package's parts: cluster (the model of a cluster, its names, addresses and CPUs), node_exec
(the script that runs a command on a node, and the processes on its nodes), lifecycle (making,
sweeping and removing clusters).
"""

from commlens.launch.vnodes.cluster import (CLUSTER_NAME, MAX_NODES, PREFIX, RUN_ROOT, SUBNETS, VirtualCluster,
                                             VirtualNode, VirtualNodesError, cgroup_v1_hierarchy, cpuset_root, plan,
                                             split_cpus)
from commlens.launch.vnodes.lifecycle import (COMMANDS, KILL_WAIT_S, LINK_SHAPER, STAGING_PREFIX, STAGING_STALE_S,
                                               create, destroy, existing_clusters, owner_of, sweep,
                                               unavailable_reason, virtual_cluster)
from commlens.launch.vnodes.node_exec import node_exec_script, processes_on

__all__ = [
    "CLUSTER_NAME", "COMMANDS", "KILL_WAIT_S", "LINK_SHAPER", "MAX_NODES", "PREFIX", "RUN_ROOT", "STAGING_PREFIX",
    "STAGING_STALE_S", "SUBNETS", "VirtualCluster", "VirtualNode", "VirtualNodesError", "cgroup_v1_hierarchy",
    "cpuset_root", "create",
    "destroy", "existing_clusters", "node_exec_script", "owner_of", "plan", "processes_on", "split_cpus", "sweep",
    "unavailable_reason", "virtual_cluster",
]
