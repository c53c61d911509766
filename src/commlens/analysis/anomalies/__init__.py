"""Anomalies of one curve: packet steps, protocol switches, alignment classes and spikes.

`detect(sizes, times)` takes what the models take (see commlens.analysis.models) and
returns one row per finding. Every decision is a significance test against the
curve's own noise, never an absolute threshold: the noise is the robust spread of
the per-size medians between sizes (see relative_noise), floored by the standard
error the samples themselves give, and every test scales up with whatever the
final model leaves unexplained. A finding needs `threshold` such standard
deviations (6 by default): with a few hundred tests per curve that keeps a clean
curve, even under heavy-tailed noise, free of findings.

The detectors run in the order in which each one's effect would confuse the next:
packet steps (regular, many), then protocol switches on the curve with the steps
taken out, then alignment classes and isolated spikes in what the structural model
leaves. An alignment class shows either way round: a few sizes slower, or (as on most
machines) every size slower but the aligned ones; a class found is levelled and the
structure fitted again, since a class's sizes at the end of a segment or among the
smallest sizes pull the first fit into switches and spikes of their own.

On real curves the structure is found in each launch and kept where the launches agree
(`detect_launches`): a launch in a slow mode, a host that changed speed, shows the same switch at the
same size, sometimes the other way up, and launches pooled first placed it between them. Every finding
must also matter in size (PRACTICAL: its magnitude against the curve's time there): a bend that passes
the test against the noise of a flat stretch is no protocol switch; a breakpoint with a small jump but a
new bandwidth after it is a regime change. A finding of one launch alone needs a stricter score.

The detector (`detect`, `detect_launches`, and the table they return) is in detector; the noise level each test is
held against in noise; the structural model (packet steps, then protocol switches) in steps,
switches and structure; what that model leaves, in alignment and spikes.
"""

from commlens.analysis.anomalies.detector import COLUMNS, MIN_SIZES, PRACTICAL, detect, detect_launches, empty_table
from commlens.analysis.anomalies.noise import relative_noise, tail_aware_spread

__all__ = ["detect", "detect_launches", "COLUMNS", "PRACTICAL", "empty_table", "MIN_SIZES", "relative_noise",
           "tail_aware_spread"]
