"""Other suites' outputs read as they are: OSU Micro-Benchmarks and IMB output tables.

`read_osu(path)` and `read_imb(path, nprocs)` read a file into Measurements (commbench.io.importers.common);
commbench.data.imported makes them one library row of a dataset.
"""

from __future__ import annotations

from commbench.io.importers.common import ImportFileError, Measurement, placement_shape
from commbench.io.importers.imb import read_imb
from commbench.io.importers.osu import read_osu

__all__ = ["ImportFileError", "Measurement", "placement_shape", "read_imb", "read_osu"]
