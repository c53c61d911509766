"""`make bench`: what the harness costs and how it compares with a fixed-iteration loop.

For each library of the default campaign, on-node (1N2P), against OSU-style reference
loops (benchmarks/reference_loops.c) built with the same mpicc:
  (a) harness overhead (an empty timed sample) as a fraction of the smallest latency:
      its share of the latency reported (a sample times many messages, and lasts at
      least 100 times the overhead), and an empty sample against one message alone;
  (b) small-message latency, commlens over the reference loop, alternating in the same
      launch (the reference program calls commlens through libcommlens-kernels.so):
      here a launch's own state moves MPICH's and Open MPI's small-message latency by
      tens of per cent from one launch to the next, the same for both programs, which
      separate launches would mistake for a difference between them;
  (c) wall time to cover 1 B .. 4 MiB: commlens to its precision target against the
      reference's fixed 10000/1000 iterations, each in launches of its own, alternating;
  (d) bandwidth at 1 MiB and 4 MiB, commlens's stream.uni (window of 64 on one buffer, its
      default) over an osu_bw-style loop, alternating in the same launch as (b).
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

from commlens.campaign import load_campaign
from commlens.launch.placement import Placement
from commlens.launch.plan import plan_launch
from commlens.launch.libraries import in_environment

REPO = Path(__file__).resolve().parents[1]
LAUNCHES = 3          # for (b): launches, each alternating ROUNDS times
ROUNDS = 5
SWEEPS = 3            # for (a) and (c): alternating launches of each program
SMALL = (1, 8)
LARGE = (2**20, 4 * 2**20)


def sh(env_dir, command: list[str], env: dict) -> tuple[str, float]:
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    t0 = time.monotonic()
    proc = subprocess.run(in_environment(env_dir, f"{exports} {shlex.join(command)}"),
                          capture_output=True, text=True, check=True)
    return proc.stdout, time.monotonic() - t0


def build_reference(env_dir: str, build: Path) -> Path:
    reference = build / "reference-loops"
    subprocess.run(in_environment(env_dir, f"mpicc -O2 -Wall -Wextra -Werror -I {REPO / 'kernels' / 'harness'} "
                                           f"-o {reference} {REPO / 'benchmarks' / 'reference_loops.c'} "
                                           f"-L {build} -lcommlens-kernels -Wl,-rpath,{build}"), check=True)
    return reference


def run_reference(library: dict, placement, reference: Path, args: list[str]) -> list[dict]:
    """The reference program under commlens's own launch plan (binding, transports), with its
    own arguments in place of the kernel options the plan adds."""
    env_dir = library["env_dir"]
    plan = plan_launch(library, placement, str(reference), [], "")
    command = plan.command[:plan.command.index(str(reference)) + 1] + args
    stdout, _ = sh(env_dir, command, plan.env)
    return [json.loads(line) for line in stdout.splitlines()]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def alternating_ratios(library: dict, placement, reference: Path, mode: str, sizes: tuple[int, ...]) -> list[float]:
    """commlens over the reference loop at `sizes`, per round of each launch: mean latency over
    the loop's (mode latency), or bandwidth (size / mean time per message) over the loop's."""
    ratios = []
    for _ in range(LAUNCHES):
        with tempfile.TemporaryDirectory() as tmp:
            records = run_reference(library, placement, reference,
                                    [mode, f"{min(sizes)}:{max(sizes)}", str(ROUNDS), f"{tmp}/round"])
            key = "latency_s" if mode == "latency" else "bandwidth_Bps"
            loop = {(r["round"], r["size"]): r[key] for r in records}
            for round_ in range(ROUNDS):
                points = {p["size"]: p for p in read_jsonl(Path(tmp) / f"round{round_}.jsonl")[1:-1]}
                mean = {s: statistics.fmean(points[s]["samples"]) for s in sizes}
                ratios.append(statistics.fmean(
                    mean[s] / loop[round_, s] if mode == "latency" else s / mean[s] / loop[round_, s] for s in sizes))
    return ratios


def main(campaign_file: str) -> int:
    campaign = load_campaign(campaign_file)
    placement = Placement("1N2P", 1, 2)
    for library in campaign.libraries:
        mpi = campaign.mpi_of(library)
        record = json.loads((REPO / "build" / "envs" / mpi / "library.json").read_text())
        env_dir, build = record["env_dir"], REPO / "build" / "kernels" / mpi
        reference = build_reference(env_dir, build)
        rows = {"overhead": [], "amortised": [], "wall_cb": [], "launch_cb": [], "wall_ref": []}
        for _ in range(SWEEPS):
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "run.jsonl"
                plan = plan_launch(record, placement, str(build / "commlens-kernels"),
                                   ["pingpong.send", "-m", "1:4194304"], str(out))
                _, wall_cb = sh(env_dir, plan.command, plan.env)
                lines = read_jsonl(out)
            run, points, end = lines[0], {p["size"]: p for p in lines[1:-1]}, lines[-1]
            mean = {s: statistics.fmean(p["samples"]) for s, p in points.items()}
            smallest = min(mean, key=mean.get)
            overhead = run["harness_overhead_s"]
            rows["overhead"].append(overhead / mean[smallest])
            rows["amortised"].append(overhead / (points[smallest]["iters_per_sample"] * 2) / mean[smallest])
            rows["wall_cb"].append(end["elapsed_s"])
            rows["launch_cb"].append(wall_cb)

            records = run_reference(record, placement, reference, ["latency", "1:4194304"])
            rows["wall_ref"].append(next(r["wall_s"] for r in records if "wall_s" in r))
        ratios = alternating_ratios(record, placement, reference, "latency", SMALL)
        bandwidth = {size: alternating_ratios(record, placement, reference, "bandwidth", (size,)) for size in LARGE}
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{library} (on-node)")
        print(f"  (a) harness overhead in the smallest latency: {med['amortised']:.4%} of it, spread over a "
              f"sample's messages (an empty sample against one message alone: {med['overhead']:.2%}; "
              f"median of {SWEEPS} launches)")
        print(f"  (b) latency at {', '.join(map(str, SMALL))} B, commlens / reference loop in the same launch: "
              f"{statistics.median(ratios):.3f} (median of {len(ratios)} rounds in {LAUNCHES} launches; "
              f"rounds {min(ratios):.3f}..{max(ratios):.3f})")
        print(f"  (c) time to measure 1 B..4 MiB: commlens {med['wall_cb']:.2f} s to 1% rse, reference "
              f"{med['wall_ref']:.2f} s at fixed iterations; ratio {med['wall_cb'] / med['wall_ref']:.2f} "
              f"(whole commlens launch with mpiexec start-up: {med['launch_cb']:.2f} s)")
        for size, values in bandwidth.items():
            print(f"  (d) bandwidth at {size // 2**20} MiB, commlens stream.uni / osu_bw-style loop in the same "
                  f"launch: {statistics.median(values):.3f} (median of {len(values)} rounds in {LAUNCHES} launches; "
                  f"rounds {min(values):.3f}..{max(values):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else str(REPO / "config" / "campaigns" / "quick.yaml")))
