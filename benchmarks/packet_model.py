"""`make validate`: whether the emulated links follow the packet model, measured.

A ping-pong (pingpong.send) over two virtual nodes, on a fine grid of sizes, for MTUs 1500 and 9000
at 100 Mbit/s and 1 Gbit/s, on MPICH and Open MPI. On a link that serialises every packet, time
against size steps up wherever a message needs one packet more: every MTU - 52 bytes of TCP payload
(the period), by the packet's headers on the wire, 66 bytes, over the rate (the step height).
commlens's packet-boundary detector (commlens.analysis.anomalies) finds the period and the step;
the table gives true against found, and the exit status is 1 unless both are within 10% everywhere.
Beside them, the time per byte the curve rises (a line through every size) against the packet model's,
the rate with each packet's headers: what serialising at the rate gives whether or not the steps are
resolved. The libraries' environments and kernel builds are the workspace's (default: this checkout's build/).
Run: .venv/bin/python benchmarks/packet_model.py [--workspace DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from commlens.analysis.anomalies import detect
from commlens.data.samples import launches_cube
from commlens.io.raw import read_raw
from commlens.launch import netem
from commlens.launch.placement import Placement
from commlens.launch.run import run_launch
from commlens.launch.supervision import stop_when_told

REPO = Path(__file__).resolve().parent.parent
LIBRARIES = ("mpich-5.0.2", "openmpi-5.0.11")
MTUS = (1500, 9000)
RATES = ("100mbit", "1gbit")
PACKETS = 5          # sizes up to five packets' payload
POINTS_PER_PACKET = 24
TOLERANCE = 0.10


def measure(workspace: Path, library: str, network: dict, sizes: list[int], launches: int, scratch: Path):
    """times (n_sizes, n_launches, n_samples), each launch in its own shuffled order of sizes."""
    installation = json.loads((workspace / "build" / "envs" / library / "library.json").read_text())
    build = json.loads((workspace / "build" / "kernels" / library / "build.json").read_text())
    per_launch = []
    for number in range(launches):
        output = scratch / f"{library}-{network['rate']}-{network['mtu']}-{number}.jsonl"
        args = ["pingpong.send", "--sizes", ",".join(map(str, sizes)), "--shuffle", str(number + 1),
                "--min-samples", "5", "--max-samples", "30", "--max-point-time", "0.3"]
        with open(scratch / "console.log", "a") as log:
            run_launch(installation=installation, build=build, kernel="pingpong.send", kernel_args=args,
                       placement=Placement("2N1P", 2, 1, network, emulate="namespaces"), library=library,
                       launch=number, output=output, timeout_s=600, log=log)
        result = read_raw(output)
        if result.status != "ok":
            raise RuntimeError(f"{library} at {network}: {result.status}: {result.launch.get('reason', '')}")
        per_launch.append({point.size: point.samples for point in result.points})
    return launches_cube(per_launch, sizes)


def main() -> int:
    # SIGTERM (or the end of what started this) stops the launch under way, which then removes what it made:
    # killed as it waited for the machine, a launch of this script left its scratch folder in /tmp.
    stop_when_told()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", type=Path, default=REPO, help="where build/ holds the environments and kernels")
    parser.add_argument("--launches", type=int, default=2)
    options = parser.parse_args()
    print(f"Packet model over two virtual nodes, links shaped by {netem.shaper('namespaces')}: payload period (B), "
          f"step height (us) and time per byte (ns), true -> found (error); pass within {TOLERANCE:.0%}")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="commlens-packet-model-") as scratch:
        for mtu in MTUS:
            payload = netem.tcp_payload_per_packet(mtu)
            step = max(1, payload // POINTS_PER_PACKET)
            sizes = list(range(step, PACKETS * payload + step, step))
            for rate in RATES:
                height = (netem.wire_bytes(payload + 1, mtu) - netem.wire_bytes(payload, mtu) - 1) * 8 / \
                    netem.rate_bits_per_s(rate)
                for library in LIBRARIES:
                    times = measure(options.workspace, library, {"rate": rate, "mtu": mtu}, sizes, options.launches,
                                    Path(scratch))
                    found = detect(sizes, times)
                    steps = found[found["kind"] == "packet_steps"]
                    per_byte = (mtu + 14) / payload * 8 / netem.rate_bits_per_s(rate)
                    slope = np.polyfit(sizes, np.nanmedian(np.asarray(times).reshape(len(sizes), -1), axis=1), 1)[0]
                    rise = f"; per byte {per_byte * 1e9:.2f} -> {slope * 1e9:.2f} ({slope / per_byte - 1:+.1%})"
                    if steps.empty:
                        failures += 1
                        print(f"  MTU {mtu:5d} {rate:>7s} {library:15s}: period {payload} -> none found; "
                              f"step {height * 1e6:.2f} -> none{rise}  FAIL")
                        continue
                    period, magnitude = float(steps.iloc[0]["period"]), float(steps.iloc[0]["magnitude"])
                    errors = (period / payload - 1, magnitude / height - 1)
                    ok = all(abs(error) <= TOLERANCE for error in errors)
                    failures += not ok
                    print(f"  MTU {mtu:5d} {rate:>7s} {library:15s}: period {payload} -> {period:.0f} "
                          f"({errors[0]:+.1%}); step {height * 1e6:.2f} -> {magnitude * 1e6:.2f} ({errors[1]:+.1%})"
                          f"  {'ok' if ok else 'FAIL'}")
    print(f"{failures} of {len(MTUS) * len(RATES) * len(LIBRARIES)} cases outside {TOLERANCE:.0%}" if failures
          else "every case within 10%")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
