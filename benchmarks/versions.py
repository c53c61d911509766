"""The version matrix: one line per library row of the versions campaign's dataset.

    python benchmarks/versions.py results/versions/versions.nc

For each row: whether its environment and kernels built (and with how many compiler
warnings), whether each placement launched, the 8 B ping-pong latency (median, half round
trip) on-node and emulated off-node, and the 1 MiB bandwidth (size / median time, MB/s =
1e6 B/s). A row that did not build or launch says why instead. Then, where the campaign has
them, MPI-4's kernels: each one's 8 B time on node beside its MPI-3 twin's, or `unsupported` and
the build's reason. Exits 1 when any row or launch gave no data (an MPI-4 kernel's `unsupported`
excepted: that is what the matrix shows).
"""

import sys

import numpy as np

from commlens import open_campaign

SMALL, LARGE = 8, 1 << 20
# MPI-4 kernels and the MPI-3 kernel each is held against.
MPI4_TWINS = {"pingpong.persistent": "pingpong.send", "pingpong.partitioned": "pingpong.send",
              "coll.bcast_init": "coll.bcast", "coll.allreduce_init": "coll.allreduce"}


def main(path: str) -> int:
    ds = open_campaign(path)
    medians = ds.commlens.summary(ci=False)["median"]
    median = medians.sel(kernel="pingpong.send")
    status = ds["status"].sel(kernel="pingpong.send")
    header = (f"{'library':<16}{'version':<10}{'launcher':<9}{'built':<7}{'warn':>5}  {'launched':<14}"
              f"{'8 B on (us)':>12}{'8 B off (us)':>13}{'1 MiB on (MB/s)':>16}{'1 MiB off (MB/s)':>17}")
    print(header)
    print("-" * len(header))
    complete = True

    def cell(lib, placement, size, bandwidth=False):
        value = float(median.sel(library=lib, placement=placement, size=size))
        if not np.isfinite(value):
            return "-"
        return f"{size / value / 1e6:.0f}" if bandwidth else f"{value * 1e6:.2f}"

    for lib in ds.library.values:
        row = ds.sel(library=lib)
        version = str(row["library_version"].values).strip().splitlines()[0].split(",")[0]
        version = version.replace("MPICH Version:", "").replace("Open MPI v", "").strip() or "-"
        built = str(row["library_status"].values)
        launched = {str(p): str(status.sel(library=lib, placement=p).values.ravel()[0]) for p in ds.placement.values}
        complete &= built == "ok" and all(s == "ok" for s in launched.values())
        print(f"{lib:<16}{version:<10}{str(row['launcher'].values):<9}{'yes' if built == 'ok' else 'NO':<7}"
              f"{int(row['build_warnings']):>5}  {' '.join(f'{p}:{s}' for p, s in launched.items()):<14}"
              f"{cell(lib, '1N2P', SMALL):>12}{cell(lib, '2N1P', SMALL):>13}"
              f"{cell(lib, '1N2P', LARGE, True):>16}{cell(lib, '2N1P', LARGE, True):>17}")
        if built != "ok":
            print(f"    {built}: {row['library_reason'].values}")
        for placement, state in launched.items():
            if state not in ("ok", "env_failed", "build_failed"):
                why = str(ds["reason"].sel(library=lib, placement=placement, kernel="pingpong.send").values.ravel()[0])
                print(f"    {placement} {state}: {why[:300]}")
    complete &= mpi4_matrix(ds, medians)
    return 0 if complete else 1


def mpi4_matrix(ds, medians) -> bool:
    """Prints where each MPI-4 kernel of the campaign was measured; False if one failed otherwise than
    unsupported."""
    kernels = [k for k in MPI4_TWINS if k in ds.kernel.values]
    if not kernels or "1N2P" not in ds.placement.values:
        return True
    print(f"\nMPI-4 kernels, {SMALL} B on node (1N2P): median time, and its ratio to the MPI-3 twin's")
    print(f"{'library':<16}" + "".join(f"{k:>24}" for k in kernels))
    complete, reasons = True, {}
    for lib in ds.library.values:
        if str(ds["library_status"].sel(library=lib).values) != "ok":
            continue
        cells = []
        for kernel in kernels:
            state = str(ds["status"].sel(library=lib, placement="1N2P", kernel=kernel).values.ravel()[0])
            if state == "ok":
                time = float(medians.sel(library=lib, placement="1N2P", kernel=kernel, size=SMALL))
                twin = float(medians.sel(library=lib, placement="1N2P", kernel=MPI4_TWINS[kernel], size=SMALL))
                cells.append(f"{time * 1e6:.2f} us ({time / twin:.2f}x)" if np.isfinite(time) else "no data")
            else:
                cells.append(state)
                complete &= state == "unsupported"
                why = str(ds["reason"].sel(library=lib, placement="1N2P", kernel=kernel).values.ravel()[0])
                reasons.setdefault(why[:200], []).append(f"{lib} {kernel}")
        print(f"{lib:<16}" + "".join(f"{c:>24}" for c in cells))
    for why, where in reasons.items():
        print(f"    {', '.join(where)}: {why}")
    return complete


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/versions/versions.nc"))
