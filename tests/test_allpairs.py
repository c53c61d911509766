"""All pairs of virtual nodes, with a planted slow node and a planted slow path between two others:
the campaign's dataset names that node and that link and nothing else, and no node or link of a clean
cluster (the real workflow, real wires, real MPI).

The clean cluster's links are judged too since each frame of a wire carries at most 125 us of its
link's time (commlens.launch.wire.BURST_S): with the node's TCP bursts passed whole, the pairs two
nodes apart (vnode4 to vnode0, vnode2 to vnode4, ...) took 20-40% longer than the others in every
launch, with either library, and the analysis named them, rightly, as slow links."""

import textwrap

import numpy as np
import pytest

from commlens import open_campaign
from commlens.data.export import pairs_table
from commlens.launch import vnodes
from commlens.report.analysis_table import ReportData
from commlens.report.methods import methods_markdown
from commlens.report.network_figures import pair_matrices

from conftest import snakemake

pytestmark = pytest.mark.mpi

NODES = 6


def test_a_slow_node_and_a_slow_link_are_named_and_nothing_of_a_clean_cluster(workspace, built):
    """Six virtual nodes on two cores at 20 Mbit/s (a pair's 8 KiB messages take 3.4 ms on the wire,
    far above what sharing the cores costs), vnode3's link planted at 10 Mbit/s: every pair through it
    takes about twice as long; and the path between vnode0 and vnode5 at 10 Mbit/s: that pair alone
    takes twice as long, which neither node's other pairs explain."""
    if reason := vnodes.unavailable_reason():
        pytest.skip(reason)
    campaign = workspace / "faults.yaml"
    campaign.write_text(textwrap.dedent(f"""
        campaign: faults
        libraries: {{mpich-5.0.2: {{mpi: mpich-5.0.2}}}}
        placements:
          - {{name: clean, nodes: {NODES}, ppn: 1, emulate: namespaces, network: {{rate: 20mbit, mtu: 1500}}}}
          - {{name: slow3, nodes: {NODES}, ppn: 1, emulate: namespaces, network: {{rate: 20mbit, mtu: 1500}},
              faults: [{{node: 3, rate: 10mbit}}, {{link: [0, 5], rate: 10mbit}}]}}
        kernels: {{allpairs.isolated: {{sizes: {{list: [8Ki]}}, window: 2}}}}
        launches: 3
        precision: {{rse: 0.05, min_samples: 3, max_samples: 5, max_point_time: 2}}
        timeout: 120
    """))
    snakemake(workspace, "results/faults/faults.nc", "--configfile", str(campaign))
    ds = open_campaign(workspace / "results" / "faults" / "faults.nc")
    assert (ds["status"] == "ok").all(), ds["reason"].values
    assert ds["faults"].sel(placement="slow3").item() == ('[{"node": 3, "rate": "10mbit"}, '
                                                          '{"link": [0, 5], "rate": "10mbit"}]')
    assert ds["faults"].sel(placement="clean").item() == "[]"
    methods = methods_markdown(ds)
    assert ("faults planted for validation: node 3's link 10 Mbit/s, the path between nodes 0 and 5 (what each "
            "sends the other) 10 Mbit/s") in methods
    assert methods.count("faults planted") == 1

    found = {name: ds.commlens.pairs("mpich-5.0.2", name, "allpairs.isolated", 8192) for name in ("clean", "slow3")}
    for name, findings in found.items():
        print(name, findings.named() or "nothing named", findings.nodes.round(3).to_string(), sep="\n")
    assert not found["clean"].nodes["named"].any() and not found["clean"].links["named"].any()
    slow = found["slow3"]
    assert list(slow.nodes["node"][slow.nodes["named"]]) == ["vnode3"]
    # The planted path is named, and no other link: vnode3's node effect explains every pair through it.
    named = slow.links[slow.links["named"]]
    assert list(zip(named["a"], named["b"])) == [("vnode0", "vnode5")], slow.links.round(3).to_string()
    # Each fault halves the rate of one of the two links its pairs' frames cross, each way: the wire
    # time doubles and the rest (MPI, the stack, the barrier) does not, so the pairs are a little less
    # than twice as slow, an effect just below 1.0: 0.95-0.97 on a quiet host. That limit is checked at
    # the confidence the analysis states, not on the estimate alone: the link's is one pair a launch,
    # and a busy host spreads it (1.02 [0.83, 1.23] in a full test run, the node's 0.916 [0.906, 0.925]).
    for fault in (named.iloc[0], slow.nodes.set_index("node").loc["vnode3"]):
        assert fault["effect"] > 0.6 and fault["low"] < 1.0, fault
    assert np.isfinite(ds["pair_time"].sel(placement="slow3")).sum() == 3 * NODES * (NODES - 1)
    # Exported, a row per pair a launch timed, each rank on the node its launch recorded: one node a rank.
    rows = pairs_table(ds)
    assert len(rows) == 2 * 3 * NODES * (NODES - 1) and (rows["source_node"] != rows["destination_node"]).all()
    assert set(rows["source_node"]) == set(rows["destination_node"]) == {f"vnode{n}" for n in range(NODES)}

    # The report's heatmap: every node pair's cell, its caption naming what the launches named.
    figures = {figure.name: figure for figure in pair_matrices(ReportData(ds))}
    assert set(figures) == {"pairs-allpairs.isolated-mpich-5.0.2-clean", "pairs-allpairs.isolated-mpich-5.0.2-slow3"}
    slow_figure = figures["pairs-allpairs.isolated-mpich-5.0.2-slow3"]
    assert "vnode3: every pair through it" in slow_figure.caption and "vnode0 - vnode5: " in slow_figure.caption
    heatmap = slow_figure.build()
    assert len(heatmap.data) == NODES * NODES and heatmap.data["bandwidth_MBps"].notna().sum() == NODES * (NODES - 1)
