"""The network as a whole: which node or link of an all-pairs measurement is slow."""

from commbench.analysis.network.pairs import PairFindings, find_slow_nodes_and_links

__all__ = ["PairFindings", "find_slow_nodes_and_links"]
