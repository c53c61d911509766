"""Virtual nodes (commlens.launch.vnodes): hosts of their own on one machine, launches on them through
each library's own remote start, and nothing left behind however a launch ends."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from commlens.launch import locks, netem, vnodes
from commlens.launch.families.mpich import Hydra
from commlens.launch.supervision import leftover_files
from commlens.launch.placement import Placement

from conftest import LIBRARIES, campaign_error, launch

needs_vnodes = pytest.mark.skipif(os.geteuid() != 0, reason="virtual nodes need root")


@pytest.fixture(scope="module")
def can_make_vnodes():
    reason = vnodes.unavailable_reason()
    if reason:
        pytest.skip(reason)


def run_on(cluster, host: str, script: str) -> str:
    done = subprocess.run(cluster.command_on(host, ["sh", "-c", script]), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cpus_of(listing: str) -> set[int]:
    """CPUs from a kernel list such as 0-3,6."""
    found = set()
    for part in listing.split(","):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


def test_cpus_are_split_in_blocks_and_shared_round_robin_when_too_few():
    assert vnodes.split_cpus(2, [0, 1, 2, 3]) == [(0, 1), (2, 3)]
    assert vnodes.split_cpus(2, [4, 5, 6]) == [(4,), (5,)]        # an odd CPU is left to the host
    assert vnodes.split_cpus(3, [0, 1]) == [(0,), (1,), (0,)]


def test_campaign_keys_for_emulation(tmp_path):
    base = """
        campaign: c
        libraries: {mpich: {mpi: mpich-5.0.2}}
        placements:
          - PLACEMENT
        kernels: {pingpong.send: {}}
    """
    message = campaign_error(tmp_path, base.replace("PLACEMENT", "{name: 2N1P, nodes: 2, ppn: 1, emulate: netns}"))
    assert "placements[0].emulate: 'netns' is not allowed" in message and "namespaces, loopback" in message
    message = campaign_error(tmp_path, base.replace(
        "PLACEMENT", "{name: 2N1P, nodes: 2, ppn: 1, emulate: loopback, switch: {rate: 1gbit}}"))
    assert "a switch joins virtual nodes" in message and "emulate: loopback" in message
    message = campaign_error(tmp_path, base.replace(
        "PLACEMENT", "{name: 1N2P, nodes: 1, ppn: 2, switch: {rate: 1gbit}}"))
    assert "needs nodes >= 2" in message
    message = campaign_error(tmp_path, base.replace(
        "PLACEMENT", "{name: 2N1P, nodes: 2, ppn: 1, switch: {rate: fast}}"))
    assert "placements[0].switch.rate" in message and "a tc rate" in message


@needs_vnodes
def test_each_node_is_a_host_of_its_own(can_make_vnodes):
    with vnodes.virtual_cluster(2) as cluster:
        seen = [run_on(cluster, host, "uname -n; ip -4 -o addr show dev eth0; cat /proc/sys/kernel/random/boot_id; "
                                      "grep Cpus_allowed_list /proc/self/status; getent hosts vnode0 vnode1")
                for host in cluster.hostnames]
        for node, text in zip(cluster.nodes, seen):
            lines = text.splitlines()
            assert lines[0] == node.hostname
            assert f"inet {node.address}/24" in lines[1]
            assert cpus_of(lines[3].split()[-1]) == set(node.cpus)
            assert "vnode0" in text and "vnode1" in text and cluster.nodes[1].address in text
        boot_ids = {text.splitlines()[2] for text in seen}
        assert len(boot_ids) == 2 and Path("/proc/sys/kernel/random/boot_id").read_text().strip() not in boot_ids
        # Reached as ssh reaches a host: its options are skipped, the command words joined for sh.
        shell = subprocess.run([str(cluster.exec_script), "-x", "-o", "BatchMode=yes", cluster.nodes[1].address,
                                "echo", "$(uname", "-n)"], capture_output=True, text=True, timeout=60)
        assert shell.stdout.strip() == "vnode1", shell.stderr
        unknown = subprocess.run([str(cluster.exec_script), "vnode7", "true"], capture_output=True, text=True)
        assert unknown.returncode == 255 and "no virtual node vnode7" in unknown.stderr
        # Node to node over the bridge: a TCP connection from vnode0 to a listener on vnode1.
        listener = subprocess.Popen(cluster.command_on("vnode1", [sys.executable, "-c", textwrap.dedent("""
            import socket
            server = socket.create_server(("0.0.0.0", 7000))
            connection, peer = server.accept()
            print(peer[0], connection.recv(16).decode())
        """)]), stdout=subprocess.PIPE, text=True)
        sender = textwrap.dedent("""
            import socket, time
            for _ in range(100):
                try:
                    socket.create_connection(("vnode1", 7000)).sendall(b"hello"); break
                except ConnectionRefusedError:
                    time.sleep(0.05)
        """)
        subprocess.run(cluster.command_on("vnode0", [sys.executable, "-c", sender]), check=True, timeout=60)
        assert listener.communicate(timeout=60)[0].split() == [cluster.nodes[0].address, "hello"]
    assert cluster.name not in vnodes.existing_clusters()


OWNER = textwrap.dedent("""
    import subprocess, time
    from commlens.launch import vnodes
    with vnodes.virtual_cluster(2) as cluster:
        print(cluster.name, flush=True)
        subprocess.Popen(cluster.command_on("vnode1", ["sleep", "600"]))
        time.sleep(600)
""")


@needs_vnodes
# alone: a neighbour making a cluster sweeps the one SIGKILL left before the test sees it.
@pytest.mark.alone
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_owner_leaves_nothing_behind(can_make_vnodes, signum):
    """SIGTERM: the owner removes its cluster on the way out. SIGKILL: nothing can run, so the
    next sweep (every new cluster makes one) removes it, processes on its nodes included."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    name = owner.stdout.readline().strip()
    assert vnodes.owner_of(name) == owner.pid
    deadline = time.monotonic() + 30
    while not vnodes.processes_on(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert vnodes.processes_on(name), "the sleep on vnode1 never started"
    owner.send_signal(signum)
    owner.wait(timeout=60)
    if signum == signal.SIGKILL:
        assert name in vnodes.existing_clusters() and vnodes.owner_of(name) is None
        assert name in vnodes.sweep()
    assert name not in vnodes.existing_clusters()
    assert not vnodes.processes_on(name)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines()
    assert not [line for line in links if name in line]


# What makes each library say which path it took to each peer.
VERBOSE = {"mpich-5.0.2": {"UCX_LOG_LEVEL": "info"}, "openmpi-5.0.11": {"OMPI_MCA_btl_base_verbose": "100"}}


def chosen_paths(console: str) -> tuple[set[str], set[str]]:
    """The transports a library reported choosing (UCX's configurations, Open MPI's BTL per peer):
    (between nodes, within a node)."""
    between, within = set(), set()
    for source, btl, target in re.findall(r"\[(vnode\d+):\d+\] mca: bml: Using (\w+) btl for send to \S+ on node "
                                          r"(vnode\d+)", console):
        if source != target:
            between.add(btl)
        elif btl != "self":
            within.add(btl)
    for where, lanes in re.findall(r"ucp_context_\d+ (inter|intra)-node cfg#\d+ (.*)", console):
        (between if where == "inter" else within).update(re.findall(r"[\w-]+/[\w-]+", lanes))
    return between, within


@pytest.mark.mpi
@needs_vnodes
@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("nodes,ppn", [(2, 1), (2, 2)])
def test_ranks_run_on_their_virtual_nodes_over_the_librarys_own_network_path(workspace, built, tmp_path,
                                                                             can_make_vnodes, library, nodes, ppn):
    placement = Placement(f"{nodes}N{ppn}P", nodes, ppn)
    before = vnodes.existing_clusters()
    result = launch(workspace, library, placement,
                    ["pingpong.send", "--sizes", "8,65536", "--min-samples", "5", "--max-point-time", "0.3"],
                    tmp_path, library_env=VERBOSE[library])
    assert result.status == "ok", result.launch.get("console_tail")
    record = result.launch
    assert (record["emulation"], record["transport"], record["emulated"]) == ("namespaces", "tcp", True)
    # Rank r runs on node r // ppn, bound within that node's CPUs, which no other node has.
    assert result.run["hosts"] == [f"vnode{rank // ppn}" for rank in range(nodes * ppn)]
    bound = [cpus_of(binding) for binding in result.run["cpu_binding"]]
    assert not set().union(*bound[:ppn]) & set().union(*bound[ppn:]), result.run["cpu_binding"]
    # Nothing forced: each library chose TCP between nodes and shared memory within one, and said so.
    assert not {"MPIR_CVAR_NOLOCAL", "MPIR_CVAR_CH4_NETMOD", "FI_PROVIDER", "UCX_TLS", "OMPI_MCA_pml",
                "OMPI_MCA_btl"} & set(record["env"])
    between, within = chosen_paths((tmp_path / "console.log").read_text())
    assert between and all(path.startswith("tcp") for path in between), between
    if ppn > 1:
        assert within and not any(path.startswith("tcp") for path in within), within
    # The launch's nodes went with it.
    assert not {cluster for cluster in vnodes.existing_clusters() - before if vnodes.owner_of(cluster) == os.getpid()}


@pytest.mark.mpi
@needs_vnodes
def test_session_files_a_killed_daemon_left_never_fail_a_later_launch(workspace, built, tmp_path, can_make_vnodes,
                                                                      monkeypatch):
    """Open MPI 5's daemon (PRRTE's prted) keeps its session files in TMPDIR, in prted.<pid>/ with a PMIx
    rendezvous file named for the host; one killed in an earlier launch leaves them, and a later daemon given
    the same pid failed on them (daemon exit status 213: one launch in some hundreds on a machine where killed
    launches had left a score of them). Here every pid the launch could be given has such files, in the
    TMPDIR it is started with: each virtual node has a temporary directory of its own, and the launch one."""
    inherited = tmp_path / "tmp"
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    first = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    window = 8000    # the launch takes a few hundred pids; a neighbouring test a few thousand at most
    for pid in {(first + step) % pid_max for step in range(1, window)}:
        session = inherited / f"prted.{pid}"
        session.mkdir(parents=True)
        for host in ("vnode0", "vnode1"):
            (session / f"pmix.{host}.tool").write_text("left by a killed daemon\n")
    planted = set(inherited.iterdir())
    monkeypatch.setenv("TMPDIR", str(inherited))
    monkeypatch.setattr(tempfile, "tempdir", None)      # gettempdir() reads TMPDIR again
    result = launch(workspace, "openmpi-5.0.11", Placement("2N1P", 2, 1),
                    ["pingpong.send", "--sizes", "8", "--min-samples", "5", "--max-point-time", "0.1"], tmp_path)
    given = (int(Path("/proc/sys/kernel/ns_last_pid").read_text()) - first) % pid_max
    assert given < window, f"{given} pids were given out, more than were planted: this run shows nothing"
    assert result.status == "ok", result.launch.get("console_tail")
    assert set(inherited.iterdir()) == planted     # the launch left nothing in the directory it was given


KILLED_LAUNCH = textwrap.dedent("""
    import json, sys
    from commlens.launch.placement import Placement
    from commlens.launch.run import run_launch
    from commlens.launch.supervision import stop_when_told
    stop_when_told()          # as the workflow's launch job does
    a = json.loads(sys.argv[1])
    run_launch(installation=a["installation"], build=a["build"], kernel="pingpong.send",
               kernel_args=["pingpong.send", "--sizes", "1048576", "--min-samples", "100000",
                            "--max-samples", "100000", "--max-point-time", "100"],
               placement=Placement("2N1P", 2, 1), library=a["library"], launch=0, output=a["output"],
               timeout_s=300, log=sys.stdout, scratch=a["scratch"])
""")


def kernel_processes(name: str) -> list[int]:
    found = []
    for pid in vnodes.processes_on(name):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"/commlens-kernels"):
                found.append(pid)
        except OSError:
            pass
    return found


# alone: a neighbour's sweep (SIGKILL), a neighbour's Hydra topology files in /tmp (SIGTERM).
@pytest.mark.alone
@pytest.mark.mpi
@needs_vnodes
@pytest.mark.parametrize("library,signum", [("mpich-5.0.2", signal.SIGTERM), ("openmpi-5.0.11", signal.SIGKILL)])
def test_a_launch_killed_mid_run_leaves_no_node_behind(workspace, built, tmp_path, can_make_vnodes, library, signum):
    arguments = {"installation": json.loads((workspace / "build" / "envs" / library / "library.json").read_text()),
                 "build": json.loads((workspace / "build" / "kernels" / library / "build.json").read_text()),
                 "library": library, "output": str(tmp_path / "launch.jsonl"), "scratch": str(tmp_path / "scratch")}
    topology_files = leftover_files(Hydra.leftovers)    # what Hydra's proxies leave in /tmp when killed
    (tmp_path / "tmp").mkdir()
    child = subprocess.Popen([sys.executable, "-c", KILLED_LAUNCH, json.dumps(arguments)],
                             env={**os.environ, "TMPDIR": str(tmp_path / "tmp")},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, name = time.monotonic() + 120, None
    while time.monotonic() < deadline and not (name and len(kernel_processes(name)) == 2):
        name = next((c for c in vnodes.existing_clusters() if vnodes.owner_of(c) == child.pid), None)
        time.sleep(0.1)
    assert name and len(kernel_processes(name)) == 2, "the launch's ranks never ran on its virtual nodes"
    child.send_signal(signum)
    child.wait(timeout=60)
    # The launch's supervisor outlives it, however it was killed: it takes the ranks along and removes the
    # launch's scratch and temporary directories, holding the machine until it has (as the next launch finds it).
    with locks.machine("the test's next launch", wait_s=60):
        assert not kernel_processes(name)
        assert list((tmp_path / "scratch").iterdir()) == []
        assert list((tmp_path / "tmp").iterdir()) == []
    if signum == signal.SIGTERM:   # nor, killed mid-run, the topology files of its proxies
        assert leftover_files(Hydra.leftovers) <= topology_files
    if signum == signal.SIGKILL:
        assert name in vnodes.existing_clusters()
        vnodes.sweep()
    assert name not in vnodes.existing_clusters()
    assert not (tmp_path / "launch.jsonl").exists()    # an interrupted launch gives no data


# Both probes' client: the other node's server may not listen yet.
CONNECT = """
import socket, time
def connect(peer):
    for _ in range(1200):
        try:
            return socket.create_connection((peer, 7000))
        except ConnectionRefusedError:
            time.sleep(0.05)
    raise SystemExit(f"{peer} never listened on port 7000")
"""

# The link probes report the fastest of their readings: what the link itself adds. A slower one also
# waited for a process to get a core back, which a neighbour's load decides (a clean-clone run beside
# the Slurm and report tests read a 2 ms path delay as 3.5 ms in the median of 30 pings).
LINK_PROBE = CONNECT + """
import socket, sys, time
role, peer, pings = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "echo":
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("0.0.0.0", 7001)); udp.settimeout(3)
    # Room for every datagram (about 1 KiB of buffer each): with the default 208 KiB, a receiver that stalls
    # while they come (stopped for 1.5 s: 3084 of the link's 3276 arrived) drops them here, not on the link.
    udp.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)     # SO_RCVBUFFORCE (as root), past net.core.rmem_max
    # The sender starts once it is connected here, so after the datagrams' socket is bound, however long
    # this process took to start.
    connection, _ = socket.create_server(("0.0.0.0", 7000)).accept()
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while (message := connection.recv(64)):
        connection.sendall(message)
    received = 0
    try:
        while udp.recv(64) != b"end":
            received += 1
    except socket.timeout:
        pass
    print(received)
else:
    connection = connect(peer)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = [0.0] if not pings else []
    for _ in range(pings):
        start = time.perf_counter(); connection.sendall(b"x"); connection.recv(64)
        times.append((time.perf_counter() - start) / 2)
    connection.close()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(4000):
        udp.sendto(b"d", (peer, 7001)); time.sleep(0.0002)
    time.sleep(0.2)
    for _ in range(50):
        udp.sendto(b"end", (peer, 7001))
    print(min(times))
"""


def probe_link(network: dict, pings: int) -> tuple[float, int]:
    """(fastest 1-byte TCP half round trip of `pings`, datagrams of 4000 that arrived) between two virtual
    nodes."""
    with vnodes.virtual_cluster(2, network=network) as cluster:
        echo = subprocess.Popen(cluster.command_on("vnode1", [sys.executable, "-c", LINK_PROBE, "echo", "vnode0",
                                                              str(pings)]), stdout=subprocess.PIPE, text=True)
        done = subprocess.run(cluster.command_on("vnode0", [sys.executable, "-c", LINK_PROBE, "ping", "vnode1",
                                                            str(pings)]), capture_output=True, text=True, timeout=120)
        received = int(echo.communicate(timeout=30)[0])
    assert done.returncode == 0, done.stderr
    return float(done.stdout), received


BURST_PROBE = CONNECT + """
import json, socket, sys, time
role, peer, rounds, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
times = []
if role == "receive":
    connection, _ = socket.create_server(("0.0.0.0", 7000)).accept()
    for _ in range(rounds):
        first, left = None, size
        while left:
            left -= len(connection.recv(left))
            first = first or time.monotonic()      # one clock for every namespace of the host
        times.append(first)
        connection.sendall(b"k")
else:
    connection = connect(peer)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(rounds):
        time.sleep(0.2)        # idle: the connection starts each message from its initial window
        times.append(time.monotonic())
        connection.sendall(bytes(size))
        connection.recv(1)
print(json.dumps(times))
"""


@needs_vnodes
def test_the_first_segment_of_a_message_arrives_after_its_own_wire_time(can_make_vnodes):
    """A 64 KiB message over a 20 Mbit/s link: its first segment reaches the receiving program a segment's
    wire time (0.61 ms) and a few wake-ups after the send (1.0-1.25 ms measured), as on a real wire, not once
    the burst the sender's TCP handed its link as one frame has passed whole (with bursts passed whole:
    the whole message, 28 ms; ten segments would be 6 ms). A receiver acknowledges what it has, and the
    sender's next segments wait for those acknowledgements: with whole bursts, the pairs of six clean
    nodes read 20-40% apart."""
    network, size, rounds = {"rate": "20mbit", "mtu": 1500}, 1 << 16, 12
    segment_s = (1500 + 14) * 8 / netem.rate_bits_per_s(network["rate"])
    with vnodes.virtual_cluster(2, network=network) as cluster:
        receiver = subprocess.Popen(cluster.command_on("vnode1", [sys.executable, "-c", BURST_PROBE, "receive", "-",
                                                                  str(rounds), str(size)]),
                                    stdout=subprocess.PIPE, text=True)
        sender = subprocess.run(cluster.command_on("vnode0", [sys.executable, "-c", BURST_PROBE, "send", "vnode1",
                                                              str(rounds), str(size)]),
                                capture_output=True, text=True, timeout=120)
        arrived = json.loads(receiver.communicate(timeout=30)[0])
    assert sender.returncode == 0, sender.stderr
    first_segment = sorted(a - s for a, s in zip(arrived, json.loads(sender.stdout)))
    fastest = first_segment[0]
    print(f"first segment after {fastest * 1e3:.2f} ms (fastest of {rounds}; one segment's wire time "
          f"{segment_s * 1e3:.2f} ms): {[round(t * 1e3, 2) for t in first_segment]}")
    assert segment_s <= fastest < 4 * segment_s


@needs_vnodes
def test_a_planted_delay_and_loss_are_what_the_links_do(can_make_vnodes):
    """Each node's link holds every frame for its delay and drops its share of frames (netem's, or the
    wire process's where the kernel has no netem): a one-way trip crosses two links, the sender's and
    the receiver's, so a 1-byte TCP half round trip takes at least twice the delay, and of datagrams
    sent one way about (1 - loss)^2 arrive. (Two clusters, pings only without loss: a lost TCP segment
    waits for its retransmission, hundreds of milliseconds.)"""
    delay_s, loss = 2e-3, 10.0
    half_round_trip, all_arrived = probe_link({"rate": "100mbit", "mtu": 1500, "delay": "2ms"}, pings=30)
    _, received = probe_link({"rate": "100mbit", "mtu": 1500, "loss": loss}, pings=0)
    expected = (1 - loss / 100) ** 2 * 4000
    print(f"half round trip {half_round_trip * 1e3:.2f} ms (2 x {delay_s * 1e3:g} ms delay), {all_arrived} of "
          f"4000 datagrams without loss; with {loss:g}% loss {received} ({expected:.0f} expected)")
    assert 2 * delay_s <= half_round_trip < 2 * delay_s + 2e-3
    assert all_arrived == 4000
    # Binomial: 4000 datagrams, p = 0.81, standard deviation 25; five of them either way.
    assert abs(received - expected) < 5 * math.sqrt(4000 * 0.81 * 0.19), received


@needs_vnodes
def test_a_planted_path_delay_holds_what_two_nodes_send_each_other_and_nothing_else(can_make_vnodes):
    """A fault on the path between vnode0 and vnode1 (`link: [0, 1]`) holds each frame one sends the other
    for its delay: their 1-byte half round trip takes the delay, once each way's sender held it; vnode0 and
    vnode2 (through the same link of vnode0) are not held."""
    delay_s = 2e-3
    network = {"rate": "100mbit", "mtu": 1500}
    with vnodes.virtual_cluster(3, network=network, faults=[{"link": [0, 1], "delay": "2ms"}]) as cluster:
        half_round_trips = {}
        for peer in ("vnode1", "vnode2"):
            echo = subprocess.Popen(cluster.command_on(peer, [sys.executable, "-c", LINK_PROBE, "echo", "vnode0",
                                                              "30"]), stdout=subprocess.PIPE, text=True)
            done = subprocess.run(cluster.command_on("vnode0", [sys.executable, "-c", LINK_PROBE, "ping", peer,
                                                                "30"]), capture_output=True, text=True, timeout=120)
            echo.communicate(timeout=30)
            assert done.returncode == 0, done.stderr
            half_round_trips[peer] = float(done.stdout)
    print({peer: f"{t * 1e3:.2f} ms" for peer, t in half_round_trips.items()})
    assert delay_s <= half_round_trips["vnode1"] < delay_s + 1e-3
    assert half_round_trips["vnode2"] < delay_s / 4


CPU_GROUP_PROBE = """
import json, os, subprocess, sys
from commlens.launch import vnodes
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    refused = False
except PermissionError:
    refused = True
with vnodes.virtual_cluster(2, network={"rate": "20mbit", "mtu": 1500}) as cluster:
    links = {}
    for node in cluster.nodes:
        pids = subprocess.run(["ip", "netns", "pids", cluster.netns(node) + "-link"], capture_output=True,
                              text=True).stdout.split()
        links[node.hostname] = [(os.sched_getscheduler(int(pid)), os.sched_getparam(int(pid)).sched_priority)
                                for pid in pids]
print(json.dumps({"refused": refused, "recorded": cluster.link_priority, "links": links}))
"""


@needs_vnodes
def test_a_link_process_runs_at_a_real_time_priority_from_a_cpu_group_without_a_real_time_budget(can_make_vnodes):
    """A job runner or container may start commlens in a cpu cgroup of its own, which has no real-time
    time (cpu.rt_runtime_us 0): there the kernel refuses a real-time priority, and the links' processes
    would run at the ranks' priority (Open MPI between two nodes on 1 Gbit/s links then read 0.63 of the rate
    in 3 of 3 runs, MPICH 0.99). Each link's process still gets its priority, and the cluster records it."""
    hierarchy = vnodes.cgroup_v1_hierarchy("cpu")
    if hierarchy is None or not (hierarchy / "cpu.rt_runtime_us").exists():
        pytest.skip("no cgroup v1 cpu hierarchy with real-time group scheduling: nothing refuses the priority")
    if netem.shaper("namespaces") != "wire":
        pytest.skip("the links are netem, in the kernel: no link process")
    group = hierarchy / f"commlens-test-{os.getpid()}"
    group.mkdir()
    try:
        assert (group / "cpu.rt_runtime_us").read_text().strip() == "0"
        done = subprocess.run([sys.executable, "-c", CPU_GROUP_PROBE], capture_output=True, text=True, timeout=120,
                              preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
    finally:
        group.rmdir()
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    print(found)
    assert found["refused"]                  # the group does refuse it
    assert found["recorded"] == {"vnode0": "real-time", "vnode1": "real-time"}
    assert all(links == [[os.SCHED_FIFO, 10]] for links in found["links"].values()), found["links"]
