"""The anomaly detector on real curves of this machine where the answer is known (make validate runs the
synthetic half, benchmarks/ground_truth.py; this is the real one, run by hand: it takes minutes).

    python benchmarks/real_findings.py [switch] [packets] [--runs N]

switch: Open MPI 5.0.11 on one node with its shared-memory eager limit moved by its MCA parameter
(btl_sm_eager_limit) to 6 KiB and to 12 KiB (the default is 4 KiB; above 16 KiB the eager path here is no
faster than the rendezvous, and no switch shows), ping-pong on a 512 B grid from the
limit less 6 KiB to the limit plus 6 KiB, two launches in a shuffled order each. Right: a protocol switch
(or regime change) within one grid step of the limit, and no other structural finding.

packets: two virtual nodes whose links run at 50 Mbit/s (serialised frame by frame by the project's wire
process: 50 Mbit/s leaves the machine's per-frame cost well under a frame's time) with an MTU of 900 and
of 1200 (7 to 9 packet boundaries under 8 KiB, 6.6 to 9 sizes of the grid a period: with an MTU of 2000 the
four boundaries under 8 KiB must each step three noise widths, and here did in 2 of 5 runs of three
launches), ping-pong on a 128 B grid from 128 B to 8 KiB, with one launch and with three. Every MTU - 52 B
of TCP payload a message needs one frame more, a step of 66 B of headers at the rate (10.6 us) on top of
the wire time of the payload. Right: packet steps with a period within one grid step of the payload, and no
other structural finding.

Each run is fresh (new launches, a new shuffle); the table gives each run and the share that was right.
Launches in two modes are shown beside, not counted against a run: they are the host's, and said.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from commlens.analysis.anomalies import detect_launches
from commlens.data.samples import launches_cube
from commlens.io.raw import read_raw
from commlens.launch import netem
from commlens.launch.placement import Placement
from commlens.launch.run import run_launch
from commlens.launch.supervision import stop_when_told
from commlens.units import format_size

REPO = Path(__file__).resolve().parent.parent
KiB = 1024
STRUCTURAL = ("protocol_switch", "regime_change", "packet_steps", "alignment", "spike")


def measure(library: str, placement: Placement, sizes: list[int], launches: int, scratch: Path, seed: int,
            env: dict | None = None, min_samples: int = 5, max_samples: int = 30) -> np.ndarray:
    """times (n_sizes, n_launches, n_samples) of `launches` fresh launches, each in its own shuffled order."""
    installation = json.loads((REPO / "build" / "envs" / library / "library.json").read_text())
    build = json.loads((REPO / "build" / "kernels" / library / "build.json").read_text())
    per_launch = []
    for number in range(launches):
        output = scratch / f"{library}-{placement.name}-{seed}-{number}.jsonl"
        args = ["pingpong.send", "--sizes", ",".join(map(str, sizes)), "--shuffle", str(seed * 10 + number + 1),
                "--min-samples", str(min_samples), "--max-samples", str(max_samples), "--max-point-time", "0.3"]
        with open(scratch / "console.log", "a") as log:
            run_launch(installation=installation, build=build, kernel="pingpong.send", kernel_args=args,
                       placement=placement, library=library, launch=number, output=output, timeout_s=900, log=log,
                       library_env=env)
        result = read_raw(output)
        if result.status != "ok":
            raise RuntimeError(f"{library} {placement.name}: {result.status}: {result.launch.get('reason', '')}")
        per_launch.append({point.size: point.samples for point in result.points})
    return launches_cube(per_launch, sizes)


def described(table) -> str:
    parts = []
    for _, row in table.iterrows():
        what = f"{row['kind'].replace('_', ' ')} at {format_size(row['size'])}"
        if row["kind"] == "packet_steps":
            what += f" every {row['period']:.0f} B"
        if np.isfinite(row.get("launches", np.nan)) and np.isfinite(row.get("of_launches", np.nan)):
            what += f" ({int(row['launches'])} of {int(row['of_launches'])})"
        if row["kind"] == "launch_modes":
            what = f"modes: {row['note']}"
        parts.append(what)
    return "; ".join(parts) or "nothing"


def switch(runs: int, scratch: Path) -> None:
    print("Switch: Open MPI 5.0.11 1N2P, btl_sm_eager_limit moved, 512 B grid, 2 launches a run")
    for limit in (6 * KiB, 12 * KiB):
        step = 512
        sizes = list(range(limit - 6 * KiB, limit + 6 * KiB + 1, step))
        right = 0
        for run in range(runs):
            times = measure("openmpi-5.0.11", Placement("1N2P", 1, 2), sizes, 2, scratch, run,
                            env={"OMPI_MCA_btl": "^ofi", "OMPI_MCA_btl_sm_eager_limit": str(limit)})
            table = detect_launches(np.array(sizes), times)
            structural = table[table["kind"].isin(STRUCTURAL)]
            found = structural[structural["kind"].isin(("protocol_switch", "regime_change"))
                               & ((structural["size"] - limit).abs() <= step)]
            ok = len(found) == 1 and len(structural) == 1
            right += ok
            print(f"  limit {format_size(limit)} run {run}: {'right' if ok else 'WRONG'}: {described(table)}",
                  flush=True)
        print(f"  limit {format_size(limit)}: right in {right} of {runs} runs")


def packets(runs: int, scratch: Path) -> None:
    rate = "50mbit"
    print(f"Packets: two virtual nodes, links {rate} (wire), 128 B grid to 8 KiB, MPICH 5.0.2")
    for mtu in (900, 1200):
        payload = netem.tcp_payload_per_packet(mtu)
        sizes = list(range(128, 8 * KiB + 1, 128))
        for launches in (1, 3):
            right = 0
            for run in range(runs):
                placement = Placement("2N1P", 2, 1, {"rate": rate, "mtu": mtu}, emulate="namespaces")
                times = measure("mpich-5.0.2", placement, sizes, launches, scratch, 100 + run, min_samples=20,
                                max_samples=40)
                table = detect_launches(np.array(sizes), times)
                structural = table[table["kind"].isin(STRUCTURAL)]
                steps = structural[(structural["kind"] == "packet_steps")
                                   & ((structural["period"] - payload).abs() <= 128)]
                ok = len(steps) == 1 and len(structural) == 1
                right += ok
                print(f"  MTU {mtu} (payload {payload} B), {launches} launch{'es' if launches > 1 else ''}, run {run}: "
                      f"{'right' if ok else 'WRONG'}: {described(table)}", flush=True)
            print(f"  MTU {mtu}, {launches} launches: right in {right} of {runs} runs")


def main() -> int:
    stop_when_told()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", nargs="*", help="switch, packets (default: both)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    parts = args.parts or ["switch", "packets"]
    with tempfile.TemporaryDirectory(prefix="commlens-real-findings-") as scratch:
        if "switch" in parts:
            switch(args.runs, Path(scratch))
        if "packets" in parts:
            packets(args.runs, Path(scratch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
