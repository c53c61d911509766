"""Where a relative dataset path such as `results/quick/quick.nc` points, whatever the working
directory: JupyterLab starts a notebook's kernel in the notebook's folder (`notebooks/`), VS Code
and papermill wherever they were started, while campaigns write under the checkout's `results/`.

A relative path is tried, in order: as given (the working directory); under `$COMMBENCH_RESULTS`
(a results folder kept elsewhere: `results/quick/quick.nc` is looked up as
`$COMMBENCH_RESULTS/quick/quick.nc`); against the checkout that holds the working directory
(the nearest parent with `workflow/Snakefile`); against the checkout this package runs from.
"""

from __future__ import annotations

import os
from pathlib import Path

from .provenance import REPO_ROOT

RESULTS_VARIABLE = "COMMBENCH_RESULTS"


def _checkout_of(directory: Path) -> Path | None:
    for candidate in (directory, *directory.parents):
        if (candidate / "workflow" / "Snakefile").is_file():
            return candidate
    return None


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
    for root in (_checkout_of(Path.cwd().resolve()), REPO_ROOT):
        if root is not None:
            places.append(root / path)
    return list(dict.fromkeys(places))


def resolve(path) -> Path:
    """The first of candidates(path) that exists; the path as given when none does."""
    return next((place for place in candidates(path) if place.exists()), Path(path).expanduser())
