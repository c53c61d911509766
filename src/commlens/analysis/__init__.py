"""What a dataset says: statistics, latency-bandwidth models, anomalies, comparisons, history,
guidelines, and the `ds.commlens` accessor that calls them."""

from commlens.analysis.accessor import CommlensAccessor  # registers ds.commlens

__all__ = ["CommlensAccessor"]
