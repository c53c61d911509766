"""The history of a campaign's datasets: a dataset about to be replaced is kept in history/<its creation
time>/ beside it, with its failures.jsonl.

The workflow holds a second name for the current dataset and its failures.jsonl (a hard link,
`.<name>.held`, which takes no space): Snakemake deletes a job's outputs before it runs the job, and
the collection that replaces them finds them under that name and keeps them in history/. A
collection that fails therefore leaves no dataset (the campaign has none that is current) and loses
none: the next one keeps the previous dataset in history/ as usual."""

from __future__ import annotations

import filecmp
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from commlens.io.netcdf_lock import netcdf_lock

HISTORY = "history"          # results/<campaign>/history/<created>/: the datasets later collections replaced
UNREADABLE = "-unreadable"   # suffix of a history folder holding a file that was not a commlens dataset


def archive_previous(path, log=None) -> Path | None:
    """Keeps the dataset about to be replaced at `path`: moves it, and the failures.jsonl beside it,
    to history/<its creation time>/ in its folder (`commlens history` reads them as reruns). A file
    there that is not a readable commlens dataset is moved too, to history/<mtime>-unreadable/:
    whatever it is, nothing is lost. The previous collection's files under their held names (hold())
    are kept the same way. Returns the folder it went to, or None where there was no file."""
    folder = _archive(Path(path), log or sys.stderr)
    if _restore_held(Path(path)):
        folder = _archive(Path(path), log or sys.stderr) or folder
    return folder


def hold(path) -> None:
    """A second name for the dataset at `path` and the failures.jsonl beside it (see the module's
    doc). Where the file system has no hard links, nothing is held (and a collection that Snakemake
    runs does not keep the dataset it replaces)."""
    for file in (Path(path), Path(path).parent / "failures.jsonl"):
        held = _held_name(file)
        try:
            if held.exists() and os.path.samefile(file, held):
                continue
            partial = held.with_name(held.name + ".tmp")
            partial.unlink(missing_ok=True)
            os.link(file, partial)
            os.replace(partial, held)
        except OSError:
            pass


def _held_name(file: Path) -> Path:
    return file.with_name(f".{file.name}.held")


def _restore_held(path: Path) -> bool:
    """Gives the held files back their names where those are gone (deleted before the collection); a
    held name whose file has another name still (the current one, or the one in history/) just goes.
    Whether the dataset was given back."""
    restored = False
    for file in (path, path.parent / "failures.jsonl"):
        held = _held_name(file)
        try:
            if held.stat().st_nlink > 1:
                held.unlink()
            elif not file.exists():
                held.replace(file)
                restored = restored or file == path
        except FileNotFoundError:
            pass
    return restored


def _archive(path: Path, log) -> Path | None:
    """archive_previous for the file now at `path`."""
    if not path.exists():
        return None
    created, problem = _creation_time(path)
    stamp = _filesystem_stamp(created) if created else \
        datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    folder = _history_folder(path, stamp + (UNREADABLE if problem else ""))
    folder.mkdir(parents=True, exist_ok=True)
    for file in (path, path.parent / "failures.jsonl"):
        if file.exists():
            _move_into(file, folder)
    if problem:
        print(f"{path}: not a readable commlens dataset ({problem}); moved aside to {folder}, "
              "not read as a rerun", file=log)
    else:
        when = f"created {created}" if created else "no creation time: named by the file's"
        print(f"{path}: the previous dataset ({when}) is kept in {folder}", file=log)
    return folder


def _creation_time(path: Path) -> tuple[str | None, str | None]:
    """The dataset's `created` attribute (None if it has none: the file's time stands in) and, for a
    file that is not a readable commlens dataset, why not."""
    import netCDF4

    try:
        with netcdf_lock(), netCDF4.Dataset(path) as nc:
            attrs = {name: nc.getncattr(name) for name in nc.ncattrs()}
    except (OSError, RuntimeError, ValueError) as error:
        return None, f"cannot be read as netCDF: {error}"
    if "commlens_version" not in attrs:
        return None, "no commlens_version attribute"
    created = str(attrs.get("created", ""))
    try:
        datetime.fromisoformat(created)
    except ValueError:
        return None, None
    return created, None


def _filesystem_stamp(created: str) -> str:
    """2026-11-24T16:39:19+00:00 -> 2026-11-24T163919Z (UTC; no colons, which some file systems refuse)."""
    moment = datetime.fromisoformat(created)
    moment = moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H%M%SZ")


def _history_folder(path: Path, stamp: str) -> Path:
    """history/<stamp>/, or the first of <stamp>-2, -3, ... whose dataset is not a different file
    (two collections in one second; or the same one kept twice, restored after a failed collection)."""
    history = path.parent / HISTORY
    for attempt in range(1, 1000):
        folder = history / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        kept = folder / path.name
        if not kept.exists() or filecmp.cmp(path, kept, shallow=False):
            return folder
    raise FileExistsError(f"{history}: no free folder for {stamp}")


def _move_into(file: Path, folder: Path) -> None:
    """Moves `file` into `folder`; a copy already there with the same bytes makes it a duplicate to
    drop, one with other bytes keeps both (the newcomer numbered)."""
    target = folder / file.name
    if target.exists() and filecmp.cmp(file, target, shallow=False):
        file.unlink()
        return
    number = 2
    while target.exists():
        target = folder / f"{file.stem}.{number}{file.suffix}"
        number += 1
    file.replace(target)
