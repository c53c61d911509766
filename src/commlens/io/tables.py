"""Tables (pandas DataFrames) written as the file a user names: .csv, .json or .parquet by its suffix,
or `-` for standard output.

One writer for every table commlens writes (`commlens export`, `compare --output`, `history --output`),
so that the formats, the refusal of a suffix it does not write and the messages are the same everywhere.
"""

from __future__ import annotations

import json
import sys
from datetime import date
from pathlib import Path
from typing import TextIO

import numpy as np
import pandas as pd

FORMATS = ("csv", "json", "parquet")
STDOUT = "-"


def table_format(output, allowed=FORMATS, default: str | None = None, requested: str | None = None) -> str:
    """The format to write `output` in: `requested` (a --format) where given, else the format its
    suffix names, else `default`; ValueError naming the allowed formats for an unknown suffix (x.xlsx
    is not silently written as CSV), for a suffix that contradicts `requested`, and, without a default,
    for a path with no suffix or `-` (standard output)."""
    if requested is not None and requested not in allowed:
        raise ValueError(f"--format {requested}: allowed values: {', '.join(allowed)}")
    endings = ", ".join("." + f for f in allowed)
    chosen = requested or default
    if output is None or str(output) == STDOUT:
        if chosen:
            return chosen
        raise ValueError(f"--output {output}: give a file ending in {endings}")
    suffix = Path(str(output)).suffix.lstrip(".").lower()
    if not suffix:
        if chosen:
            return chosen
        raise ValueError(f"--output {output}: give a file ending in {endings}")
    if suffix not in allowed:
        raise ValueError(f"--output {output}: .{suffix} is not a format commlens writes; give a file ending in "
                         f"{endings}" + (f" (or {STDOUT} for standard output)" if default else ""))
    if requested is not None and requested != suffix:
        raise ValueError(f"--output {output} ends in .{suffix} but --format is {requested}; give one format")
    return suffix


def json_records(table: pd.DataFrame) -> str:
    """The table as a JSON list of records, every number as it is (Python's shortest exact form: pandas'
    to_json keeps 10 decimal places, so 1.0752688172043e-07 s would read back as 1.075e-07), blank, NaN
    and infinite cells as null, times in ISO 8601."""
    cells = table.copy()
    for name in cells.columns[[kind in "fc" for kind in cells.dtypes.map(lambda dtype: dtype.kind)]]:
        cells[name] = cells[name].where(np.isfinite(cells[name]))
    cells = cells.astype(object).where(cells.notna(), None)
    return json.dumps(cells.to_dict(orient="records"), indent=1, allow_nan=False,
                      default=lambda value: value.isoformat() if isinstance(value, date) else
                      value.item() if isinstance(value, np.generic) else str(value))


def write_table(table: pd.DataFrame, path, fmt: str) -> Path | None:
    """Writes `table` to `path` as `fmt` (csv, json records, parquet), `-` meaning standard output;
    returns the path written (None for standard output)."""
    to_stdout = str(path) == STDOUT
    file = Path(path)
    target: TextIO | Path = sys.stdout if to_stdout else file
    if fmt == "csv":
        table.to_csv(target, index=False)
    elif fmt == "json":
        text = json_records(table)
        if to_stdout:
            print(text)
        else:
            file.write_text(text + "\n")
    elif fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ValueError("--format parquet needs pyarrow, which is not installed here (pip install pyarrow); "
                             "--format csv needs nothing more") from None
        table.to_parquet(sys.stdout.buffer if to_stdout else target, index=False)
    else:
        raise ValueError(f"--format {fmt}: allowed values: {', '.join(FORMATS)}")
    if to_stdout:
        sys.stdout.flush()
        return None
    return file
