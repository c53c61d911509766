"""What a dataset says: statistics, latency-bandwidth models, anomalies, comparisons, history,
guidelines, and the `ds.commbench` accessor that calls them."""

from commbench.analysis.accessor import CommbenchAccessor  # registers ds.commbench

__all__ = ["CommbenchAccessor"]
