import sys

# The analysis environment runs the report (papermill, hvPlot): the Python running Snakemake.
PYTHON = sys.executable
REPORT_NOTEBOOK = REPOSITORY / "notebooks" / "04-report.ipynb"
# The report is redrawn when the code that draws it changes.
REPORT_CODE = sorted((REPOSITORY / "src" / "commlens" / "report").rglob("*.py"))


rule report:
    """notebooks/04-report.ipynb executed with papermill on the dataset: report.html (self-contained),
    figures/ (PNG, SVG, manifest.json) and the executed notebook, from the dataset alone."""
    input:
        dataset=DATASET,
        notebook=REPORT_NOTEBOOK,
        code=REPORT_CODE,
    output:
        # Deleted by Snakemake before the job and when it fails; the previous report's are given back then
        # (REPLACED, rules/common.smk).
        html=REPORT_HTML,
        notebook=REPORT_NOTEBOOK_RUN,
        figures=directory(FIGURES),
    params:
        python=PYTHON,   # a param, not the global: a module's globals are not the shell's
    log:
        RESULTS / "logs" / "report.log",
    shell:
        # :q quotes each path for the shell, whatever the working directory's name holds. Where the report
        # fails, its one-line error goes to the console too (commlens run shows it), not only to the log.
        "{params.python:q} -m commlens.cli report {input.dataset:q} > {log:q} 2>&1"
        " || {{ grep '^commlens report: ' {log:q} | tail -n 1 >&2; exit 1; }}"
