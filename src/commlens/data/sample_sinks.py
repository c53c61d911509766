"""Where collecting puts the samples it reads, before they become the dataset's ragged `time`: memory,
or a file beside the dataset (a campaign's collection, which holds one launch's samples at a time)."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np

from commlens.io.atomic import write_failure


class MemorySamples:
    """Samples kept in memory (interactive runs, tests): any order in, RAGGED_ORDER out; a point
    given twice keeps its last samples."""

    def __init__(self):
        self.points: dict[tuple, np.ndarray] = {}

    def add(self, key: tuple, samples: np.ndarray) -> None:
        self.points[key] = samples

    def array(self) -> np.ndarray:
        return np.concatenate([self.points[k] for k in sorted(self.points)]) if self.points else np.empty(0)


class FileSamples:
    """Samples appended to a binary file (float64) as they are read, so that collecting holds one
    launch's samples at a time; they must come in RAGGED_ORDER, as a campaign's raw files do."""

    def __init__(self, path):
        self.path, self.last, self.count = Path(path), None, 0
        self.file = open(self.path, "wb")

    def add(self, key: tuple, samples: np.ndarray) -> None:
        if self.last is not None and key <= self.last:
            raise ValueError(f"samples of point {key} came after {self.last}: raw files must be collected "
                             f"in the campaign's order")
        self.last = key
        np.asarray(samples, dtype=np.float64).tofile(self.file)
        self.count += len(samples)

    def array(self) -> np.ndarray:
        self.file.close()
        # numpy's tofile can lose a write to a full disk without a word: the file is then shorter than the
        # samples, and mapping it fails with "mmap length is greater than file size". Said as what it is.
        written, expected = self.path.stat().st_size, 8 * self.count
        if written < expected:
            raise write_failure(OSError(errno.EIO, f"{written:,} of {expected:,} bytes written"), self.path)
        return np.memmap(self.path, dtype=np.float64, mode="r", shape=(self.count,)) if self.count else np.empty(0)
