"""The history of a campaign's datasets, and the outputs a run of the workflow replaces kept until their
replacements are whole.

A dataset about to be replaced is kept in history/<its creation time>/ beside it, with its failures.jsonl.

Snakemake deletes a job's outputs before it runs the job, and again when the job fails. So before any
job runs, the workflow gives each output it may replace (the dataset, failures.jsonl, report.html,
report.ipynb, figures/) a second name (hold(): a hard link, `.<name>.held`, which takes no space; a
folder of hard links for figures/). A collection finds the previous dataset under that name and keeps it
in history/; when the workflow ends, give_back() drops the second names of outputs that were replaced
and gives back their names to those that were not (their job failed, a full disk, an interruption):
the previous dataset and report stay in place until their replacements are whole. A dataset given back
is older than the raw files it does not hold, so the next run collects again (commlens.io.collected)."""

from __future__ import annotations

import filecmp
import os
import shutil
import sys
from datetime import datetime, UTC
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
    dataset_files = _dataset_files(Path(path))
    if give_back(*dataset_files) and Path(path).exists():
        folder = _archive(Path(path), log or sys.stderr) or folder
    return folder


def dataset_outputs(path) -> tuple[Path, ...]:
    """The files a collection replaces: the dataset at `path` and the failures.jsonl beside it."""
    return _dataset_files(Path(path))


def _dataset_files(path: Path) -> tuple[Path, Path]:
    return path, path.parent / "failures.jsonl"


def hold(*paths) -> None:
    """A second name for each file or folder in `paths` that exists (see the module's doc): a hard link,
    or for a folder a folder of hard links to its files. Where the file system has no hard links,
    nothing is held (and a job that Snakemake runs does not keep what it replaces)."""
    for path in map(Path, paths):
        held = held_name(path)
        try:
            if path.is_dir() and not path.is_symlink():
                if held.is_dir():
                    continue                  # held by an earlier run that could not give it back
                partial = held.with_name(held.name + ".tmp")
                shutil.rmtree(partial, ignore_errors=True)
                shutil.copytree(path, partial, copy_function=os.link, symlinks=True)
                os.replace(partial, held)
            elif path.is_file() and not path.is_symlink():
                if held.exists() and os.path.samefile(path, held):
                    continue
                partial = held.with_name(held.name + ".tmp")
                partial.unlink(missing_ok=True)
                os.link(path, partial)
                os.replace(partial, held)
        except OSError:
            pass


def give_back(*paths) -> bool:
    """For each path held (hold()): where it is gone (deleted, and not replaced), the held one takes its
    name again; where it is there (replaced, or never deleted), the held one goes. Whether anything was
    given back."""
    given = False
    for path in map(Path, paths):
        held = held_name(path)
        try:
            if held.is_dir() and not held.is_symlink():
                if path.exists() or path.is_symlink():
                    shutil.rmtree(held)
                else:
                    held.replace(path)
                    given = True
            elif held.exists():
                if held.stat().st_nlink > 1 or path.exists() or path.is_symlink():
                    held.unlink()             # the file has its name, or another (history/), still
                else:
                    held.replace(path)
                    given = True
        except FileNotFoundError:
            pass
    return given


def held_name(path: Path) -> Path:
    """The second name hold() gives `path`."""
    return path.with_name(f".{path.name}.held")


def _archive(path: Path, log) -> Path | None:
    """archive_previous for the file now at `path`."""
    if not path.exists():
        return None
    created, problem = _creation_time(path)
    stamp = _filesystem_stamp(created) if created else \
        datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H%M%SZ")
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
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
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
