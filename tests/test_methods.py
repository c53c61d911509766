"""The report's Methods section states what the dataset recorded, and only that: how each placement's
nodes were made (one node, virtual nodes, one host's loopback, real hosts), the transport, the links,
the environment commlens's launcher set and the binding, for datasets of every emulation kind and
both families collected from launch records as a campaign writes them; a real campaign's timer,
launches, stopping target and libraries; a dataset that lacks a record says "not recorded"."""

import json
from pathlib import Path

import pytest

from commlens.data import synthetic as syn
from commlens.campaign import Campaign, validate_campaign
from commlens.data.collect import build_dataset, read_all
from commlens.data.imported import import_files
from commlens.interactive import append_to_campaign
from commlens.io.netcdf import write_dataset
from commlens import open_campaign
from commlens.launch.families import FAMILIES
from commlens.launch import wire
from commlens.launch.placement import Placement
from commlens.report.methods import NOT_RECORDED, methods, methods_html, methods_markdown

from conftest import launch

HEADINGS = ["Kernels and what one sample is", "Timer", "Stopping rule", "Launches and order",
            "Placements, binding and emulation", "Buffers and cache", "Intervals and verdicts",
            "Machine and software"]
SHARED = "stream.uni shared (one buffer per window, as osu_bw)"
DISTINCT = "stream.uni distinct (a buffer per message of the window)"


def nanoseconds(seconds: float) -> str:
    assert 1e-9 <= seconds < 1e-6, seconds      # the timers here tick in nanoseconds
    return f"{seconds / 1e-9:.3g} ns"


# ----------------------------------------------------------------------------- without MPI

def synthetic(kernels=("stream.uni", "pingpong.send"), launches=1):
    truth, grid = syn.GroundTruth(1e-6, 1e10), [1024, 2**20]
    return syn.campaign_dataset({("lib", "1N2P", kernel): syn.generate(grid, truth, n_samples=5, n_launches=launches)
                                 for kernel in kernels})


def test_a_dataset_without_provenance_says_not_recorded_instead_of_guessing():
    sections = methods(synthetic())
    assert [s.heading for s in sections] == HEADINGS
    text = methods_markdown(synthetic())
    for missing in ("Its resolution (the smallest nonzero step it showed, measured by every launch before "
                    "sampling): not recorded.", "Stopping rule and its target: not recorded.",
                    "Order of sizes within a launch: not recorded.", "Hosts: not recorded. CPU: not recorded. "
                    "OS: not recorded.", "stream.uni not recorded (older dataset)", "pingpong.send: not recorded.",
                    "1N2P: shape not recorded; transport: not recorded; hosts: not recorded; environment set: "
                    "not recorded"):
        assert missing in text, missing
    # What the samples themselves hold is still stated.
    assert "2 sizes, 1 KiB to 1 MiB" in text and "Samples per point: 5" in text
    page = methods_html(synthetic())
    assert page.startswith("<h2 id='methods'>Methods</h2>") and page.count("<h3>") == len(HEADINGS)


def test_the_section_follows_the_recorded_configuration():
    ds = synthetic(("stream.uni", "stream.uni@distinct", "pingpong.send"), launches=3)
    ds = ds.assign_coords(window_buffers=("kernel", ["", "shared", "distinct"]))
    config = {"launches": 3, "shuffle": True, "timeout": 60,
              "precision": {"rse": 0.02, "min_samples": 7, "max_samples": 300, "max_point_time": 2},
              "kernels": {k: {"window": 16, "cache": "rotate" if "@" in k else "reuse", "timer": "mpi_wtime"}
                          for k in ("stream.uni", "stream.uni@distinct", "pingpong.send")}}
    ds.attrs["campaign_config"] = json.dumps(config)
    text = methods_markdown(ds)
    assert "shared (one buffer per window, as osu_bw)" in text and "stream.uni@distinct distinct" in text
    assert "at most 0.02 (2.0%) with at least 7 samples, or until 300 samples, or 2 s" in text
    assert "every library, placement and kernel: 3; the dataset holds 3 per cell" in text
    assert "rotate (NetPIPE's no-cache mode" in text and "for stream.uni@distinct" in text
    assert "the band is the median -+ t(L-1) sqrt(pi/2) sd / sqrt(L)" in text and "Launches per point here: 3" in text
    assert "Time limit per launch: 60 s" in text and "With one launch the band" not in text

    config.update(launches=1, shuffle=False, precision={**config["precision"], "rse": 0.1})
    one = ds.isel(launch=[0])
    one.attrs["campaign_config"] = json.dumps(config)
    text = methods_markdown(one)
    assert "at most 0.1 (10.0%)" in text and "kernel: 1; the dataset holds 1 per cell" in text
    assert "measured in schedule order" in text
    assert "With one launch the band is that launch's distribution-free" in text


# ----------------------------------------------------------------------------- every emulation kind

# Placements of every kind, and what a launch of each records (commlens.launch.run): transport,
# emulated, emulation, the hosts its ranks ran on, and for each family the environment the launcher set.
ON_NODE = "on one node; transport: shared memory"
KINDS = {
    "1N2P": ({"nodes": 1, "ppn": 2}, {"transport": "shm", "emulated": False, "emulation": ""}, ["vm", "vm"]),
    "2N1P": ({"nodes": 2, "ppn": 1}, {"transport": "tcp", "emulated": True, "emulation": "namespaces"},
             ["vnode0", "vnode1"]),
    "2N1P-lo": ({"nodes": 2, "ppn": 1, "emulate": "loopback"},
                {"transport": "tcp", "emulated": True, "emulation": "loopback"}, ["vm", "vm"]),
    "2N1P-1g": ({"nodes": 2, "ppn": 1, "network": {"rate": "1gbit", "mtu": 1500}},
                {"transport": "tcp", "emulated": True, "emulation": "namespaces", "link_shaper": "tbf"},
                ["vnode0", "vnode1"]),
    # Recorded where the kernel has no netem: "wire" is what links would be, the switch a token bucket.
    "4N1P-sw": ({"nodes": 4, "ppn": 1, "switch": {"rate": "2gbit"}},
                {"transport": "tcp", "emulated": True, "emulation": "namespaces", "link_shaper": "wire",
                 "switch_shaper": "tbf"},
                [f"vnode{n}" for n in range(4)]),
    "2N1P-lo-1g": ({"nodes": 2, "ppn": 1, "emulate": "loopback",
                    "network": {"rate": "100mbit", "mtu": 9000, "delay": "50us", "loss": 0.5}},
                   {"transport": "tcp", "emulated": True, "emulation": "loopback", "link_shaper": "netem"},
                   ["vm", "vm"]),
    # Links made by wire processes, which record how much of the link's time one frame carried.
    "2N1P-wire": ({"nodes": 2, "ppn": 1, "network": {"rate": "20mbit", "mtu": 1500}},
                  {"transport": "tcp", "emulated": True, "emulation": "namespaces", "link_shaper": "wire",
                   "link_burst_s": 125e-6, "link_priority": "real-time"}, ["vnode0", "vnode1"]),
    # Two leaf switches of two nodes, joined through uplinks of 20 Mbit/s.
    "4N1P-leaves": ({"nodes": 4, "ppn": 1, "network": {"rate": "50mbit", "mtu": 1500},
                     "topology": {"leaf_nodes": 2, "uplink": {"rate": "20mbit"}}},
                    {"transport": "tcp", "emulated": True, "emulation": "namespaces", "link_shaper": "netem",
                     "switch_shaper": "netem"}, [f"vnode{n}" for n in range(4)]),
}
ROWS = {"mpich": ("mpich-5.0.2", {"family": "mpich", "device": "ch4:ofi"}),
        "openmpi": ("openmpi-5.0.11", {"family": "openmpi", "device": ""})}


def launch_env(family: str, emulation: str) -> dict:
    """What commlens's launcher sets for a launch (commlens.launch.plan): the family's variables
    that force its network path where the nodes share loopback, and Open MPI's permission to run as root."""
    env = FAMILIES[family].emulated_network_env(ROWS[family][1], None) if emulation == "loopback" else {}
    return {**env, **FAMILIES[family].launch_env(as_root=True)}


def recorded_dataset(tmp_path: Path, kinds=KINDS, real_hosts: bool = False, failed: tuple = ()):
    """A dataset collected (commlens.data.collect) from raw launch files written as launches write
    them, one launch per library row and placement: both families, every emulation kind."""
    config = validate_campaign({
        "campaign": "kinds", "launches": 1, "kernels": {"pingpong.send": {"sizes": {"list": [8, 1024]}}},
        "libraries": {row: {"mpi": row} for row, _ in ROWS.values()},
        "placements": [{"name": name, **spec} for name, (spec, _, _) in kinds.items()]})
    paths = []
    for family, (row, _library) in ROWS.items():
        for name, (spec, how, hosts) in kinds.items():
            status = "failed" if name in failed else "ok"
            meta = {"record": "launch", "schema": 1, "status": status, "library": row, "mpi": row,
                    "family": family, "placement": name, "kernel": "pingpong.send", "launch": 0,
                    "started": "2026-01-01T00:00:00+00:00", "network": spec.get("network"),
                    "switch": spec.get("switch"), **how, "env": launch_env(family, how["emulation"]),
                    "binding": "core"}
            if real_hosts and how["emulated"]:
                meta.update(transport="network", emulated=False, emulation="", env=launch_env(family, ""))
            run = {"record": "run", "schema": 1, "kernel": "pingpong.send", "metric": "half round trip",
                   "library_version": f"{row} version\n", "nprocs": len(hosts), "timer": "MPI_Wtime",
                   "hosts": [f"node{n}" for n in range(len(hosts))] if real_hosts and how["emulated"] else hosts,
                   "cpu_binding": [str(n) for n in range(len(hosts))], "timer_resolution_s": 1e-9,
                   "harness_overhead_s": 3e-8, "args": {}}
            points = [{"record": "point", "size": size, "samples": [2e-6, 2.1e-6, 1.9e-6], "iters_per_sample": 4,
                       "settled": True, "rse": 0.01, "errors": None} for size in (8, 1024)]
            records = [meta] if status != "ok" else [meta, run, *points, {"record": "end", "status": "ok",
                                                                          "points": 2}]
            path = tmp_path / row / name / "launch0.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(record) + "\n" for record in records))
            paths.append(path)
    results, refused = read_all(paths)
    libraries = {row: {"name": row, "family": family} for family, (row, _) in ROWS.items()}
    builds = {row: {"mpi": row, "compiler": "gcc 12", "cflags": "-O2"} for row, _ in ROWS.values()}
    campaign = Campaign(name="kinds", source="kinds.yaml", config=config)
    write_dataset(build_dataset(campaign, results, libraries, builds, refused), tmp_path / "kinds.nc")
    return open_campaign(tmp_path / "kinds.nc")


def placement_items(ds) -> dict[str, str]:
    section = next(s for s in methods(ds) if s.heading == "Placements, binding and emulation")
    return {item.split(":", 1)[0]: item for item in section.items}


def test_links_that_ran_without_their_real_time_priority_are_said_so_with_how_many_launches(tmp_path):
    """A link process the host kept at the ranks' priority (commlens.launch.vnodes.lifecycle) can hold
    frames back for a rank's time slice: Methods says in how many launches, and the first one's reason."""
    refused = "normal: the kernel refused a real-time priority (Operation not permitted)"
    launch = wire.launch_priority({"vnode0": refused, "vnode1": wire.REALTIME})
    assert launch == f"vnode0: {refused}; vnode1: real-time"
    assert wire.placement_priority([wire.REALTIME, "", wire.REALTIME]) == "real-time"
    assert wire.placement_priority(["", ""]) == ""         # no launch recorded it: Methods says nothing
    assert wire.placement_priority([wire.REALTIME, launch]) == f"not real-time in 1 of 2 launches ({launch})"
    spec, how, hosts = KINDS["2N1P-wire"]
    items = placement_items(recorded_dataset(tmp_path, {"2N1P-wire": (spec, {**how, "link_priority": launch}, hosts)}))
    assert (f"the links' processes not real-time in 2 of 2 launches ({launch}), so that a rank's time slice could "
            f"hold their frames back" in items["2N1P-wire"]), items["2N1P-wire"]


def environment(family: str, emulation: str) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(launch_env(family, emulation).items())) or "none"


def test_each_placement_is_described_as_its_launches_recorded_it(tmp_path):
    ds = recorded_dataset(tmp_path)
    items = placement_items(ds)
    assert ds["emulation"].values.tolist() == ["", "namespaces", "loopback", "namespaces", "namespaces", "loopback",
                                               "namespaces", "namespaces"]
    assert ON_NODE in items["1N2P"] and "hosts: vm,vm" in items["1N2P"]
    # Virtual nodes: named as such, with their hosts, and nothing forced over loopback.
    for name in ("2N1P", "2N1P-1g", "4N1P-sw"):
        item = items[name]
        assert "nodes emulated as virtual nodes on one host; transport: TCP between the virtual nodes" in item, item
        assert "loopback" not in item and "MPIR_CVAR_NOLOCAL" not in item and "OMPI_MCA_btl" not in item
    assert "hosts: vnode0,vnode1;" in items["2N1P"] and "hosts: vnode0,vnode1,vnode2,vnode3;" in items["4N1P-sw"]
    assert "each virtual node's link limited to 1000 Mbit/s with MTU 1500 B" in items["2N1P-1g"]
    assert "shaped by a token bucket (tbf)" in items["2N1P-1g"] and "delay" not in items["2N1P-1g"]
    assert "one emulated switch of 2000 Mbit/s" in items["4N1P-sw"] and "switch" not in items["2N1P"]
    assert "share (shaped by a token bucket (tbf)" in items["4N1P-sw"] and "wire" not in items["4N1P-sw"]
    assert ("shaped by a wire process per node" in items["2N1P-wire"] and "each frame carrying at most 125 us of "
            "the link's time (whole TCP segments, at least one)" in items["2N1P-wire"])
    assert not any("each frame" in item for name, item in items.items() if name != "2N1P-wire")
    assert "each link's process at a real-time priority, above the ranks" in items["2N1P-wire"]
    assert not any("priority" in item for name, item in items.items() if name != "2N1P-wire")
    assert ("nodes on 2 leaf switches of 2 (vnode0-vnode1, vnode2-vnode3), each joined to one spine through an "
            "uplink of 20 Mbit/s each way (shaped by netem each way, which serialises every packet at the rate)"
            in items["4N1P-leaves"])
    assert not any("leaf switches" in item for name, item in items.items() if name != "4N1P-leaves")
    # Loopback: the variables that forced each family's network path are the ones its launches recorded.
    for name in ("2N1P-lo", "2N1P-lo-1g"):
        item = items[name]
        assert "nodes emulated as one host's loopback; transport: TCP over loopback" in item, item
        for family, (row, _) in ROWS.items():
            assert f"{row}: {environment(family, 'loopback')}" in item, item
    assert "MPIR_CVAR_NOLOCAL=1" in items["2N1P-lo"] and "OMPI_MCA_pml=ob1" in items["2N1P-lo"]
    assert "the loopback of a private network namespace limited to 100 Mbit/s" in items["2N1P-lo-1g"]
    assert "MTU 9000 B" in items["2N1P-lo-1g"]
    assert ("shaped by netem, which serialises every packet at the rate" in items["2N1P-lo-1g"]
            and "with a delay of 50 us, with a loss of 0.5% of packets" in items["2N1P-lo-1g"])
    # What each family's launches set where nothing is forced: none for MPICH, root's permission for Open MPI.
    assert f"environment set: mpich-5.0.2: none; openmpi-5.0.11: {environment('openmpi', '')}" in items["2N1P"]
    text = methods_markdown(ds)
    assert ("Emulated placements (2N1P, 2N1P-1g, 4N1P-sw, 2N1P-wire, 4N1P-leaves): their nodes were virtual nodes on "
            "one host") in text
    assert "Emulated placements (2N1P-lo, 2N1P-lo-1g): their nodes shared one host" in text


def test_real_hosts_and_placements_that_gave_nothing(tmp_path):
    """On a cluster the launches record the network between real hosts; a placement none of whose
    launches gave data says that how it ran is not recorded, not what it would have been."""
    kinds = {name: KINDS[name] for name in ("1N2P", "2N1P", "4N1P-sw", "4N1P-leaves")}
    ds = recorded_dataset(tmp_path, kinds, real_hosts=True, failed=("4N1P-sw",))
    items = placement_items(ds)
    # The campaign asked for leaf switches; real hosts had the site's network, which Methods does not invent.
    assert "on separate hosts" in items["4N1P-leaves"] and "leaf switches" not in items["4N1P-leaves"]
    assert "on separate hosts; transport: the network between them" in items["2N1P"]
    assert "hosts: node0,node1;" in items["2N1P"] and "emulated" not in items["2N1P"]
    assert items["4N1P-sw"] == f"4N1P-sw: 4 node(s) x 1 ranks per node; no launch gave data, so how it ran is " \
                               f"{NOT_RECORDED}."
    assert "Emulated placements" not in methods_markdown(ds)


def test_an_older_dataset_without_launch_environments_says_not_recorded(tmp_path):
    ds = recorded_dataset(tmp_path, {name: KINDS[name] for name in ("1N2P", "2N1P-lo")})
    items = placement_items(ds.drop_vars("launch_env"))
    assert "environment set: not recorded" in items["2N1P-lo"] and "MPIR_CVAR_NOLOCAL" not in items["2N1P-lo"]
    items = placement_items(ds.drop_vars("emulation"))
    assert "nodes emulated on one host, how: not recorded" in items["2N1P-lo"]


# ----------------------------------------------------------------------------- on real campaigns

@pytest.mark.mpi
def test_a_real_campaign_states_what_it_recorded(tiny):
    ds = open_campaign(tiny / "tiny.nc")
    text = methods_markdown(ds)
    # The tiny campaign (tests/conftest.py): 2 launches, rse 0.05, 5 to 200 samples, 1 s per point.
    assert f"before sampling): {nanoseconds(float(ds.attrs['timer_resolution_s']))}" in text
    assert "every library, placement and kernel: 2; the dataset holds 2 per cell. 8 of 8 launches gave data" in text
    assert "at most 0.05 (5.0%) with at least 5 samples, or until 200 samples, or 1 s spent" in text
    # The statistic the stopping rule met, as the launches recorded it (the harness stops on the median's).
    assert "sampled until the relative standard error of its median (the larger of two" in text
    measured = ds["sample_count"] > 0
    assert f"{int(ds['settled'].where(measured, False).sum())} of {int(measured.sum())} measured points" in text
    assert "Timer: MPI_Wtime for every kernel" in text and "Sizes were measured in a random order" in text
    assert "pingpong.send: half round trip of MPI_Send/MPI_Recv" in text and "5 sizes, 1 B to 1 MiB" in text
    items = placement_items(ds)
    assert "1N2P: 1 node(s) x 2 ranks per node; on one node; transport: shared memory" in items["1N2P"]
    # 2N1P as this host ran it: on virtual nodes where it can make them, else over loopback.
    emulation = str(ds["emulation"].sel(placement="2N1P").values)
    hosts = {str(h) for h in ds["hosts"].sel(placement="2N1P").values.ravel()}
    assert len(hosts) == 1 and f"hosts: {hosts.pop()};" in items["2N1P"]
    expected = {"namespaces": "nodes emulated as virtual nodes on one host; transport: TCP between the virtual nodes",
                "loopback": "nodes emulated as one host's loopback; transport: TCP over loopback"}[emulation]
    assert expected in items["2N1P"], items["2N1P"]
    for row in ("mpich-5.0.2", "openmpi-5.0.11"):      # the variables each row's launches recorded, no others
        recorded = {str(v) for v in ds["launch_env"].sel(library=row, placement="2N1P").values.ravel()}
        assert len(recorded) == 1
        words = ", ".join(f"{k}={v}" for k, v in sorted(json.loads(recorded.pop()).items())) or "none"
        assert f"{row}: {words}" in items["2N1P"] or f"environment set: {words};" in items["2N1P"]
    assert ("MPIR_CVAR_NOLOCAL" in items["2N1P"]) == (emulation == "loopback")
    binding = {" | ".join(str(v).split()) for v in ds["cpu_binding"].sel(placement="1N2P").values.ravel()}
    assert len(binding) == 1 and f"(rank by rank): {binding.pop()}; where the ranks ran (hwloc): " in items["1N2P"]
    assert "mpich-5.0.2: MPICH Version: 5.0.2; family mpich; launcher hydra" in text
    assert "openmpi-5.0.11: Open MPI v5.0.11" in text
    for key in ("hosts", "cpu_model", "os", "compiler_flags", "git_commit"):
        assert f"{ds.attrs[key]}" in text, key
    assert "a t test on the logarithms of the launch values" in text
    assert "This dataset holds 2 launches per cell" in text

    # A row imported from another suite's output was not sampled by commlens's rule: its counts leave it out.
    osu = import_files([Path(__file__).parent / "data" / "osu-7.4" / "osu_latency-mpich-5.0.2-1N2P.txt"], "osu",
                       "mpich-5.0.2", "1N2P")
    mixed = methods_markdown(append_to_campaign(ds, osu, library="mpich-5.0.2 (OSU)"))
    assert f"{int(ds['settled'].where(measured, False).sum())} of {int(measured.sum())} measured points" in mixed


@pytest.mark.mpi
def test_the_report_notebook_shows_the_section(tiny):
    cells = json.loads((tiny / "report.ipynb").read_text())["cells"]
    shown = ["".join(output.get("data", {}).get("text/markdown", "")) for cell in cells
             if cell["cell_type"] == "code" for output in cell["outputs"]]
    ds = open_campaign(tiny / "tiny.nc")
    methods_cell = [text for text in shown if text.startswith("## Methods")]
    assert len(methods_cell) == 1 and nanoseconds(float(ds.attrs["timer_resolution_s"])) in methods_cell[0]


@pytest.mark.mpi
def test_the_campaigns_report_has_the_section_as_an_appendix_after_its_figures(tiny):
    page = (tiny / "report.html").read_text()
    ds = open_campaign(tiny / "tiny.nc")
    figures, start = page.index("<h2 id='figures'>Figures</h2>"), page.index("<h2 id='methods'>Methods</h2>")
    assert figures < start
    assert f"before sampling): {nanoseconds(float(ds.attrs['timer_resolution_s']))}" in page[start:]


@pytest.mark.mpi
def test_a_dataset_that_lost_its_records_says_not_recorded(tiny):
    ds = open_campaign(tiny / "tiny.nc")
    older = ds.drop_vars(["cpu_binding", "timer_resolution_s", "harness_overhead_s", "position", "metric",
                          "launcher"])
    older.attrs = {key: value for key, value in ds.attrs.items()
                   if key not in ("campaign_config", "timer_resolution_s", "cpu_model")}
    text = methods_markdown(older)
    assert "before sampling): not recorded." in text and "Stopping rule and its target: not recorded." in text
    assert "(rank by rank): not recorded; where the ranks ran (hwloc): not recorded." in text
    assert "pingpong.send: not recorded." in text
    assert "CPU: not recorded." in text and "launcher not recorded" in text
    assert f"OS: {ds.attrs['os']}." in text       # what it kept is still stated


def stream_dataset(workspace, tmp_path, campaign_name: str, spec: dict, shuffle: bool):
    """A one-launch campaign of stream.uni on 1N2P with MPICH, measured for real and collected."""
    config = validate_campaign({
        "campaign": campaign_name, "libraries": {"mpich-5.0.2": {"mpi": "mpich-5.0.2"}},
        "placements": [{"name": "1N2P", "nodes": 1, "ppn": 2}], "launches": 1, "shuffle": shuffle,
        "precision": {"rse": 0.2, "min_samples": 3, "max_samples": 20, "max_point_time": 0.5},
        "kernels": {"stream.uni": {"sizes": {"list": [1024, 4096, 16384, 65536]}, "window": 8, **spec}}})
    campaign = Campaign(name=campaign_name, source=f"{campaign_name}.yaml", config=config)
    (tmp_path / campaign_name).mkdir()
    result = launch(workspace, "mpich-5.0.2", Placement("1N2P", 1, 2), campaign.kernel_args("stream.uni", 0),
                    tmp_path / campaign_name, timeout_s=120)
    assert result.status == "ok", result.launch.get("console_tail")
    records = {name: {"mpich-5.0.2": json.loads((workspace / "build" / kind / "mpich-5.0.2" / name).read_text())}
               for kind, name in (("envs", "library.json"), ("kernels", "build.json"))}
    results, refused = read_all([result.path])
    ds = build_dataset(campaign, results, records["library.json"], records["build.json"], refused)
    write_dataset(ds, tmp_path / campaign_name / f"{campaign_name}.nc")
    return open_campaign(tmp_path / campaign_name / f"{campaign_name}.nc")


@pytest.mark.mpi
def test_a_campaign_measured_another_way_says_so(workspace, built, tmp_path):
    shared = stream_dataset(workspace, tmp_path, "shared", {}, shuffle=True)
    distinct = stream_dataset(workspace, tmp_path, "distinct", {"window_buffers": "distinct", "cache": "rotate"},
                              shuffle=False)
    shared_text, distinct_text = methods_markdown(shared), methods_markdown(distinct)
    assert SHARED in shared_text and DISTINCT not in shared_text
    assert DISTINCT in distinct_text and SHARED not in distinct_text
    assert "Cache mode: reuse" in shared_text and "Cache mode: rotate" in distinct_text
    assert "Sizes were measured in a random order" in shared_text
    assert ("measured in schedule order; the recorded order (`position`) is not ascending size in 0 of 1"
            in distinct_text)
    for ds, text in ((shared, shared_text), (distinct, distinct_text)):
        assert f"before sampling): {nanoseconds(float(ds.attrs['timer_resolution_s']))}" in text
        assert "kernel: 1; the dataset holds 1 per cell" in text and "at most 0.2 (20.0%) with at least 3" in text
        assert "window (messages in flight per iteration): 8 messages for every kernel" in text
        assert "With one launch the band is that launch's distribution-free" in text and "What changed" not in text
        iterations = ds["iters_per_sample"].values[ds["sample_count"].values > 0]
        assert f"Iterations per sample here: {iterations.min()}" in text


@pytest.mark.mpi
def test_the_timing_mode_is_stated_as_the_launches_recorded_it(workspace, built, tmp_path):
    precision = methods_markdown(stream_dataset(workspace, tmp_path, "precision", {}, shuffle=False))
    osu = methods_markdown(stream_dataset(workspace, tmp_path, "osu", {"timing": "osu", "iterations": 30},
                                          shuffle=False))
    assert ("Timing mode: precision (10 warm-up iterations, then as many calibrated batches as the stopping rule "
            "takes) for every kernel." in precision)
    assert "OSU's osu_latency times one loop" in precision and "every timed iteration is its own" not in precision
    # stream.uni with a window of 8 is osu_bw's kind of test: OSU's warm-up 10 up to 8 KiB, 2 above.
    assert "Timing mode: osu (30 iterations after 10 warm-up up to 8 KiB, 30 after 2 above) for every kernel." in osu
    assert "every timed iteration is its own sample" in osu and "calibrated batches" not in osu
    for text in (precision, osu):        # what OSU's two timer calls per iteration cost, as measured here
        assert "timer's cost" in text and "an empty timed region took" in text.split("Timing mode:")[1].split("\n")[0]


# Settings Methods states in more than one place, and how each statement reads: one value per setting
# (per kernel where the setting is a kernel's), and "not recorded" never beside a recorded value.
STATEMENTS = {
    "warm-up": (r"(\d+|not recorded) warm-up", r"warm-up iterations[^.:;]*: (\d+|not recorded)"),
    "launches per cell": (r"holds (\d+) launches per cell", r"every library, placement and kernel: (\d+)"),
    "stopping target": (r"at most (\d[\d.]*) \(", r"relative standard error[^.]*?(\d[\d.]*%)"),
}


def stated_values(text: str) -> dict[str, set[str]]:
    """What Methods says of each setting of STATEMENTS, wherever it says it (what it says OSU does left out)."""
    import re

    text = re.sub(r"OSU's [^.]*\.", "", text)
    return {setting: {match for pattern in patterns for match in re.findall(pattern, text, flags=re.IGNORECASE)}
            for setting, patterns in STATEMENTS.items()}


@pytest.mark.mpi
def test_methods_never_says_two_things_of_one_setting(tiny):
    """Read as a reader would: every setting stated twice is stated alike (the warm-up was once "not
    recorded" in one paragraph and "10 warm-up iterations" in the next)."""
    for ds in (open_campaign(tiny / "tiny.nc"), synthetic()):
        stated = stated_values(methods_markdown(ds))
        for setting, values in stated.items():
            assert len(values) <= 1, f"{setting}: {sorted(values)}"
    stated = stated_values(methods_markdown(open_campaign(tiny / "tiny.nc")))
    assert stated["warm-up"] and stated["launches per cell"] == {"2"}, stated
