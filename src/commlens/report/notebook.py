"""The report as a notebook's output: `run_report_notebook` executes notebooks/04-report.ipynb
with papermill (the workflow's report rule and `make report` both go through it), so the report
is always the notebook's output.
"""

from __future__ import annotations

import errno
from pathlib import Path

from commlens.io.atomic import write_failure
from commlens.locations import ROOT

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
    `papermill_options` go to papermill.execute_notebook (an engine that reports progress, say)."""
    from commlens.lean_imports import import_jsonschema

    import_jsonschema()     # before papermill imports it (through nbformat): seconds saved, commlens.lean_imports
    import papermill

    from commlens.report.stderr_log import stderr_to

    output_dir = Path(output_dir) if output_dir else report_dir(dataset)
    output_dir.mkdir(parents=True, exist_ok=True)
    executed = output_dir / "report.ipynb"
    # The kernel's own warnings (transport, debugger, frozen modules) go to a log, not the terminal.
    try:
        with stderr_to(output_dir / "logs" / "report-kernel.log"):
            papermill.execute_notebook(str(notebook), str(executed), cwd=str(ROOT), progress_bar=False,
                                       parameters={"dataset": str(Path(dataset).resolve()),
                                                   "output_dir": str(output_dir.resolve()), "show_figures": False,
                                                   "baseline": str(Path(baseline).resolve()) if baseline else ""},
                                       shutdown_kernel=KERNEL_SHUTDOWN, **papermill_options)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):   # papermill writing the executed notebook: name it
            raise write_failure(error, error.filename or executed) from error
        raise
    return output_dir / "report.html"
