"""A batch of files of one suite, read as one library row on one placement: every file is tried,
and every refusal is kept with its reason (none stops the others)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from commlens.io.importers.common import ImportFileError, Measurement
from commlens.io.importers.imb import read_imb
from commlens.io.importers.netpipe import read_netpipe
from commlens.io.importers.osu import read_osu

SUITES = {"osu": "OSU Micro-Benchmarks", "imb": "Intel MPI Benchmarks", "netpipe": "NetPIPE"}


@dataclass
class Refusal:
    path: str
    message: str      # the file (and line), then why: as ImportFileError says it

    def __str__(self) -> str:
        return self.message


def read_batch(paths, suite: str, nprocs: int, partial: bool = False,
               osu_sizes: tuple[int, int | None] | None = None) -> tuple[list[Measurement], list[Refusal]]:
    """The measurements of every file that can be imported as run on `nprocs` ranks, and a refusal
    (file and reason) for each that cannot."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; allowed values: {', '.join(SUITES)}")
    if osu_sizes is not None and suite != "osu":
        raise ValueError("--osu-sizes is the -m range of OSU runs; IMB and NetPIPE outputs state their sizes")
    paths = [Path(p) for p in paths]
    if suite == "netpipe":
        measurements, refused = read_netpipe(paths, nprocs, partial)
        return measurements, [Refusal(str(error.path), str(error)) for error in refused]
    measurements, refusals = [], []
    for path in paths:
        try:
            if suite == "osu":
                found = read_osu(path, nprocs, osu_sizes, partial)
            else:
                found = read_imb(path, nprocs, partial)
        except ImportFileError as error:
            refusals.append(Refusal(str(path), str(error)))
            continue
        measurements += found
    return measurements, refusals
