"""The version matrix: one line per library row of the versions campaign's dataset.

    python benchmarks/versions.py results/versions/versions.nc

For each row: whether its environment and kernels built (and with how many compiler
warnings), whether each placement launched, the 8 B ping-pong latency (median, half round
trip) on-node and emulated off-node, and the 1 MiB bandwidth (size / median time, MB/s =
1e6 B/s). A row that did not build or launch says why instead. Exits 1 when any row or
launch gave no data.
"""

import sys

import numpy as np

from commbench import open_campaign

SMALL, LARGE = 8, 1 << 20


def main(path: str) -> int:
    ds = open_campaign(path)
    median = ds.commbench.summary(ci=False)["median"].sel(kernel="pingpong.send")
    status = ds["status"].sel(kernel="pingpong.send")
    header = (f"{'library':<16}{'version':<10}{'launcher':<9}{'built':<7}{'warn':>5}  {'launched':<14}"
              f"{'8 B on (us)':>12}{'8 B off (us)':>13}{'1 MiB on (MB/s)':>16}{'1 MiB off (MB/s)':>17}")
    print(header)
    print("-" * len(header))
    complete = True
    for lib in ds.library.values:
        row = ds.sel(library=lib)
        version = str(row["library_version"].values).strip().splitlines()[0].split(",")[0]
        version = version.replace("MPICH Version:", "").replace("Open MPI v", "").strip() or "-"
        built = str(row["library_status"].values)
        launched = {str(p): str(status.sel(library=lib, placement=p).values.ravel()[0]) for p in ds.placement.values}
        complete &= built == "ok" and all(s == "ok" for s in launched.values())

        def cell(placement, size, bandwidth=False):
            value = float(median.sel(library=lib, placement=placement, size=size))
            if not np.isfinite(value):
                return "-"
            return f"{size / value / 1e6:.0f}" if bandwidth else f"{value * 1e6:.2f}"

        print(f"{lib:<16}{version:<10}{str(row['launcher'].values):<9}{'yes' if built == 'ok' else 'NO':<7}"
              f"{int(row['build_warnings']):>5}  {' '.join(f'{p}:{s}' for p, s in launched.items()):<14}"
              f"{cell('1N2P', SMALL):>12}{cell('2N1P', SMALL):>13}"
              f"{cell('1N2P', LARGE, True):>16}{cell('2N1P', LARGE, True):>17}")
        if built != "ok":
            print(f"    {built}: {row['library_reason'].values}")
        for placement, state in launched.items():
            if state not in ("ok", "env_failed", "build_failed"):
                why = str(ds["reason"].sel(library=lib, placement=placement, kernel="pingpong.send").values.ravel()[0])
                print(f"    {placement} {state}: {why[:300]}")
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/versions/versions.nc"))
