"""`make bench`: what the harness costs and how it compares with a fixed-iteration loop.

For each library of the default campaign, on-node (1N2P), alternating rounds of
commbench-kernels and an OSU-style reference loop built with the same mpicc:
  (a) harness overhead (an empty timed sample) as a fraction of the smallest latency,
      raw and per message (a sample times many messages);
  (b) small-message latency, commbench over the reference loop;
  (c) wall time to cover 1 B .. 4 MiB: commbench to its precision target against the
      reference's fixed 10000/1000 iterations.
Timings on a shared machine are noisy: read the ratios, not the absolute values.
"""

from __future__ import annotations

import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from commbench.campaign import load_campaign
from commbench.launcher import Placement, plan_launch
from commbench.libraries import in_environment

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 3
SMALL = (1, 8)


def sh(env_dir, command: list[str], env: dict) -> tuple[str, float]:
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    t0 = time.monotonic()
    proc = subprocess.run(in_environment(env_dir, f"{exports} {shlex.join(command)}"),
                          capture_output=True, text=True, check=True)
    return proc.stdout, time.monotonic() - t0


def main(campaign_file: str) -> int:
    campaign = load_campaign(campaign_file)
    placement = Placement("1N2P", 1, 2)
    for library in campaign.libraries:
        mpi = campaign.mpi_of(library)
        record = json.loads((REPO / "build" / "envs" / mpi / "library.json").read_text())
        env_dir, build = record["env_dir"], REPO / "build" / "kernels" / mpi
        reference = build / "reference-pingpong"
        subprocess.run(in_environment(env_dir, f"mpicc -O2 -Wall -Wextra -Werror -o {reference} "
                                               f"{REPO / 'benchmarks' / 'reference_pingpong.c'}"), check=True)
        rows = {"overhead": [], "amortised": [], "ratio": [], "wall_cb": [], "launch_cb": [], "wall_ref": []}
        for round_ in range(ROUNDS):
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "run.jsonl"
                plan = plan_launch(record["family"], placement, str(build / "commbench-kernels"),
                                   ["pingpong.send", "-m", "1:4194304"], str(out))
                _, wall_cb = sh(env_dir, plan.command, plan.env)
                lines = [json.loads(line) for line in out.read_text().splitlines()]
            run, points, end = lines[0], {p["size"]: p for p in lines[1:-1]}, lines[-1]
            mean = {s: statistics.fmean(p["samples"]) for s, p in points.items()}
            smallest = min(mean, key=mean.get)
            overhead = run["harness_overhead_s"]
            rows["overhead"].append(overhead / mean[smallest])
            rows["amortised"].append(overhead / (points[smallest]["iters_per_sample"] * 2) / mean[smallest])

            ref_plan = plan_launch(record["family"], placement, str(reference), ["1:4194304"], "")
            stdout, _ = sh(env_dir, ref_plan.command[:-2], ref_plan.env)  # the reference takes no -o
            ref = [json.loads(line) for line in stdout.splitlines()]
            ref_latency = {r["size"]: r["latency_s"] for r in ref if "size" in r}
            rows["ratio"].append(statistics.fmean(mean[s] / ref_latency[s] for s in SMALL))
            rows["wall_cb"].append(end["elapsed_s"])
            rows["launch_cb"].append(wall_cb)
            rows["wall_ref"].append(next(r["wall_s"] for r in ref if "wall_s" in r))
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{library} (on-node, median of {ROUNDS} alternating rounds)")
        print(f"  (a) harness overhead / smallest latency: {med['overhead']:.2%} per sample, "
              f"{med['amortised']:.4%} per message")
        print(f"  (b) latency at {', '.join(map(str, SMALL))} B, commbench / reference loop: {med['ratio']:.3f}")
        print(f"  (c) time to measure 1 B..4 MiB: commbench {med['wall_cb']:.2f} s to 1% rse, reference "
              f"{med['wall_ref']:.2f} s at fixed iterations; ratio {med['wall_cb'] / med['wall_ref']:.2f} "
              f"(whole commbench launch with mpiexec start-up: {med['launch_cb']:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else str(REPO / "config" / "campaigns" / "quick.yaml")))
