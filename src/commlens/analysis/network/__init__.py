"""The network as a whole: which node or link of an all-pairs measurement is slow, and which nodes share
a switch."""

from commlens.analysis.network.groups import NodeGroups, find_groups
from commlens.analysis.network.matrices import node_pair_times
from commlens.analysis.network.pairs import MIN_NODES, PairFindings, find_slow_nodes_and_links

__all__ = ["MIN_NODES", "NodeGroups", "PairFindings", "find_groups", "find_slow_nodes_and_links", "node_pair_times"]
