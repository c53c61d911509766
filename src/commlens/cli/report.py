"""`commlens report CAMPAIGN|DATASET`: the report notebook run with papermill, a line per cell as it
finishes with the time since the start (the report takes from ten seconds to minutes), and its
duration kept for the campaign's estimates (commlens.launch.progress)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from commlens.lean_imports import import_jsonschema

import_jsonschema()     # before papermill imports it (via nbformat) with a 2.4 s grammar: commlens.lean_imports

from papermill.engines import NBClientEngine, papermill_engines  # noqa: E402

from commlens.cli.datasets import open_dataset  # noqa: E402
from commlens.launch.progress import record_stage, stage_estimate_s  # noqa: E402
from commlens.units import format_duration  # noqa: E402

ENGINE = "commlens-cell-progress"
PREFIX = "[report]"    # what `commlens run` picks out of the report rule's log


class CellProgressEngine(NBClientEngine):
    """papermill's own engine, calling `on_cell(cell, index, cells)` after each cell it has executed
    (`cells`: the notebook's, with the one papermill added for the parameters)."""

    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, on_cell=None, **kwargs):
        if on_cell is not None:
            complete = nb_man.cell_complete

            def cell_complete(cell, cell_index=None, **more):
                complete(cell, cell_index=cell_index, **more)
                on_cell(cell, cell_index, nb_man.nb.cells)

            nb_man.cell_complete = cell_complete
        return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)


papermill_engines.register(ENGINE, CellProgressEngine)


def cell_label(source: str, width: int = 70) -> str:
    """What a cell does, in a few words: its first comment, else its first assignment, else its first
    line of code that is no import."""
    lines = [line.strip() for line in source.splitlines() if line.strip()]
    comment = next((line.lstrip("#").strip() for line in lines if line.startswith("#")), "")
    code = [line for line in lines if not line.startswith(("#", "import ", "from ", "%"))]
    assignment = next((line for line in code if re.match(r"^[\w, ]+ = ", line)), "")
    label = comment or assignment or (code[0] if code else "(empty)")
    return label if len(label) <= width else label[:width - 3] + "..."


def report(args) -> int:
    # The runner alone, not commlens.report's drawing modules: the notebook's kernel imports those itself.
    from commlens.report.notebook import NOTEBOOK, run_report_notebook

    path, ds = open_dataset(args.target)
    source = Path(ds.encoding.get("source", path))
    curves = ds.sizes["library"] * ds.sizes["placement"] * ds.sizes["kernel"]
    ds.close()
    baseline = None
    if args.baseline:
        baseline_path, baseline_ds = open_dataset(args.baseline)
        baseline = Path(baseline_ds.encoding.get("source", baseline_path))
        baseline_ds.close()
        from commlens.report.comparisons import baseline_warnings

        for line in baseline_warnings(source, baseline):
            print(f"commlens report: warning: measured differently: {line}", file=sys.stderr)
    print(f"{PREFIX} {path}: {NOTEBOOK.name} with papermill, about "
          f"{format_duration(stage_estimate_s('report', curves))}", flush=True)
    start = args.started

    def on_cell(cell, index, cells):
        if cell.cell_type != "code":
            return
        code = [i for i, c in enumerate(cells) if c.cell_type == "code"]
        print(f"{PREFIX} cell {code.index(index) + 1}/{len(code)}, {format_duration(time.monotonic() - start)}: "
              f"{cell_label(cell.source)}", flush=True)

    html = run_report_notebook(source, args.output_dir, baseline=baseline, engine_name=ENGINE, on_cell=on_cell)
    elapsed = time.monotonic() - start
    record_stage("report", curves, elapsed)
    print(f"report: {html} ({format_duration(elapsed)})", flush=True)
    return 0

