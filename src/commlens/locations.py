"""Where a relative dataset path such as `results/quick/quick.nc` points, whatever the working
directory: JupyterLab starts a notebook's kernel in the notebook's folder (`notebooks/`), VS Code
and papermill wherever they were started, while campaigns write under the checkout's `results/`.

A relative path is tried, in order: as given (the working directory); under `$COMMLENS_RESULTS`
(a results folder kept elsewhere: `results/quick/quick.nc` is looked up as
`$COMMLENS_RESULTS/quick/quick.nc`); against the checkout that holds the working directory
(the nearest parent with `workflow/Snakefile`); against the checkout this package runs from.

The files the package reads at run time (notebooks/, kernels/, workflow/schemas/, envs/analysis.txt)
are found under ROOT: the checkout this package runs from (an editable install, the tests), else the
installed package's share/ folder, where its wheel carries copies of them at the same relative
paths (pyproject.toml maps them in at build time).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

RESULTS_VARIABLE = "COMMLENS_RESULTS"
CACHE_VARIABLE = "COMMLENS_CACHE"


def _is_checkout(directory: Path) -> bool:
    return (directory / "workflow" / "Snakefile").is_file()


def _checkout_of(directory: Path) -> Path | None:
    return next((candidate for candidate in (directory, *directory.parents) if _is_checkout(candidate)), None)


PACKAGE_DIR = Path(__file__).resolve().parent
# The checkout whose src/ this package is imported from; None for an installed copy.
CHECKOUT = PACKAGE_DIR.parents[1] if _is_checkout(PACKAGE_DIR.parents[1]) else None
ROOT = CHECKOUT or PACKAGE_DIR / "share"


def candidates(path) -> list[Path]:
    """Every place a path may mean, in the order they are tried (the path itself first)."""
    path = Path(path).expanduser()
    if path.is_absolute():
        return [path]
    places = [path]
    results = os.environ.get(RESULTS_VARIABLE)
    if results:
        inside = path.relative_to("results") if path.parts[:1] == ("results",) else path
        places.append(Path(results).expanduser() / inside)
    for root in (_checkout_of(Path.cwd().resolve()), CHECKOUT):
        if root is not None:
            places.append(root / path)
    return list(dict.fromkeys(places))


def resolve(path) -> Path:
    """The first of candidates(path) that exists; the path as given when none does."""
    return next((place for place in candidates(path) if place.exists()), Path(path).expanduser())


def cache_dir() -> Path:
    """Where commlens keeps what it can remake (the kernel catalogue tool, validated campaigns):
    $COMMLENS_CACHE, else $XDG_CACHE_HOME/commlens, else ~/.cache/commlens."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "commlens"


def built_in_cache(program: Path, command: list[str], error: type[Exception], output: Path | None = None) -> Path:
    """`program` (a path under cache_dir()), made by running `command` unless it is there: two processes
    building at once build once. A command that writes `output` instead (a build killed half-way must not
    leave a program to be found) has it renamed to `program` once it succeeded. Raises `error` with the
    build's output when the build fails or makes no program."""
    if program.exists():
        return program
    program.parent.mkdir(parents=True, exist_ok=True)
    with open(program.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not program.exists():
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode == 0 and output is not None and output.exists():
                output.rename(program)
            if done.returncode != 0 or not program.exists():
                raise error(f"building {program.name} failed ({' '.join(command)}):\n"
                            f"{(done.stdout + done.stderr)[-2000:]}")
    return program
