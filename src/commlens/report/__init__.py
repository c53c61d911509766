"""The report: its analysis table, figures and tables, the Methods section, HTML pages and static
drawing.

A lazy facade: a name below is imported from its module on first use. `commlens report` runs the
report notebook from a Python that needs only commlens.report.notebook; importing the drawing
modules as well (hvPlot, Panel, Bokeh, HoloViews, matplotlib) cost it 5 s before the notebook's
kernel, which imports them again, had started.
"""

import importlib

_MODULES = {
    "ReportData": "analysis_table",
    "ratio_figures": "comparison_figures",
    "Comparison": "comparisons", "baseline_warnings": "comparisons", "changed_ranges_table": "comparisons",
    "write_report": "document",
    "Figure": "elements", "Skipped": "elements", "Table": "elements", "readable": "elements",
    "all_figures": "figures", "findings_figure": "figures", "library_comparison": "figures",
    "methods_markdown": "methods",
    "report_dir": "notebook", "run_report_notebook": "notebook",
    "all_tables": "tables",
}

__all__ = sorted(_MODULES)   # noqa: PLE0605  (sorted() returns a list; ruff takes only a literal for one)


def __getattr__(name: str):
    if name not in _MODULES:
        raise AttributeError(f"module 'commlens.report' has no attribute {name!r}")
    return getattr(importlib.import_module(f"commlens.report.{_MODULES[name]}"), name)


def __dir__():
    return sorted(set(globals()) | set(_MODULES))
