"""Running commands on a cluster's nodes: the `node-exec` script, and the processes still there.

`node-exec` takes its arguments as ssh does ([options] HOST COMMAND...), so it is the remote
shell of the MPI launchers (MPICH's Hydra `-launcher-exec`, Open MPI's `plm_ssh_agent`) and of
anything else that starts work on a host.
"""

from __future__ import annotations

import contextlib
import os
import shlex

from commlens.launch.vnodes.cluster import VirtualCluster, run_command, cpuset_root


def node_exec_script(cluster: VirtualCluster) -> str:
    """The cluster's remote shell, as ssh is called: [options] HOST COMMAND... The command words
    are joined by spaces and run by sh, as ssh's remote shell runs them."""
    assert cluster.cpuset_root is not None      # lifecycle.create makes nodes only where cpusets are
    # Each node's own temporary directory, whatever the caller's was (prterun's, when it starts a daemon).
    cases = "\n".join(f"  {node.hostname}|{node.address}) node={node.hostname}; "
                      f"tmp={shlex.quote(str(cluster.temporary_directory(node)))} ;;" for node in cluster.nodes)
    directory = shlex.quote(str(cluster.directory))
    # $0: the node; $1: the working directory to keep; $2: the command.
    inside = ("mount --bind \"$d/hosts\" /etc/hosts && "
              "mount --bind \"$d/$0.boot_id\" /proc/sys/kernel/random/boot_id && "
              "mount -t tmpfs -o mode=1777 shm /dev/shm && "
              "echo \"$0\" > /proc/sys/kernel/hostname && "
              "{ cd \"$1\" 2>/dev/null || cd /; } && exec sh -c \"$2\"")
    return f"""#!/bin/sh
# Runs a command on a virtual node of {cluster.name} (commlens.launch.vnodes), as ssh would on a host.
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;   # ssh options that take a value
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || {{ echo "usage: $0 [ssh options] HOST COMMAND..." >&2; exit 255; }}
host=$1; shift
case "$host" in
{cases}
  *) echo "{cluster.name}: no virtual node $host" >&2; exit 255 ;;
esac
echo $$ > {shlex.quote(str(cluster.cpuset_root / cluster.name))}/$node/cgroup.procs || exit 255
export d={directory} TMPDIR="$tmp"
exec nsenter --net=/run/netns/{cluster.name}-$node unshare --uts --ipc --mount --propagation slave -- \\
  sh -c {shlex.quote(inside)} "$node" "$PWD" "$*"
"""


def processes_on(name: str) -> set[int]:
    """Processes still on the cluster's nodes: in their network namespaces or cgroups."""
    pids: set[int] = set()
    for line in run_command(["ip", "netns", "list"], check=False).stdout.splitlines():
        netns = line.split()[0] if line.strip() else ""
        if netns.startswith(name + "-"):
            pids.update(int(p) for p in run_command(["ip", "netns", "pids", netns], check=False).stdout.split())
    root = cpuset_root()
    if root is not None and (root / name).is_dir():
        for procs in (root / name).glob("*/cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in procs.read_text().split())
    pids.discard(os.getpid())
    return pids

