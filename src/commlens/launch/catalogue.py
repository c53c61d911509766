"""The kernels, as the C sources describe them (kernels/catalogue.def): the one list of kernels.

Two programs print the catalogue: a library's build (`commlens-kernels --describe`, which also says
which kernels that build has, recorded in its build.json), and the catalogue tool
(`commlens-catalogue`, kernels/harness/catalogue_tool.c), compiled here with the host's C compiler,
no MPI needed, so that a campaign's kernels, options and memory are checked before any library is
installed. The tool is built once per version of the kernel sources, in a cache folder
($COMMLENS_CACHE, else $XDG_CACHE_HOME/commlens, else ~/.cache/commlens).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from commlens.launch.provenance import KERNELS_DIR, source_hash
from commlens.locations import built_in_cache, cache_dir

TOOL = "commlens-catalogue"


class CatalogueError(RuntimeError):
    """The catalogue cannot be read here (no C compiler, a build that failed); the message says why."""


@dataclass(frozen=True)
class Kernel:
    """One kernel's description; see struct cl_kernel in kernels/harness/catalogue.h."""

    name: str
    family: str
    source: str
    metric: str
    min_ranks: int
    bytes_factor: float       # bytes moved per unit of the metric, in message sizes ...
    bytes_per: str            # ... once, per rank or per pair of ranks
    slots: str                # message buffers one iteration uses: one, window, messages, ...
    windowed: bool            # a window of messages in flight (--window, --window-buffers)
    options: tuple[str, ...]  # the kernel options it reads
    tags: tuple[str, ...]     # what the report groups it with
    mpi_version: str          # the MPI version its calls need ("0.0": any)
    scratch_files: str = ""   # the scratch files a launch makes, with {ranks} and {size} in place of numbers
    pair_times: bool = False  # it times every ordered pair of ranks (a matrix per sample: pair_times_s)

    @classmethod
    def from_json(cls, record: dict) -> Kernel:
        return cls(name=record["kernel"], family=record["family"], source=record["source"],
                   metric=record["metric"], min_ranks=int(record["min_ranks"]),
                   bytes_factor=float(record["bytes_moved"]["factor"]), bytes_per=record["bytes_moved"]["per"],
                   slots=record["slots"], windowed=bool(record["windowed"]), options=tuple(record["options"]),
                   tags=tuple(record["tags"]), mpi_version=record["mpi_version"],
                   scratch_files=record.get("scratch", {}).get("files", ""),
                   pair_times=bool(record.get("pair_times", False)))

    def bytes_moved(self, nprocs: float) -> float:
        """Bytes moved per unit of the metric, in message sizes, on `nprocs` ranks (NaN where it
        depends on the ranks and they are unknown)."""
        scale = {"once": 1.0, "rank": nprocs, "pair": nprocs // 2}[self.bytes_per]
        return self.bytes_factor * scale


def describe_kernel(name: str, kernels_dir: Path = KERNELS_DIR) -> Kernel | None:
    """The catalogue's description of `name` (an @label is ignored), None where the catalogue has no
    such kernel or cannot be read here (it needs a C compiler)."""
    try:
        return catalogue(kernels_dir).get(name.split("@", 1)[0])
    except CatalogueError:
        return None


@functools.cache
def tool(kernels_dir: Path = KERNELS_DIR) -> Path:
    """The catalogue tool of these kernel sources, built on first use (a few seconds)."""
    build_dir = cache_dir() / "catalogue" / source_hash(kernels_dir)[:16]
    compiler = os.environ.get("CC", "cc")
    if not (build_dir / TOOL).exists() and (shutil.which(compiler) is None or shutil.which("make") is None):
        raise CatalogueError(f"the kernel catalogue needs a C compiler ({compiler}) and make to build "
                             f"{TOOL} from {kernels_dir}; neither MPI nor a campaign build is needed")
    return built_in_cache(build_dir / TOOL, ["make", "-s", "-C", str(kernels_dir), "catalogue",
                                             f"BUILD_DIR={build_dir}", f"CC={compiler}"], CatalogueError)


def parse_description(text: str) -> dict[str, Kernel]:
    """`--describe` output (JSON Lines) as {name: Kernel}, in catalogue order."""
    kernels = [Kernel.from_json(json.loads(line)) for line in text.splitlines() if line.strip()]
    return {kernel.name: kernel for kernel in kernels}


@functools.cache
def catalogue(kernels_dir: Path = KERNELS_DIR) -> dict[str, Kernel]:
    """Every kernel of these sources, {name: Kernel}, in catalogue order."""
    done = subprocess.run([str(tool(kernels_dir)), "--describe"], capture_output=True, text=True)
    if done.returncode != 0:
        raise CatalogueError(f"{TOOL} --describe failed: {done.stderr.strip()}")
    return parse_description(done.stdout)


def launch_needs(kernel_args: list[str], ranks: int, kernels_dir: Path = KERNELS_DIR) -> dict:
    """What one launch of commlens-kernels with `kernel_args` (kernel name first) on `ranks` ranks
    allocates: {largest, slots, slots_from, rotate, buffer_bytes, memory_per_rank, scratch_bytes}, as the
    harness computes it. Raises ValueError with the harness's own message where the options are bad."""
    done = subprocess.run([str(tool(kernels_dir)), "--needs", str(ranks), *kernel_args], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise ValueError(done.stderr.strip().removeprefix("commlens-kernels: "))
    return json.loads(done.stdout)
