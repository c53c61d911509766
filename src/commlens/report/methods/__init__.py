"""The report's Methods section: how a campaign dataset's numbers were measured and analysed.

`methods(ds)` states, from the dataset alone (its attrs, coords and per-launch records) and from
the code constants it names, what a reviewer needs to repeat the study: what one sample of each
kernel is, the timer and its resolution, the stopping rule and its target, launches and the
order of sizes, placements, binding and what was emulated, buffers and cache mode, how the
report's intervals and verdicts are computed, and the machine and software. The checklist of
Hoefler and Belli's "Scientific Benchmarking of Parallel Computing Systems" (SC 2015) is the
guide. What the dataset does not hold is said to be "not recorded", never guessed, so an older
dataset (or a synthetic one) gets a shorter section, not a wrong one.

How the harness samples (calibration, the stopping rule's statistic) is the harness's code: the
section names the kernel source hash the dataset was measured with, and says so where that is
not the source in this checkout.
"""

from commlens.report.methods.facts import NOT_RECORDED
from commlens.report.methods.sections import Section, methods
from commlens.report.methods.text import methods_html, methods_markdown

__all__ = ["NOT_RECORDED", "Section", "methods", "methods_html", "methods_markdown"]
