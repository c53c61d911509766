import pytest

from commlens.campaign import CampaignError, load_campaign

from conftest import REPO, campaign_error as error_of, write_campaign as write

VALID = """
campaign: tiny
libraries:
  mpich: {mpi: mpich-5.0.2}
  openmpi-tuned: {mpi: openmpi-5.0.11, env: {OMPI_MCA_btl_sm_eager_limit: 16384, FLAG: true}}
placements:
  - {name: 1N2P, nodes: 1, ppn: 2}
  - {name: 2N1P, nodes: 2, ppn: 1}
kernels:
  pingpong.send: {sizes: {list: [1, 1Ki, 64Ki]}}
"""


def test_default_campaign_is_valid_and_has_defaults():
    campaign = load_campaign(REPO / "config" / "campaigns" / "quick.yaml")
    assert campaign.name == "quick"
    assert campaign.libraries == ["mpich-5.0.2", "openmpi-5.0.11"]
    assert campaign.placements == ["1N2P", "2N1P"]
    assert campaign.launches == 3
    assert len(list(campaign.runs())) == 2 * 2 * 1 * 3
    # No MIN: the harness's own, 0 B for a latency (as osu_latency and IMB's PingPong), 1 B for a bandwidth.
    assert campaign.kernel_args("pingpong.send", 0)[:5] == ["pingpong.send", "--schedule", "powers", "-m", ":4194304"]


def test_defaults_fill_what_the_file_leaves_out(tmp_path):
    campaign = load_campaign(write(tmp_path, VALID))
    assert campaign.config["launches"] == 3
    assert campaign.config["timeout"] == 300
    assert campaign.config["precision"] == {"rse": 0.01, "min_samples": 10, "max_samples": 500,
                                            "max_point_time": 5}
    args = campaign.kernel_args("pingpong.send", 2)
    assert args[:3] == ["pingpong.send", "--sizes", "1,1024,65536"]
    assert args[-2:] == ["--shuffle", "2"] and "--integrity" not in args
    assert args[args.index("--cache") + 1] == "reuse" and args[args.index("--timer") + 1] == "mpi_wtime"
    assert campaign.library_env("openmpi-tuned") == {"OMPI_MCA_btl_sm_eager_limit": "16384", "FLAG": "1"}
    assert campaign.mpi_names == ["mpich-5.0.2", "openmpi-5.0.11"]


def test_omitted_sizes_default_to_powers_up_to_4mi(tmp_path):
    text = VALID.replace("pingpong.send: {sizes: {list: [1, 1Ki, 64Ki]}}", "pingpong.send: {}")
    campaign = load_campaign(write(tmp_path, text))
    assert campaign.kernel_args("pingpong.send", 0)[:5] == ["pingpong.send", "--schedule", "powers", "-m", ":4194304"]


def test_schedules_take_their_own_ranges_and_options(tmp_path):
    text = VALID.replace("pingpong.send: {sizes: {list: [1, 1Ki, 64Ki]}}", """pingpong.send: {sizes: {schedule: small}}
  pingpong.send@netpipe: {sizes: {schedule: netpipe, max: 1Mi, per_octave: 4, perturbation: 1}, """
                                                                "cache: rotate, integrity: true}")
    campaign = load_campaign(write(tmp_path, text + "shuffle: false\n"))
    small = campaign.kernel_args("pingpong.send", 0)
    assert small[:5] == ["pingpong.send", "--schedule", "small", "-m", "4:8000"] and "--shuffle" not in small
    netpipe = campaign.kernel_args("pingpong.send@netpipe", 1)
    assert netpipe[:9] == ["pingpong.send", "--schedule", "netpipe", "-m", "1:1048576",
                           "--per-octave", "4", "--perturbation", "1"]
    assert "--integrity" in netpipe and netpipe[netpipe.index("--cache") + 1] == "rotate"
    assert campaign.kernels == ["pingpong.send", "pingpong.send@netpipe"]


def test_datatype_sizes_must_be_whole_elements(tmp_path):
    text = VALID.replace("{sizes: {list: [1, 1Ki, 64Ki]}}", "{sizes: {list: [4, 6, 1Ki]}, datatype: int}")
    assert "multiples of 4 bytes; not: 6" in error_of(tmp_path, text)


def test_config_hash_follows_content(tmp_path):
    a = load_campaign(write(tmp_path, VALID, "a.yaml"))
    b = load_campaign(write(tmp_path, VALID + "\n# a comment only\n", "b.yaml"))
    c = load_campaign(write(tmp_path, VALID + "launches: 5\n", "c.yaml"))
    assert a.config_hash == b.config_hash != c.config_hash


def test_unknown_key_names_the_key_and_suggests(tmp_path):
    message = error_of(tmp_path, VALID + "launchs: 2\n")
    assert "unknown key 'launchs'" in message and "did you mean 'launches'" in message


def test_unknown_kernel_lists_allowed_names(tmp_path):
    message = error_of(tmp_path, VALID.replace("pingpong.send:", "pingpong.sendd:"))
    assert "kernels" in message and "'pingpong.sendd'" in message
    assert "did you mean 'pingpong.send'" in message and "allowed values: pingpong.send" in message


def test_unsafe_names_are_refused(tmp_path):
    message = error_of(tmp_path, VALID.replace("name: 2N1P", "name: 2N 1P/x"))
    assert "placements[1].name" in message and "'2N 1P/x'" in message


def test_bad_values_name_their_key(tmp_path):
    message = error_of(tmp_path, VALID.replace("nodes: 2", "nodes: 0") + "launches: two\n")
    assert "placements[1].nodes" in message and "launches" in message


def test_size_schedule_names_allowed_schedules(tmp_path):
    message = error_of(tmp_path, VALID.replace("{list: [1, 1Ki, 64Ki]}", "{schedule: fibonacci}"))
    assert "kernels.pingpong.send.sizes.schedule" in message and "allowed values: powers" in message


def test_inconsistent_values(tmp_path):
    text = VALID.replace("{list: [1, 1Ki, 64Ki]}", "{schedule: powers, min: 1Mi, max: 1Ki}")
    text = text.replace("name: 2N1P", "name: 1N2P")
    message = error_of(tmp_path, text)
    assert "min 1Mi is larger than max 1Ki" in message and "'1N2P' is used more than once" in message


def test_window_buffers_are_passed_on_and_integrity_needs_distinct_ones(tmp_path):
    text = VALID.replace("pingpong.send: {sizes: {list: [1, 1Ki, 64Ki]}}",
                         "stream.uni: {sizes: {list: [1Ki]}, window_buffers: distinct}\n"
                         "  stream.bi: {sizes: {list: [1Ki]}}")
    campaign = load_campaign(write(tmp_path, text))
    args = campaign.kernel_args("stream.uni", 0)
    assert args[args.index("--window-buffers") + 1] == "distinct"
    assert "--window-buffers" not in campaign.kernel_args("stream.bi", 0)    # the harness's default: shared
    message = error_of(tmp_path, text.replace("window_buffers: distinct", "window_buffers: shared, integrity: true"))
    assert "kernels.stream.uni: integrity needs window_buffers: distinct" in message
    message = error_of(tmp_path, text.replace("window_buffers: distinct", "window_buffers: separate"))
    assert "kernels.stream.uni.window_buffers" in message and "shared" in message and "distinct" in message


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(CampaignError, match="no such campaign file"):
        load_campaign(tmp_path / "absent.yaml")
    with pytest.raises(CampaignError, match="not valid YAML"):
        load_campaign(write(tmp_path, "campaign: [unclosed\n"))


def test_emulated_network_needs_two_nodes_and_a_tc_rate(tmp_path):
    message = error_of(tmp_path, VALID.replace("{name: 1N2P, nodes: 1, ppn: 2}",
                                               "{name: 1N2P, nodes: 1, ppn: 2, network: {rate: 1gbit, mtu: 1500}}"))
    assert "an emulated interconnect needs nodes >= 2" in message
    message = error_of(tmp_path, VALID.replace("{name: 2N1P, nodes: 2, ppn: 1}",
                                               "{name: 2N1P, nodes: 2, ppn: 1, network: {rate: fast, mtu: 1500}}"))
    assert "placements[1].network.rate" in message and "'fast'" in message


def test_planted_faults_name_an_existing_node_of_virtual_nodes_with_a_network(tmp_path):
    two_nodes = "{name: 2N1P, nodes: 2, ppn: 1}"
    message = error_of(tmp_path, VALID.replace(two_nodes, "{name: 2N1P, nodes: 2, ppn: 1, network: {rate: 1gbit, "
                                                          "mtu: 1500}, faults: [{node: 2, rate: 10mbit}]}"))
    assert "plants a fault on node 2; its nodes are 0 to 1" in message
    message = error_of(tmp_path, VALID.replace(two_nodes, "{name: 2N1P, nodes: 2, ppn: 1, faults: [{node: 1, "
                                                          "delay: 1ms}]}"))
    assert "plants faults: on its links, which needs virtual nodes with a network:" in message
    message = error_of(tmp_path, VALID.replace(two_nodes, "{name: 2N1P, nodes: 2, ppn: 1, network: {rate: 1gbit, "
                                                          "mtu: 1500}, faults: [{node: 1}]}"))
    assert "placements[1].faults[0]" in message
    # A link joins two different nodes of the placement; a fault names a node or a link, not both.
    network = "{name: 2N1P, nodes: 2, ppn: 1, network: {rate: 1gbit, mtu: 1500}, faults: [FAULT]}"
    for fault, said in (("{link: [0, 2], rate: 10mbit}", "plants a fault on node 2; its nodes are 0 to 1"),
                        ("{link: [1, 1], rate: 10mbit}", "plants a fault on the link [1, 1]; a link joins two "
                                                         "different nodes"),
                        ("{link: [0, 1, 1], rate: 10mbit}", "placements[1].faults[0].link"),
                        ("{node: 0, link: [0, 1], rate: 10mbit}", "placements[1].faults[0]")):
        message = error_of(tmp_path, VALID.replace(two_nodes, network.replace("FAULT", fault)))
        assert said in message, (fault, message)
    path = write(tmp_path, VALID.replace(two_nodes, network.replace("FAULT", "{link: [0, 1], delay: 1ms}")))
    assert load_campaign(path).placement("2N1P")["faults"] == [{"link": [0, 1], "delay": "1ms"}]


def test_a_topology_fills_two_leaves_or_more_of_virtual_nodes_with_a_network(tmp_path):
    two_nodes = "{name: 2N1P, nodes: 2, ppn: 1}"
    leaves = "{name: 2N1P, nodes: NODES, ppn: 1, network: {rate: 1gbit, mtu: 1500}, topology: TOPOLOGY}"
    for nodes, topology, said in (
            (6, "{leaf_nodes: 4, uplink: {rate: 1gbit}}",
             "has nodes: 6 and topology leaf_nodes: 4; the nodes must fill two leaves or more of leaf_nodes each "
             "(nodes a multiple of 4, at least 8)"),
            (4, "{leaf_nodes: 4, uplink: {rate: 1gbit}}", "at least 8)"),
            (4, "{leaf_nodes: 2}", "placements[1].topology"),
            (4, "{leaf_nodes: 2, uplink: {rate: fast}}", "placements[1].topology.uplink.rate")):
        message = error_of(tmp_path, VALID.replace(two_nodes, leaves.replace("NODES", str(nodes))
                                                   .replace("TOPOLOGY", topology)))
        assert said in message, (topology, message)
    message = error_of(tmp_path, VALID.replace(two_nodes, "{name: 2N1P, nodes: 4, ppn: 1, topology: {leaf_nodes: 2, "
                                                          "uplink: {rate: 1gbit}}}"))
    assert "has a topology:, which joins virtual nodes with a network:" in message
    path = write(tmp_path, VALID.replace(two_nodes, leaves.replace("NODES", "4").replace(
        "TOPOLOGY", "{leaf_nodes: 2, uplink: {rate: 20mbit}}")))
    assert load_campaign(path).placement("2N1P")["topology"] == {"leaf_nodes": 2, "uplink": {"rate": "20mbit"}}


def test_kernels_can_be_limited_to_some_placements(tmp_path):
    text = VALID.replace("pingpong.send: {sizes: {list: [1, 1Ki, 64Ki]}}",
                         "pingpong.send: {placements: [2N1P]}\n  memcpy: {placements: [1N2P]}")
    campaign = load_campaign(write(tmp_path, text + "launches: 1\n"))
    assert sorted((p, k) for _, p, k, _ in campaign.runs()) == [("1N2P", "memcpy"), ("1N2P", "memcpy"),
                                                                ("2N1P", "pingpong.send"), ("2N1P", "pingpong.send")]
    assert "'3N1P' not among the campaign's placements" in error_of(
        tmp_path, VALID.replace("{sizes: {list: [1, 1Ki, 64Ki]}}", "{placements: [3N1P]}"))


def test_shipped_campaigns_are_valid():
    for path in sorted((REPO / "config" / "campaigns").glob("*.yaml")):
        assert load_campaign(path).name == path.stem


# --- how many sizes a launch measures, however they are given ------------------------------------

@pytest.mark.parametrize("sizes, count", [
    ("{schedule: small, step: 1, max: 4Mi}", 4_194_301),                # 4, 5, 6 ... 4Mi
    ("{schedule: small, min: 0, max: 1000, step: 1}", 1_001),           # one more than a launch measures
    ("{schedule: netpipe, per_octave: 64, max: 4Mi}", 2_874),
    ("{schedule: netpipe, per_octave: 64, perturbation: 0, max: 1024Gi}", 2_234),
])
def test_a_schedule_that_gives_more_sizes_than_a_launch_measures_is_refused(tmp_path, sizes, count):
    message = error_of(tmp_path, VALID.replace("{list: [1, 1Ki, 64Ki]}", sizes))
    assert f"kernels.pingpong.send.sizes: {count:,} sizes (schedule " in message, message
    assert "; a launch measures at most 1,000 (" in message, message


def test_the_bound_on_sizes_is_the_schemas_bound_on_a_list(tmp_path):
    from commlens.campaign.bounds import MAX_SIZES
    from commlens.campaign.schema import load_schema

    sizes = load_schema()["properties"]["kernels"]["additionalProperties"]["properties"]["sizes"]
    assert [branch["properties"]["list"]["maxItems"] for branch in sizes["oneOf"] if "list" in branch["properties"]] \
        == [MAX_SIZES]
    # A schedule of exactly MAX_SIZES sizes is a campaign.
    text = VALID.replace("{list: [1, 1Ki, 64Ki]}", "{schedule: small, min: 1, max: 1000, step: 1}")
    assert load_campaign(write(tmp_path, text)).kernel_args("pingpong.send", 0)[:5] == \
        ["pingpong.send", "--schedule", "small", "-m", "1:1000"]


def test_a_shipped_campaign_of_fewer_than_three_launches_says_why_in_its_header():
    """Launch-level intervals need three launches at least: a shipped campaign that runs fewer says why in the
    comment block above its first key, and what its intervals then are."""
    import yaml

    for path in sorted((REPO / "config" / "campaigns").glob("*.yaml")):
        text = path.read_text()
        launches = yaml.safe_load(text).get("launches", 3)
        if isinstance(launches, int) and launches < 3:
            header = text[:text.index("campaign:")]
            assert "within one launch" in header or "launch-to-launch" in header, path.name
