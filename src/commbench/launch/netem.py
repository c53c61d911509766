"""Emulated interconnect: links with a chosen MTU and a token-bucket (tbf) rate limit, so
that TCP between ranks on one host crosses a real packet network with known rate and
packet size, and what such a link delivers.

The links are the veth pairs of virtual nodes (commbench.launch.vnodes), or, for the loopback
emulation, the loopback of a private network namespace that all ranks share."""

from __future__ import annotations

import os
import re
import shlex
import subprocess

_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")
_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
# The token bucket holds this long's worth of traffic: enough for the limiter's timer to
# keep up with the rate, small enough that the idle reverse leg of a ping-pong cannot
# fill a burst that carries much of a large message faster than the rate.
_BUCKET_S = 1e-3


def rate_bits_per_s(rate: str) -> float:
    match = _RATE.match(rate)
    if not match:
        raise ValueError(f"not a tc rate: {rate!r} (e.g. 100mbit, 1gbit)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def tcp_payload_per_packet(mtu: int) -> int:
    """TCP payload of a full packet: the MTU less IPv4 (20) and TCP with timestamps (32)."""
    return mtu - 52


def expected_goodput_bytes_per_s(rate: str, mtu: int) -> float:
    """Bulk TCP goodput through the limiter: payload over what the limiter counts per packet
    (the MTU plus the 14-byte link header loopback carries)."""
    return rate_bits_per_s(rate) / 8 * tcp_payload_per_packet(mtu) / (mtu + 14)


def tbf_arguments(rate: str, mtu: int) -> list[str]:
    """What follows `tc qdisc add dev DEV root` for a token bucket of this rate on a link of this MTU."""
    burst = max(int(rate_bits_per_s(rate) / 8 * _BUCKET_S), 10 * mtu)
    return ["tbf", "rate", rate, "burst", str(burst), "latency", "100ms"]


def setup_commands(network: dict) -> str:
    """Shell commands, run inside the new namespace, that bring loopback up as the network."""
    mtu = int(network["mtu"])
    return (f"ip link set lo mtu {mtu} up && "
            f"tc qdisc add dev lo root {shlex.join(tbf_arguments(network['rate'], mtu))}")


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
