import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from commlens.launch import netem
from commlens.launch import vnodes
from commlens.launch.placement import Placement

from conftest import LIBRARIES, launch

pytestmark = pytest.mark.alone   # rates and delays of links: timed without a neighbour


def test_rates_and_expected_goodput():
    assert netem.rate_bits_per_s("1gbit") == 1e9
    assert netem.rate_bits_per_s("2.5mbit") == 2.5e6
    assert netem.tcp_payload_per_packet(1500) == 1448
    assert netem.expected_goodput_bytes_per_s("1gbit", 1500) == pytest.approx(125e6 * 1448 / 1514)
    with pytest.raises(ValueError, match="not a tc rate"):
        netem.rate_bits_per_s("1 Gbps")


def test_namespace_commands_set_mtu_and_the_links_shaper():
    argv = netem.wrap("mpiexec -n 2 k", {"rate": "100mbit", "mtu": 9000})
    assert argv[:2] == ["unshare", "--net"]
    script = argv[-1]
    assert "ip link set lo mtu 9000 up" in script
    shaper = netem.shaper("loopback")
    assert shaper in netem.QUEUEING_SHAPERS
    arguments = netem.link_arguments({'rate': '100mbit', 'mtu': 9000}, shaper)
    assert f"tc qdisc add dev lo root {' '.join(arguments)}" in script
    assert script.endswith("&& mpiexec -n 2 k")


def test_netem_serialises_at_the_rate_with_the_links_delay_and_loss():
    link = {"rate": "100mbit", "mtu": 1500, "delay": "50us", "loss": 0.5}
    assert netem.link_arguments(link, "netem") == ["netem", "limit", "10000", "rate", "100mbit", "delay", "50us",
                                                   "loss", "0.5%"]
    assert netem.switch_arguments({"rate": "1gbit"}, 1500, "netem") == ["netem", "limit", "10000", "rate", "1gbit"]
    assert netem.delay_seconds("1.5ms") == pytest.approx(1.5e-3) and netem.delay_seconds("50us") == pytest.approx(50e-6)
    with pytest.raises(ValueError, match="not a tc time"):
        netem.delay_seconds("50 us")


def test_without_netem_a_link_is_a_token_bucket_and_refuses_delay_and_loss():
    assert netem.link_arguments({"rate": "1gbit", "mtu": 1500}, "tbf") == \
        ["tbf", "rate", "1gbit", "burst", "125000", "limit", "15000000"]     # 1 ms of traffic; 10,000 packets
    assert netem.link_arguments({"rate": "10mbit", "mtu": 1500}, "tbf")[4] == "3000"   # or two packets
    with pytest.raises(netem.LinkError, match=r"network delay: 1ms, loss: 2: .*netem"):
        netem.link_arguments({"rate": "1gbit", "mtu": 1500, "delay": "1ms", "loss": 2}, "tbf")


def test_wire_bytes_follow_the_packet_model():
    assert netem.wire_bytes(1, 1500) == 67
    assert netem.wire_bytes(1448, 1500) == 1514 and netem.wire_bytes(1449, 1500) == 1449 + 2 * 66
    assert netem.wire_bytes(8948, 9000) == 9014


IDLE_PING_PONG = textwrap.dedent("""
    import socket, sys, time
    size, role = int(sys.argv[1]), sys.argv[2]
    def receive(connection):
        got = 0
        while got < size:
            try:
                got += len(connection.recv(size - got))
            except BlockingIOError:    # polled, as MPI does: no wake-up in the time
                pass
    if role == "echo":
        connection, _ = socket.create_server(("0.0.0.0", 7000)).accept()
    else:
        for _ in range(200):
            try:
                connection = socket.create_connection(("vnode1", 7000)); break
            except ConnectionRefusedError:
                time.sleep(0.05)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connection.setblocking(False)
    for _ in range(6):
        if role == "echo":
            receive(connection); connection.sendall(b"x" * size)
            continue
        time.sleep(1)                                # the link idles a second
        start = time.perf_counter()
        while time.perf_counter() - start < 0.01:    # awake again before the clock starts
            pass
        start = time.perf_counter()
        connection.sendall(b"x" * size); receive(connection)
        print((time.perf_counter() - start) / 2)
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="virtual nodes need root")
def test_a_small_message_after_an_idle_second_still_takes_the_rates_time():
    """A 1 KiB TCP ping-pong between two virtual nodes, each leg after the link idled a second: a
    link that serialises every packet (netem, or the wire process where the kernel has no netem) takes
    at least its wire bytes over the rate each way; a token bucket refilled by the pause would let it
    through at the veth's speed (measured with tbf: 55 us for the 87 us the rate needs at 100 Mbit/s)."""
    if reason := vnodes.unavailable_reason():
        pytest.skip(reason)
    size, network = 1024, {"rate": "10mbit", "mtu": 1500}
    with vnodes.virtual_cluster(2, network=network) as cluster:
        echo = subprocess.Popen(cluster.command_on("vnode1", [sys.executable, "-c", IDLE_PING_PONG, str(size), "echo"]))
        done = subprocess.run(cluster.command_on("vnode0", [sys.executable, "-c", IDLE_PING_PONG, str(size), "ping"]),
                              capture_output=True, text=True, timeout=120)
        echo.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    rate_time = netem.wire_bytes(size, 1500) * 8 / netem.rate_bits_per_s(network["rate"])
    ratios = [float(half_round_trip) / rate_time for half_round_trip in done.stdout.split()]
    print(f"1 KiB after an idle second, half round trip over the rate's time: {', '.join(f'{r:.2f}' for r in ratios)}")
    assert len(ratios) == 6 and min(ratios) >= 1.0, ratios


def median_time(result, size: int) -> float:
    return float(np.median(next(point.samples for point in result.points if point.size == size)))


@pytest.mark.mpi
@pytest.mark.parametrize("library,emulate", [(LIBRARIES[1], "namespaces"), (LIBRARIES[0], "namespaces"),
                                             (LIBRARIES[1], "loopback")])
def test_an_emulated_link_delivers_its_rate_less_headers(workspace, built, tmp_path, library, emulate):
    """1 Gbit/s with 1500-byte packets: 1448 payload bytes in every 1514 on the wire, 119.5 MB/s, on
    the links between virtual nodes as on the loopback of one namespace."""
    reason = vnodes.unavailable_reason() if emulate == "namespaces" else netem.unavailable_reason()
    if reason:
        pytest.skip(reason)
    network = {"rate": "1gbit", "mtu": 1500}
    size = 2**20
    result = launch(workspace, library, Placement("2N1P-1g", 2, 1, network, emulate=emulate),
                    ["stream.uni", "--sizes", f"1024,{size}", "--window", "8", "--min-samples", "3",
                     "--max-point-time", "2"], tmp_path)
    assert result.status == "ok", result.launch.get("console_tail")
    assert (result.launch["emulation"], result.launch["network"]) == (emulate, network)
    bandwidth = size / median_time(result, size)
    expected = netem.expected_goodput_bytes_per_s("1gbit", 1500)
    print(f"{library} on {emulate}: {bandwidth / 1e6:.1f} MB/s, expected {expected / 1e6:.1f} MB/s "
          f"(ratio {bandwidth / expected:.3f})")
    assert abs(bandwidth / expected - 1) < 0.10, f"{bandwidth / 1e6:.1f} MB/s against {expected / 1e6:.1f} MB/s"


@pytest.mark.mpi
def test_pairs_of_nodes_share_the_switch_rate(workspace, built, tmp_path):
    """Two pairs of virtual nodes stream at once, each over links of 100 Mbit/s: without a switch
    limit they move two links' worth; behind a 150 Mbit/s switch, which all their traffic
    crosses, together they move the switch's worth (less the acknowledgements that cross it too),
    more than one link could and less than two. (Rates this low keep four ranks on two cores
    from measuring the scheduler: at 200 and 300 Mbit/s the free links read 13% low here. MPICH: a launch
    of this kernel took 14 s with Open MPI, 7 s with MPICH.)"""
    reason = vnodes.unavailable_reason()
    if reason:
        pytest.skip(reason)
    link, switch, size = {"rate": "100mbit", "mtu": 1500}, {"rate": "150mbit"}, 2**19
    args = ["multipair.stream", "--sizes", str(size), "--window", "8", "--min-samples", "3", "--max-samples", "8",
            "--max-point-time", "4"]
    aggregate = {}
    for name, placement in (("free", Placement("4N1P", 4, 1, link)),
                            ("switched", Placement("4N1P-sw", 4, 1, link, switch=switch))):
        result = launch(workspace, LIBRARIES[0], placement, args, tmp_path)
        assert result.status == "ok", result.launch.get("console_tail")
        assert result.run["hosts"] == ["vnode0", "vnode1", "vnode2", "vnode3"]
        aggregate[name] = 2 * size / median_time(result, size)    # two pairs, each a message per sample time
    per_link = netem.expected_goodput_bytes_per_s(link["rate"], 1500)
    at_switch = netem.expected_goodput_bytes_per_s(switch["rate"], 1500)
    print(f"two pairs: {aggregate['free'] / 1e6:.1f} MB/s on free links (2 x {per_link / 1e6:.1f} expected), "
          f"{aggregate['switched'] / 1e6:.1f} MB/s behind the switch ({at_switch / 1e6:.1f} expected; "
          f"ratio {aggregate['switched'] / at_switch:.3f})")
    assert abs(aggregate["free"] / (2 * per_link) - 1) < 0.10
    assert 0.88 < aggregate["switched"] / at_switch < 1.03


@pytest.mark.mpi
def test_fan_in_and_out_read_the_middle_nodes_link_not_the_sum_of_the_others(workspace, built, tmp_path):
    """Three virtual nodes on 50 Mbit/s links: two ranks sending to rank 0 at once (fan.in), or rank 0 to
    both (fan.out), move one link's worth in all, the link of rank 0's node, which both share: half of what
    the two other links could carry. Each is timed to its own last message: the later of the two at the
    aggregate's half, the other sooner (TCP shares the link unevenly over a window: 3.0 and 4.6 MB/s here),
    neither above one link."""
    if reason := vnodes.unavailable_reason():
        pytest.skip(reason)
    link, size = {"rate": "50mbit", "mtu": 1500}, 2**17
    per_link = netem.expected_goodput_bytes_per_s(link["rate"], 1500)
    for kernel in ("fan.in", "fan.out"):
        result = launch(workspace, LIBRARIES[0], Placement("3N1P", 3, 1, link),
                        [kernel, "--sizes", str(size), "--window", "4", "-x", "1", "--min-samples", "3",
                         "--max-samples", "6", "--max-point-time", "3"], tmp_path)
        assert result.status == "ok", result.launch.get("console_tail")
        aggregate = size / median_time(result, size)
        point = next(point for point in result.points if point.size == size)
        times = point.pair_times_s[:, 1:, 0] if kernel == "fan.in" else point.pair_times_s[:, 0, 1:]
        own = size / np.median(times, axis=0)           # (sample, source, destination): seconds per message
        print(f"{kernel}: {aggregate / 1e6:.2f} MB/s in all ({per_link / 1e6:.2f} one link), each other rank "
              f"{', '.join(f'{b / 1e6:.2f}' for b in own)} MB/s")
        assert abs(aggregate / per_link - 1) < 0.10, kernel
        assert np.all(own < 1.05 * per_link), kernel
        assert abs(own.min() * 2 / aggregate - 1) < 0.10, kernel      # the later one ends with both windows


@pytest.mark.mpi
def test_a_bisection_reads_every_link_at_once_or_the_switch_they_share(workspace, built, tmp_path):
    """Four virtual nodes on 10 Mbit/s links, in pairs of random matchings, each pair exchanging at once: on
    free links the four together move four links' worth; behind a 20 Mbit/s switch, which all of it
    crosses, the switch's worth. Every sample's matching is a perfect one, and every rank is timed.

    Each is judged by its fastest sample, as NetPIPE judges a size by its fastest trial: what else runs can
    only add time. In some samples one of the eight directions reads 0.6-0.8 of its link, whatever the rate,
    the message size (8 KiB or 64 KiB) or the host's load, the others 0.89-0.98; in 3-7 of ten samples none does.
    The rate is low so that the two cores keep up with four links' processes and four ranks: at 25 Mbit/s
    the fastest of six samples read 0.83-0.85 of the links' worth in 3 of 6 runs whose links' processes ran
    at a normal priority and 0.895 in 1 of 2 with 2 ms of every 5 ms of each core taken by a process of
    higher priority (0.93-0.95 otherwise); at 10 Mbit/s the fastest of ten read 0.960-0.963 in each case."""
    if reason := vnodes.unavailable_reason():
        pytest.skip(reason)
    link, switch, size = {"rate": "10mbit", "mtu": 1500}, {"rate": "20mbit"}, 2**16
    args = ["bisection", "--sizes", str(size), "--window", "4", "-x", "1", "--min-samples", "4", "--max-samples", "10",
            "--max-point-time", "5"]
    expected = {"free": 4 * netem.expected_goodput_bytes_per_s(link["rate"], 1500),
                "switched": netem.expected_goodput_bytes_per_s(switch["rate"], 1500)}
    for name, placement in (("free", Placement("4N1P", 4, 1, link)),
                            ("switched", Placement("4N1P-sw", 4, 1, link, switch=switch))):
        result = launch(workspace, LIBRARIES[0], placement, args, tmp_path)
        assert result.status == "ok", result.launch.get("console_tail")
        point = next(point for point in result.points if point.size == size)
        for matrix in point.pair_times_s:          # each sample: four timed pairs, each rank's partner its partner's
            timed = np.isfinite(matrix)
            assert timed.sum() == 4 and (timed.sum(axis=0) == 1).all() and (timed == timed.T).all()
        totals = 4 * size / np.asarray(point.samples)
        aggregate = totals.max()
        print(f"bisection, {name}: {aggregate / 1e6:.2f} MB/s in all at best ({expected[name] / 1e6:.2f} expected), "
              f"samples {', '.join(f'{total / 1e6:.2f}' for total in totals)}; links' processes: "
              f"{result.launch.get('link_priority', 'netem')}")
        assert abs(aggregate / expected[name] - 1) < 0.10, name


@pytest.mark.mpi
def test_two_leaves_carry_a_pair_at_its_links_rate_within_a_leaf_and_at_the_uplinks_across(workspace, built,
                                                                                          tmp_path):
    """Four virtual nodes on 50 Mbit/s links, two to a leaf switch, the leaves joined through uplinks of
    20 Mbit/s (an oversubscribed fat tree in miniature). One pair at a time: a pair on one leaf reads its
    links' rate, a pair across the leaves the uplink's. A bisection: a matching within the leaves moves four
    links' worth, one across them two uplinks' worth (each way of the uplink, shared by the two pairs). A
    fan-in to vnode0: the two senders on the other leaf share its uplink and together move the uplink's worth
    (vnode0's own link has room for it and for its leaf mate's window beside it)."""
    if reason := vnodes.unavailable_reason():
        pytest.skip(reason)
    link, uplink, size = {"rate": "50mbit", "mtu": 1500}, {"rate": "20mbit"}, 2**16
    placement = Placement("4N1P-leaves", 4, 1, link, topology={"leaf_nodes": 2, "uplink": uplink})
    per_link, per_uplink = (netem.expected_goodput_bytes_per_s(rate, 1500) for rate in (link["rate"], uplink["rate"]))
    leaf = [0, 0, 1, 1]
    timing = ["--sizes", str(size), "--window", "4", "-x", "1", "--min-samples", "4", "--max-samples", "6",
              "--max-point-time", "4"]

    result = launch(workspace, LIBRARIES[0], placement, ["allpairs.isolated", *timing], tmp_path)
    assert result.status == "ok", result.launch.get("console_tail")
    point = next(point for point in result.points if point.size == size)
    # Each pair's fastest sample: no pair can beat its wire, so the fastest is what the link gives where the
    # host kept up (here the fastest read 0.972-1.006 of its rate, the median 0.966-1.005, the same with a
    # busy loop on each core beside the launch: the links' processes run at a real-time priority). A host that
    # loses its CPU stalls those too: CI's median read 0.76 of vnode0 -> vnode1's link, the host 1.45 times
    # slower after the failure by its fixed loop (tests/machine_share.py).
    bandwidth = size / np.min(point.pair_times_s, axis=0)     # (source, destination)
    for a, b in ((a, b) for a in range(4) for b in range(4) if a != b):
        expected = per_link if leaf[a] == leaf[b] else per_uplink
        print(f"vnode{a} -> vnode{b}: {bandwidth[a, b] / 1e6:.2f} MB/s ({expected / 1e6:.2f} expected)")
        assert abs(bandwidth[a, b] / expected - 1) < 0.10, (a, b)

    # Fourteen samples: in the matchings' sequence (a matching a batch, from the batch's number) any fourteen
    # in a row of its first 200 hold both matchings across the leaves (ten in a row miss one at 3 of the 200
    # places calibration may leave the samples to start at).
    result = launch(workspace, LIBRARIES[0], placement,
                    ["bisection", *timing, "--min-samples", "14", "--max-samples", "14"], tmp_path)
    assert result.status == "ok", result.launch.get("console_tail")
    point = next(point for point in result.points if point.size == size)
    # Which matchings the samples get depends on how many batches calibration ran: two in three cross
    # the leaves. Those across read the uplinks' worth, the faster of the two matchings across by its
    # median: one matching of a launch can read 13-15% less in every sample (rank 0 with 3 at 0.85-0.90
    # of the uplinks, with 2 at 0.97-0.98, in one launch of four here; the other launches both at
    # 0.96-0.98; with 9000-byte frames the low one was rank 0 with 2), the work of eight ranks' and links'
    # processes on two cores, not the uplinks'; a sample can read above the uplinks when the pairs start apart.
    # Those within are not held to the uplinks: four links' worth would be five times what crosses them,
    # and with four ranks and four links' processes on two cores they read 20.0-22.2 of 23.9 MB/s (a link's
    # rate is the free bisection's test above, at 25 Mbit/s).
    within, across = [], {}     # aggregate rates: of the samples within the leaves; across, by rank 0's partner
    for sample, matrix in zip(point.samples, point.pair_times_s):
        partner = int(np.flatnonzero(np.isfinite(matrix[:, 0]))[0])     # the sample's matching: rank 0's partner
        kind = "within" if leaf[partner] == leaf[0] else "across"
        (within if kind == "within" else across.setdefault(partner, [])).append(4 * size / sample)
        print(f"bisection, rank 0 with {partner} ({kind}): {4 * size / sample / 1e6:.2f} MB/s "
              f"({(4 * per_link if kind == 'within' else 2 * per_uplink) / 1e6:.2f} expected)")
    assert across, "no matching across the leaves drawn"
    medians = {partner: np.median(rates) / (2 * per_uplink) for partner, rates in across.items()}
    # The faster matching carries the uplinks' worth; neither carries more (the uplinks cap both).
    assert abs(max(medians.values()) - 1) < 0.10, medians
    if within:
        assert np.median(within) > 3 * 2 * per_uplink, within

    result = launch(workspace, LIBRARIES[0], placement, ["fan.in", *timing], tmp_path)
    assert result.status == "ok", result.launch.get("console_tail")
    point = next(point for point in result.points if point.size == size)
    finish = np.median(point.pair_times_s[:, 1:, 0], axis=0)    # ranks 1-3: each window's end, per message
    across = 2 * size / finish[1:].max()                        # ranks 2 and 3, through the uplink
    print(f"fan-in to vnode0: vnode1 {size / finish[0] / 1e6:.2f} MB/s, vnode2 and vnode3 "
          f"{across / 1e6:.2f} MB/s together ({per_uplink / 1e6:.2f} expected)")
    assert abs(across / per_uplink - 1) < 0.10
    assert finish[0] < finish[1:].min()        # the leaf mate's window is not held behind the uplink
