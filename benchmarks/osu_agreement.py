"""commlens side by side with OSU Micro-Benchmarks 7.x on one node: 8 B latency (osu_latency) and
1 MiB and 4 MiB bandwidth (osu_bw), against commlens's --osu timing and its default timing.

    python benchmarks/osu_agreement.py OSU_DIR [--workspace DIR] [--rounds N] [--campaign FILE]

OSU_DIR holds one folder per library of the campaign (default config/campaigns/quick.yaml), named as
its rows are, each with osu_latency and osu_bw built with that library's mpicc (anywhere below it, as
OSU's build tree leaves them in c/mpi/pt2pt/standard/). commlens neither ships nor builds OSU:

    . build/envs/mpich-5.0.2/activate.sh
    cd /tmp/osu/mpich-5.0.2 && /path/to/osu-micro-benchmarks-7.4/configure CC=mpicc CXX=mpicxx
    make -C c/util && make -C c/mpi/pt2pt/standard osu_latency osu_bw

The libraries' environments and kernel builds are the workspace's (default: this checkout's build/,
as `make campaign` leaves it). Every program runs under commlens's own launch plan for 1N2P (binding,
transports), each in a launch of its own, in rounds: each round runs every program once, in an order
that alternates from round to round, so whatever drifts on the machine meets every program alike. A
round's ratio is commlens over OSU in that round (latency: time over time; bandwidth: MB/s over MB/s);
the table gives the median over rounds and, in brackets, the rounds' range. OSU's numbers are the
means of single timed iterations; --osu reports the same mean; the default reports the median of timed
batches sampled to its precision target, so it differs where single iterations carry the timer's cost
or slow outliers.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from commlens.campaign import load_campaign
from commlens.launch.libraries import in_environment
from commlens.launch.placement import Placement
from commlens.launch.plan import plan_launch

REPO = Path(__file__).resolve().parents[1]
LATENCY_SIZE = 8
BANDWIDTH_SIZES = (2**20, 4 * 2**20)
# (measure, program, commlens kernel, OSU's -m): one launch each per round.
TESTS = (("latency", "osu_latency", "pingpong.send", f"{LATENCY_SIZE}:{LATENCY_SIZE}"),
         ("bandwidth", "osu_bw", "stream.uni", f"{BANDWIDTH_SIZES[0]}:{BANDWIDTH_SIZES[-1]}"))
TIMINGS = ("osu", "precision")


def find_binary(folder: Path, name: str) -> Path:
    found = sorted(p for p in folder.rglob(name) if p.is_file())
    if not found:
        raise SystemExit(f"{folder}: no {name} below it (build OSU 7.x there with this library's mpicc)")
    return found[0]


def launched(library: dict, binary: Path, args: list[str], output: str | None) -> str:
    """`binary` with `args` under commlens's launch plan for 1N2P; its stdout."""
    plan = plan_launch(library, Placement("1N2P", 1, 2), str(binary), [], output or "")
    command = plan.command[:plan.command.index(str(binary)) + 1] + args
    if output:
        command += ["--nodes", "1", "-o", output]
    exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in plan.env.items())
    done = subprocess.run(in_environment(library["env_dir"], f"{exports} {shlex.join(command)}"),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def osu_values(stdout: str) -> dict[int, float]:
    """OSU's table: {size: us or MB/s}."""
    rows = (line.split() for line in stdout.splitlines() if line.strip() and not line.startswith("#"))
    return {int(row[0]): float(row[1]) for row in rows}


def commlens_values(path: Path, measure: str, timing: str) -> dict[int, float]:
    """What commlens reports per size, in OSU's units: the mean (--osu) or the median (default) time,
    as us for latency and as size / time in MB/s for bandwidth."""
    points = [json.loads(line) for line in path.read_text().splitlines()][1:-1]
    values = {}
    for point in points:
        time = statistics.fmean(point["samples"]) if timing == "osu" else statistics.median(point["samples"])
        values[point["size"]] = time * 1e6 if measure == "latency" else point["size"] / time / 1e6
    return values


def one_round(library: dict, kernels: Path, osu: Path, order: list[tuple[str, str]]) -> dict:
    """{(measure, size, program): value} for one round, the programs in `order` ("OSU", or commlens
    with a timing)."""
    values = {}
    for measure, program in order:
        _, osu_program, kernel, sizes = next(t for t in TESTS if t[0] == measure)
        if program == "OSU":
            printed = launched(library, find_binary(osu, osu_program), ["-m", sizes], None)
            for size, value in osu_values(printed).items():
                values[measure, size, "OSU"] = value
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run.jsonl"
            args = [kernel, "-m", sizes, "--timing", program]
            launched(library, kernels / "commlens-kernels", args, str(out))
            for size, value in commlens_values(out, measure, program).items():
                values[measure, size, program] = value
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("osu_dir", type=Path, help="a folder per library, each with osu_latency and osu_bw below it")
    parser.add_argument("--workspace", type=Path, default=REPO, help="where build/ holds the environments and kernels")
    parser.add_argument("--campaign", default=str(REPO / "config" / "campaigns" / "quick.yaml"))
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    campaign = load_campaign(options.campaign)
    # OSU's own program, then commlens with each timing.
    programs = [(measure, program) for measure, *_ in TESTS for program in ("OSU", *TIMINGS)]
    rows = [("latency", LATENCY_SIZE, "us")] + [("bandwidth", size, "MB/s") for size in BANDWIDTH_SIZES]
    print(f"{'library':<16}{'measure':<22}{'OSU':>10}{'--osu':>10}{'ratio':>8} {'[rounds]':<14}"
          f"{'default':>10}{'ratio':>8} {'[rounds]':<14}")
    for name in campaign.libraries:
        mpi = campaign.mpi_of(name)
        library = json.loads((options.workspace / "build" / "envs" / mpi / "library.json").read_text())
        kernels = options.workspace / "build" / "kernels" / mpi
        rounds = []
        for r in range(options.rounds):
            order = programs if r % 2 == 0 else programs[::-1]
            rounds.append(one_round(library, kernels, options.osu_dir / name, order))
            print(f"  {name}: round {r + 1} of {options.rounds} done", file=sys.stderr)
        for measure, size, unit in rows:
            label = f"{measure} {size // 2**20} MiB ({unit})" if size >= 2**20 else f"{measure} {size} B ({unit})"
            osu = statistics.median(values[measure, size, "OSU"] for values in rounds)
            cells = [f"{name:<16}{label:<22}{osu:>10.2f}"]
            for timing in TIMINGS:
                ratios = [values[measure, size, timing] / values[measure, size, "OSU"] for values in rounds]
                ours = statistics.median(values[measure, size, timing] for values in rounds)
                cells.append(f"{ours:>10.2f}{statistics.median(ratios):>8.3f} "
                             f"[{min(ratios):.2f}, {max(ratios):.2f}]".ljust(33))
            print("".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
