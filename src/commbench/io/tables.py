"""Tables (pandas DataFrames) written as the file a user names: .csv, .json or .parquet by its suffix.

One writer for every table commbench writes (`commbench export`, `compare --output`, `history --output`),
so that the formats, the refusal of a suffix it does not write and the messages are the same everywhere.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

FORMATS = ("csv", "json", "parquet")


def table_format(output, allowed=FORMATS, default: str | None = None) -> str:
    """The format `output`'s suffix names; `default` where it names none; ValueError naming the
    allowed suffixes otherwise."""
    suffix = Path(str(output)).suffix.lstrip(".").lower()
    if suffix in allowed:
        return suffix
    if not suffix and default:
        return default
    raise ValueError(f"--output {output}: give a file ending in {', '.join('.' + f for f in allowed)}")


def write_table(table: pd.DataFrame, path, fmt: str) -> Path:
    """Writes `table` to `path` as `fmt` (csv, json records, parquet); returns the path."""
    path = Path(path)
    if fmt == "csv":
        table.to_csv(path, index=False)
    elif fmt == "json":
        table.to_json(path, orient="records", indent=1)
    elif fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ValueError("--format parquet needs pyarrow, which is not installed here (pip install pyarrow); "
                             "--format csv needs nothing more") from None
        table.to_parquet(path, index=False)
    else:
        raise ValueError(f"--format {fmt}: allowed values: {', '.join(FORMATS)}")
    return path
