"""`make scale`: a centre-sized synthetic campaign through commlens's own collection and analysis.

5 libraries x 8 placements x 40 kernels x 80 sizes x 10 launches (1.28 million points), with
heavy-tailed sample counts per point (log-normal around 200, clipped to 10..20,000), written as
raw launch files in the campaign format, then each step in a process of its own, with its wall
time and peak memory (maximum resident set):

  generate   the raw files (not part of the targets: a campaign writes them as it runs)
  collect    raw files -> dataset, streamed (commlens.data.collect, as the workflow's collect rule)
  open       open_campaign: everything but the samples loaded
  summary    ds.commlens.summary(): per-point statistics over launches, with intervals
  fits       ds.commlens.fit("hockney") on every curve (samples read one curve at a time)
  anomalies  ds.commlens.anomalies() on every curve
  compare    two of its libraries against each other (ds.commlens.compare), then the campaign
             against itself with one library row mapped onto another (as `commlens compare`)
  report     `commlens report`: the report and its static figures

Targets (2 cores, 24 GiB): peak memory under 4 GiB in every step and under 1 GiB in collect (its
memory does not grow with the campaign: one launch's samples and one chunk of the dataset's at a
time, so a half-size campaign peaks as high), the dataset on disk within 2x its samples in float64,
collect + summary + fits + anomalies + compare under 10 minutes, the report under 5 minutes.

    python benchmarks/scale.py [--dir DIR] [--scale FRACTION]

--scale shrinks the kernel axis (0.1: 4 kernels) for a quick look; the targets are for 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

LIBRARIES, PLACEMENTS, KERNELS, SIZES, LAUNCHES = 5, 8, 40, 80, 10
COUNT_MEDIAN, COUNT_SIGMA, COUNT_RANGE = 200, 1.0, (10, 20_000)
PLACEMENT_SHAPES = [(1, 2), (1, 4), (1, 8), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2)]
MEMORY_TARGET = 4 * 2**30
COLLECT_MEMORY_TARGET = 2**30
TIME_TARGET_S = 600
REPORT_TARGET_S = 300
STEPS = ("generate", "collect", "open", "summary", "fits", "anomalies", "compare", "report")
TIMED = ("collect", "summary", "fits", "anomalies", "compare")


def campaign_config(kernels: int) -> dict:
    sizes = [int(s) for s in np.unique(np.geomspace(1, 4 * 2**20, SIZES).round())]
    while len(sizes) < SIZES:                          # small sizes collide when rounded: fill in
        sizes = sorted(set(sizes) | {max(sizes) + len(sizes)})
    return {
        "campaign": "scale",
        "libraries": {f"lib-{i}": {"mpi": f"lib-{i}"} for i in range(LIBRARIES)},
        "placements": [{"name": f"{n}N{p}P", "nodes": n, "ppn": p} for n, p in PLACEMENT_SHAPES],
        "kernels": {f"pingpong.send@k{k:02d}": {"sizes": {"list": sizes}} for k in range(kernels)},
        "launches": LAUNCHES,
    }


def generate(directory: Path, kernels: int) -> None:
    """Raw files as launches write them: a launch record, a run record, a point per size, an end."""
    from commlens.campaign import Campaign, validate_campaign

    config = validate_campaign(campaign_config(kernels))
    (directory / "campaign.json").write_text(json.dumps(config))
    campaign = Campaign("scale", str(directory / "campaign.json"), config)
    rng = np.random.default_rng(0)
    sizes = np.array(config["kernels"][campaign.kernels[0]]["sizes"]["list"], dtype=float)
    total = 0
    for number, (library, placement, kernel, launch) in enumerate(campaign.runs()):
        path = directory / "raw" / library / placement / kernel / f"launch{launch}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        latency = 1e-6 * (1 + campaign.libraries.index(library)) * (1 + campaign.placements.index(placement))
        truth = latency + sizes / 5e9
        counts = np.clip(np.rint(rng.lognormal(np.log(COUNT_MEDIAN), COUNT_SIGMA, sizes.size)), *COUNT_RANGE)
        counts = counts.astype(int)
        shift = 1 + 0.05 * rng.standard_normal()       # launch-to-launch
        lines = [json.dumps({"record": "launch", "schema": 1, "status": "ok", "library": library,
                             "placement": placement, "kernel": kernel, "launch": launch}),
                 json.dumps({"record": "run", "schema": 1, "kernel": kernel.split("@")[0],
                             "library_version": f"{library} 1.0", "hosts": ["node0"], "timer": "MPI_Wtime",
                             "timer_resolution_s": 1e-9, "harness_overhead_s": 2e-8, "args": {}})]
        for size, base, count in zip(sizes, truth, counts):
            samples = base * shift * (1 + 0.02 * np.abs(rng.standard_t(3, count)))
            listed = ",".join(map(str, samples.round(12).tolist()))
            lines.append(f'{{"record":"point","size":{int(size)},"samples":[{listed}],'
                         f'"iters_per_sample":10,"settled":true,"rse":0.01,"errors":null}}')
            total += count
        lines.append(json.dumps({"record": "end", "status": "ok", "points": len(sizes)}))
        path.write_text("\n".join(lines) + "\n")
        if number % 1000 == 0:
            print(f"  generate: {number} of {len(list(campaign.runs()))} launch files, {total:,} samples", flush=True)
    (directory / "samples.txt").write_text(str(total))


def step(name: str, directory: Path) -> None:
    from commlens.campaign import Campaign
    from commlens import open_campaign

    dataset = directory / "scale.nc"
    if name == "generate":
        generate(directory, int(os.environ["SCALE_KERNELS"]))
        return
    config = json.loads((directory / "campaign.json").read_text())
    if name == "collect":
        from commlens.data.collect import build_dataset, stream_raw
        from commlens.io.netcdf import write_dataset

        campaign = Campaign("scale", str(directory / "campaign.json"), config)
        libraries = {m: {"name": m, "status": "ok", "family": "mpich"} for m in campaign.mpi_names}
        builds = {m: {"mpi": m, "status": "ok"} for m in campaign.mpi_names}
        paths = [directory / "raw" / lib / pl / k / f"launch{n}.jsonl" for lib, pl, k, n in campaign.runs()]
        refused: list = []
        results, _ = stream_raw(paths, refused)
        ds = build_dataset(campaign, results, libraries, builds, refused,
                           samples_file=directory / "scale.samples.tmp")
        write_dataset(ds, dataset)
        (directory / "scale.samples.tmp").unlink()
        assert not refused, refused[:3]
    else:
        ds = open_campaign(dataset)
        if name == "summary":
            ds.commlens.summary().load()
        elif name == "fits":
            ds.commlens.fit("hockney", n_boot=100)
        elif name == "anomalies":
            ds.commlens.anomalies()
        elif name == "compare":
            from commlens.analysis.compare import across, verdict_counts

            started = time.monotonic()
            within = ds.commlens.compare(baseline="lib-0", candidate="lib-1")
            print(f"  compare lib-0 with lib-1: {time.monotonic() - started:.1f} s, {verdict_counts(within)}")
            started = time.monotonic()
            between = across(ds.sel(library=["lib-0"]), open_campaign(dataset), {"lib-0": "lib-1"})
            print(f"  compare two campaigns (lib-0 -> lib-1): {time.monotonic() - started:.1f} s, "
                  f"{verdict_counts(between)}")
        elif name == "report":
            from commlens.report import run_report_notebook

            run_report_notebook(dataset, directory / "report")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="results/scale-benchmark")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the 40 kernels (targets: 1)")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    args = parser.parse_args()
    directory = Path(args.dir)
    if args.step:
        step(args.step, directory)
        return 0
    kernels = max(1, round(KERNELS * args.scale))
    directory.mkdir(parents=True, exist_ok=True)
    print(f"scale: {LIBRARIES} libraries x {len(PLACEMENT_SHAPES)} placements x {kernels} kernels x {SIZES} sizes "
          f"x {LAUNCHES} launches in {directory}")
    rows = []
    for name in STEPS:
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, __file__, "--dir", str(directory), "--step", name],
                                   env={**os.environ, "SCALE_KERNELS": str(kernels)})
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.monotonic() - started
        peak = usage.ru_maxrss * 1024
        rows.append((name, wall, peak))
        print(f"{name:<10} {wall:8.1f} s   peak {peak / 2**30:6.2f} GiB", flush=True)
        if os.waitstatus_to_exitcode(status) != 0:
            print(f"scale: step {name} failed")
            return 1
    samples = int((directory / "samples.txt").read_text())
    disk = (directory / "scale.nc").stat().st_size
    timed = sum(wall for name, wall, _ in rows if name in TIMED)
    report = next(wall for name, wall, _ in rows if name == "report")
    worst = max(peak for _, _, peak in rows)
    collect = next(peak for name, _, peak in rows if name == "collect")
    print(f"samples {samples:,} ({samples * 8 / 2**30:.2f} GiB as float64); dataset on disk {disk / 2**30:.2f} GiB "
          f"({disk / (samples * 8):.2f}x, target <= 2x)")
    print(f"collect + summary + fits + anomalies + compare: {timed:.0f} s (target < {TIME_TARGET_S} s); "
          f"report {report:.0f} s (target < {REPORT_TARGET_S} s); largest peak memory {worst / 2**30:.2f} GiB "
          f"(target < 4 GiB); collect's peak {collect / 2**30:.2f} GiB (target < 1 GiB)")
    met = disk <= 2 * samples * 8 and worst < MEMORY_TARGET and collect < COLLECT_MEMORY_TARGET and \
        ((timed < TIME_TARGET_S and report < REPORT_TARGET_S) or args.scale != 1)
    print("targets met" if met else "targets NOT met")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
