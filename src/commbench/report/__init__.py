"""The report: its analysis table, figures and tables, the Methods section, HTML pages and static
drawing."""

from commbench.report.analysis_table import ReportData
from commbench.report.comparison_figures import ratio_figures
from commbench.report.comparisons import Comparison, baseline_warnings, changed_ranges_table
from commbench.report.document import report_dir, write_report
from commbench.report.elements import Figure, Skipped, Table, readable
from commbench.report.figures import all_figures, findings_figure, library_comparison
from commbench.report.methods import methods_markdown
from commbench.report.notebook import run_report_notebook
from commbench.report.tables import all_tables

__all__ = ["Comparison", "Figure", "ReportData", "Skipped", "Table", "all_figures", "all_tables",
           "baseline_warnings", "changed_ranges_table", "findings_figure", "library_comparison", "methods_markdown",
           "ratio_figures", "readable", "report_dir", "run_report_notebook", "write_report"]
