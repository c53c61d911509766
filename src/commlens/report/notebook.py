"""The report as a notebook's output: `run_report_notebook` executes notebooks/04-report.ipynb
with papermill (the workflow's report rule and `make report` both go through it), so the report
is always the notebook's output.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from commlens.io.archive import held_name
from commlens.io.atomic import WriteError, write_failure
from commlens.locations import ROOT
from commlens.report.pages import page_file
from commlens.units import format_size

NOTEBOOK = ROOT / "notebooks" / "04-report.ipynb"
# Once its last cell has run, the report's kernel has written every file (whole, through
# commlens.io.atomic) and its drawing processes have ended: it is stopped at once instead of asked to
# exit, which it takes 2.5-3.5 s to do once HoloViews, Bokeh and matplotlib are loaded (measured here,
# against 0.3 s for a bare kernel), a report's every run.
KERNEL_SHUTDOWN = "immediate"


def report_dir(dataset_path) -> Path:
    """Where a dataset's report goes: next to it (results/<campaign>/), wherever that is found from
    the working directory (a notebook's kernel starts in notebooks/, see commlens.locations)."""
    from commlens.locations import resolve

    path = resolve(dataset_path)
    return path if path.is_dir() else path.parent


def run_report_notebook(dataset, output_dir=None, notebook: Path = NOTEBOOK, baseline=None,
                        **papermill_options) -> Path:
    """Executes notebooks/04-report.ipynb with papermill on `dataset`; the executed copy is kept
    beside the report (report.ipynb) as the record of how it was made. The figures are drawn
    into report.html and figures/ only, not into the executed notebook as well. With `baseline`
    (another campaign's dataset) the report also compares this campaign against it.
    `papermill_options` go to papermill.execute_notebook (an engine that reports progress, say).

    The report is made in a folder of its own beside the previous one and takes its place only when
    whole (swap_in): a run that fails (a full disk, a cell's error) leaves the previous report as it was
    and nothing of its own, and raises; a full disk as WriteError naming the file and the space needed."""
    from commlens.lean_imports import import_jsonschema

    import_jsonschema()     # before papermill imports it (through nbformat): seconds saved, commlens.lean_imports
    import papermill

    from commlens.report.stderr_log import stderr_to

    output_dir = Path(output_dir) if output_dir else report_dir(dataset)
    output_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".report-", dir=output_dir))
    executed = staging / "report.ipynb"
    try:
        # The kernel's own warnings (transport, debugger, frozen modules) go to a log, not the terminal.
        with stderr_to(output_dir / "logs" / "report-kernel.log"):
            papermill.execute_notebook(str(notebook), str(executed), cwd=str(ROOT), progress_bar=False,
                                       parameters={"dataset": str(Path(dataset).resolve()),
                                                   "output_dir": str(staging.resolve()), "show_figures": False,
                                                   "baseline": str(Path(baseline).resolve()) if baseline else ""},
                                       shutdown_kernel=KERNEL_SHUTDOWN, **papermill_options)
        swap_in(staging, output_dir)
    except BaseException as error:
        written = _size(staging)
        shutil.rmtree(staging, ignore_errors=True)
        if _disk_full(error):
            # The kernel's WriteError reaches us as papermill's error, its message as `evalue`; the file is
            # named by the place it was to take.
            failure = (WriteError(str(error.evalue).splitlines()[0], executed, errno.ENOSPC)
                       if hasattr(error, "evalue")
                       else write_failure(error, getattr(error, "filename", None) or executed))
            previous = sum(max(_size(output_dir / name), _size(held_name(output_dir / name)))
                           for name in REPORT_NAMES)
            need = (f"it needs about {format_size(previous)}, the size of the previous report" if previous
                    else f"it needs more than the {format_size(written)} written before the disk filled")
            raise WriteError(f"{str(failure).replace(str(staging), str(output_dir))}: {need}; the previous report "
                             f"is kept", failure.filename, failure.errno) from error
        raise
    return output_dir / "report.html"


def swap_in(staging: Path, output_dir: Path) -> None:
    """The report made in `staging` in place of the one in `output_dir`: each previous file or folder of
    the report moves aside before the new one takes its name (renames, which need no space), report.html
    last, since its links lead to the others; then the previous report goes."""
    aside = Path(tempfile.mkdtemp(prefix=".report-previous-", dir=output_dir))
    try:
        new = _report_files(staging)
        for name in sorted(_report_files(output_dir), key=lambda name: name == "report.html"):
            os.replace(output_dir / name, aside / name)
        for name in sorted(new, key=lambda name: name == "report.html"):
            os.replace(staging / name, output_dir / name)
    finally:
        shutil.rmtree(aside, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)


REPORT_NAMES = ("report.html", "report.ipynb", "figures")   # and its other pages, page_file(...)


def _report_files(folder: Path) -> list[str]:
    """The names a report has in its folder: report.html, its other pages, report.ipynb, figures/."""
    names = [*REPORT_NAMES, *(p.name for p in folder.glob(page_file("*")))]
    return [name for name in names if (folder / name).exists()]


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def _disk_full(error: BaseException) -> bool:
    """A write that failed for want of space, as the file system, netCDF or papermill's kernel said it."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    words = str(getattr(error, "evalue", error)).lower()
    return "no space left on device" in words or "disk quota exceeded" in words
