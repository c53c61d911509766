"""What a file that should be netCDF is instead, in a few words, read from its first bytes.

netCDF's own error for every such file is "NetCDF: HDF error" or "Unknown file format", and xarray's
that no backend matched: neither says that the file was cut short by a copy or a write that did not
finish, or is a CSV table given a .nc name. A campaign dataset is netCDF-4, that is HDF5, whose
superblock records how long the file is (the end-of-file address), so a truncated one is told by
its length alone.
"""

from __future__ import annotations

from pathlib import Path

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
NETCDF3_SIGNATURES = (b"CDF\x01", b"CDF\x02", b"CDF\x05")
# Other formats a results folder holds, by their first bytes.
SIGNATURES = {b"PK\x03\x04": "a zip file", b"PAR1": "a Parquet file", b"\x1f\x8b": "a gzip file",
              b"\x89PNG": "a PNG image", b"<svg": "an SVG image", b"<!DOCTYPE html": "an HTML file",
              b"<html": "an HTML file", b"%PDF": "a PDF file"}
SNIFFED_BYTES = 4096


def describe(path) -> str:
    """What the file at `path` is, when netCDF cannot read it: "empty file", "truncated HDF5 file: 63,001
    of 126,003 bytes", "a CSV file, not netCDF", ... Only its first bytes are read."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        return "empty file"
    with open(path, "rb") as file:
        head = file.read(SNIFFED_BYTES)
    if head.startswith(HDF5_SIGNATURE):
        expected = hdf5_length(head)
        if expected is not None and size < expected:
            return f"truncated HDF5 file: {size:,} of {expected:,} bytes"
        return "damaged HDF5 file"
    if head.startswith(NETCDF3_SIGNATURES):
        return "damaged netCDF-3 file"
    for signature, kind in SIGNATURES.items():
        if head.lstrip().startswith(signature):
            return f"{kind}, not netCDF"
    text = _text(head)
    if text is None:
        return f"not netCDF (a binary file starting {head[:8].hex(' ')})"
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if first.startswith(("{", "[")):
        return "a JSON file, not netCDF"
    if "," in first or "\t" in first:
        return f"a {'CSV' if ',' in first else 'tab-separated'} file, not netCDF"
    return "a text file, not netCDF"


def hdf5_length(head: bytes) -> int | None:
    """The file length an HDF5 superblock at the start of `head` records (base address + end-of-file
    address), or None where the superblock is not one this reads (versions 0 to 3)."""
    if len(head) < 16:
        return None
    version = head[8]
    if version in (0, 1):
        offsets, base_at = head[13], 24 if version == 0 else 28
    elif version in (2, 3):
        offsets, base_at = head[9], 12
    else:
        return None
    if offsets not in (2, 4, 8):
        return None
    eof_at = base_at + 2 * offsets
    if len(head) < eof_at + offsets:
        return None
    base = int.from_bytes(head[base_at:base_at + offsets], "little")
    return base + int.from_bytes(head[eof_at:eof_at + offsets], "little")


def _text(head: bytes) -> str | None:
    """`head` as text, or None for a binary file (a NUL byte, or not UTF-8 but for a cut last character)."""
    if b"\0" in head:
        return None
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as error:
        return head[:error.start].decode("utf-8") if error.start >= len(head) - 3 else None
