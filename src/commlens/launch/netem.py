"""Emulated interconnect: links with a chosen MTU, rate and, for planting faults, delay and loss, so
that TCP between ranks on one host crosses a real packet network with known rate and packet size,
and what such a link delivers.

The links are those of virtual nodes (commlens.launch.vnodes), or, for the loopback emulation, the
loopback of a private network namespace that all ranks share.

What makes a link (the link's "shaper"):
- netem with `rate`: netem sends each packet at the later of its arrival and the previous packet's
  departure, plus its own length over the rate, so every packet, the first after a pause included,
  waits its own time on the wire, as on a wire; netem also gives the link its `delay` and `loss`.
- wire, a virtual node's link where the kernel has no netem (CONFIG_NET_SCH_NETEM unset): a process
  of its own between the node and the switch (commlens.launch.wire) serialises every frame the same
  way, each direction on its own as on a full-duplex link, and gives the link its delay and loss.
- tbf, the loopback emulation's link where the kernel has no netem: a token bucket lets through
  at once whatever its bucket holds. Measured over two virtual nodes at 100 Mbit/s, MTU 1500: with a
  bucket of 1 ms or 10 MTUs a 1 KiB TCP ping-pong after an idle second took 55 us, less than the
  87 us its 1090 wire bytes need; with a bucket of one MTU (the smallest tbf takes) the first packet
  after a pause still passes at once and a ping-pong's times depend on what the other direction left
  in the bucket (1.07 to 1.28 times the rate's time, no clean steps), and a bucket of two packets kept
  86 of 119.5 MB/s at 1 Gbit/s. So tbf, with its larger bucket (1 ms of traffic, at least two packets),
  serves bulk rates (within 1% of the rate less headers) but not small messages; the shaper a launch
  used is recorded. Without netem a virtual nodes' switch and a leaf's uplink are tbf too.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess

_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")
_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_TIME = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
# tbf's bucket holds this long's worth of traffic: enough for the limiter's timer to keep up with
# the rate, small enough that the idle reverse leg of a ping-pong cannot fill a burst that carries
# much of a large message faster than the rate.
_BUCKET_S = 1e-3
# And at least this many packets, the fewest that keep a slow link's rate: what a full bucket passes at
# once after a pause. Ten, at 14 Mbit/s: every pair of eight nodes on two leaves timed one at a time,
# the first to cross an uplink after pairs within the leaves read 1.08 times the uplink's other pairs
# (1.83 MB/s against 1.70; its goodput 1.67); two: 1.00 (1.66 against 1.67).
_BUCKET_PACKETS = 2
# A link's or switch's queue holds this many packets at most (netem's default, 1000, is 12 ms at
# 1 Gbit/s with 1500-byte packets): a window of TCP segments waiting behind a slow link must not be
# dropped there, as an HPC fabric's flow control drops none. tbf's limit is in bytes: as many MTUs.
_QUEUE_PACKETS = 10000
SHAPERS = ("netem", "wire", "tbf")
QUEUEING_SHAPERS = ("netem", "tbf")   # the shapers that are a queueing discipline (tc)


class LinkError(ValueError):
    """A link this host cannot make (delay or loss without netem); the message says why."""


def rate_bits_per_s(rate: str) -> float:
    match = _RATE.match(rate)
    if not match:
        raise ValueError(f"not a tc rate: {rate!r} (e.g. 100mbit, 1gbit)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def delay_seconds(delay: str) -> float:
    """A link delay as the campaign writes it (tc's form: 50us, 1.5ms, 1s) in seconds."""
    match = _TIME.match(delay)
    if not match:
        raise ValueError(f"not a tc time: {delay!r} (e.g. 50us, 1.5ms)")
    return float(match.group(1)) * _TIME_UNITS[match.group(2)]


def tcp_payload_per_packet(mtu: int) -> int:
    """TCP payload of a full packet: the MTU less IPv4 (20) and TCP with timestamps (32)."""
    return mtu - 52


def wire_bytes(size: int, mtu: int) -> int:
    """What a TCP message of `size` bytes puts on a link: its payload, and per packet the IP and TCP
    headers and the 14-byte link header (the packet model of a link: each packet takes its wire
    bytes over the rate, so time against size has a step of 66 B / rate every MTU - 52 bytes)."""
    packets = max(1, -(-size // tcp_payload_per_packet(mtu)))
    return size + packets * (mtu + 14 - tcp_payload_per_packet(mtu))


def expected_goodput_bytes_per_s(rate: str, mtu: int) -> float:
    """Bulk TCP goodput through the link: payload over what the shaper counts per packet (the MTU
    plus the 14-byte link header loopback carries)."""
    return rate_bits_per_s(rate) / 8 * tcp_payload_per_packet(mtu) / (mtu + 14)


def tbf_arguments(rate: str, mtu: int) -> list[str]:
    """What follows `tc qdisc add dev DEV root` for a token bucket of this rate on a link of this MTU."""
    burst = max(int(rate_bits_per_s(rate) / 8 * _BUCKET_S), _BUCKET_PACKETS * mtu)
    return ["tbf", "rate", rate, "burst", str(burst), "limit", str(_QUEUE_PACKETS * mtu)]


def netem_arguments(rate: str, delay: str | None = None, loss: float | None = None) -> list[str]:
    """What follows `tc qdisc add dev DEV root` for a netem link: every packet serialised at `rate`,
    then held `delay`, and dropped with probability `loss` percent."""
    arguments = ["netem", "limit", str(_QUEUE_PACKETS), "rate", rate]
    if delay:
        arguments += ["delay", delay]
    if loss:
        arguments += ["loss", f"{loss:g}%"]
    return arguments


@functools.cache
def has_netem() -> bool:
    """Whether this kernel has netem: a netem qdisc is added to the loopback of a throw-away namespace."""
    probe = subprocess.run([*namespace_prefix(), "tc", "qdisc", "add", "dev", "lo", "root",
                            *netem_arguments("1gbit")], capture_output=True, text=True)
    return probe.returncode == 0


def shaper(emulation: str = "namespaces", faults: list | None = None) -> str:
    """What makes this host's links for an emulation (namespaces: virtual nodes; loopback): netem where
    the kernel has it, else a virtual node's wire process, else (the loopback) tbf. A fault planted on the
    path between two nodes (`link:`) is made by the wire processes alone, which tell frames by where they go."""
    if emulation == "namespaces" and any("link" in fault for fault in faults or ()):
        return "wire"
    if has_netem():
        return "netem"
    return "wire" if emulation == "namespaces" else "tbf"


def link_arguments(network: dict, shaper_name: str) -> list[str]:
    """What follows `tc qdisc add dev DEV root` for the campaign's `network:` block (rate, mtu, and
    optionally delay and loss) with a queueing shaper. Delay and loss need netem: with tbf, LinkError
    says so."""
    if shaper_name == "netem":
        return netem_arguments(network["rate"], network.get("delay"), network.get("loss"))
    asked = [f"{key}: {network[key]}" for key in ("delay", "loss") if network.get(key)]
    if asked:
        raise LinkError(f"network {', '.join(asked)}: a link's delay and loss need the kernel's netem "
                        "queueing discipline (sch_netem, CONFIG_NET_SCH_NETEM), which this host lacks, or "
                        "virtual nodes (emulate: namespaces), whose links make them without it")
    return tbf_arguments(network["rate"], int(network["mtu"]))


def switch_shaper() -> str:
    """What makes the virtual nodes' shared switch (all traffic into the bridge passes one device, so it
    is a queueing discipline whatever makes the links): netem where the kernel has it, else tbf."""
    return "netem" if has_netem() else "tbf"


def switch_arguments(switch: dict, mtu: int, shaper_name: str | None = None) -> list[str]:
    """The shared switch's queueing discipline: its rate, as a link's."""
    return link_arguments({"rate": switch["rate"], "mtu": mtu}, shaper_name or switch_shaper())


def setup_commands(network: dict) -> str:
    """Shell commands, run inside the new namespace, that bring loopback up as the network."""
    mtu = int(network["mtu"])
    return (f"ip link set lo mtu {mtu} up && "
            f"tc qdisc add dev lo root {shlex.join(link_arguments(network, shaper('loopback')))}")


def namespace_prefix() -> list[str]:
    """How to enter a new network namespace: directly as root, else through a user namespace."""
    return ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--net", "--map-root-user"]


def wrap(command: str, network: dict) -> list[str]:
    """argv that runs the shell `command` on the emulated network."""
    return [*namespace_prefix(), "bash", "-c", f"{setup_commands(network)} && {command}"]


def unavailable_reason() -> str | None:
    """None if this machine can build an emulated network, else why not (for messages and skips)."""
    probe = subprocess.run(wrap("true", {"rate": "1gbit", "mtu": 1500}), capture_output=True, text=True)
    if probe.returncode == 0:
        return None
    return ("an emulated network needs a private network namespace with tc (root, or unprivileged "
            f"user namespaces, and iproute2): {(probe.stderr or probe.stdout).strip()[:300]}")
