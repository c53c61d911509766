"""Other suites' outputs read as they are: OSU Micro-Benchmarks, IMB-MPI1 and NetPIPE 5.

`read_batch(paths, suite, nprocs)` tries every file of a batch and returns their Measurements
(commlens.io.importers.common) and a Refusal for each file that cannot be imported;
`assign_labels` keeps tables of different kinds apart (commlens.io.importers.kinds);
commlens.data.imported makes them one library row of a dataset.
"""

from __future__ import annotations

from commlens.io.importers.batch import SUITES, Refusal, read_batch
from commlens.io.importers.common import (REPORTED, ImportFileError, Measurement, placement_shape,
                                           reported_meaning)
from commlens.io.importers.imb import read_imb
from commlens.io.importers.kinds import assign_labels
from commlens.io.importers.netpipe import read_netpipe
from commlens.io.importers.osu import read_osu

__all__ = ["REPORTED", "SUITES", "ImportFileError", "Measurement", "Refusal", "assign_labels", "placement_shape",
           "read_batch", "read_imb", "read_netpipe", "read_osu", "reported_meaning"]
