"""Open MPI, and its launchers: ORTE (Open MPI 4) and PRRTE (Open MPI 5)."""

from __future__ import annotations

import re

from commlens.launch.families.base import Launcher, MPIFamily, version_tuple


class ORTE(Launcher):
    name = "orte"

    def oversubscribe_options(self) -> list[str]:
        return ["--oversubscribe"]

    def remote_start_options(self, exec_script: str, hosts: str) -> list[str]:
        # Nodes own different CPUs: told that they differ, Open MPI maps each node by its own CPUs.
        return ["--mca", "plm_rsh_agent", exec_script, "--mca", "orte_hetero_nodes", "1", "--host", hosts]


class PRRTE(Launcher):
    name = "prrte"

    def oversubscribe_options(self) -> list[str]:
        return ["--map-by", ":OVERSUBSCRIBE"]     # a mapping modifier in PRRTE, not a switch

    def remote_start_options(self, exec_script: str, hosts: str) -> list[str]:
        return ["--prtemca", "plm_ssh_agent", exec_script, "--prtemca", "prte_hetero_nodes", "1", "--host", hosts]


class OpenMPI(MPIFamily):
    name = "openmpi"
    display_name = "Open MPI"
    control_prefix = "OMPI_MCA_"
    controls_source = "ompi_info --all"
    controls_probe = "command -v ompi_info >/dev/null && ompi_info --all --parsable"
    compiler_show_option = "--showme"

    def recognises(self, mpiexec_version: str) -> bool:
        text = mpiexec_version.lower()
        return "open mpi" in text or "open-mpi" in text or "prte" in text or "openrte" in text

    def launcher(self, version: str | None, mpiexec_version: str) -> Launcher:
        if "openrte" in mpiexec_version.lower():
            return ORTE()
        return ORTE() if version and version_tuple(version) < (5,) else PRRTE()

    def parse_controls(self, listing: str) -> list[str]:
        """MCA parameters and their synonyms as OMPI_MCA_* (ompi_info --all --parsable)."""
        return sorted({"OMPI_MCA_" + name for name in re.findall(
            r"^mca:[^:]*:[^:]*:param:([^:]+):(?:value|synonym_of):", listing, flags=re.MULTILINE)})

    def bind_options(self, binding: str) -> list[str]:
        return ["--bind-to", binding]

    def launch_env(self, as_root: bool) -> dict[str, str]:
        # Open MPI refuses root unless both are set (ORTE and PRRTE alike); containers and CI run as root.
        return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"} if as_root else {}

    def emulated_network_env(self, library: dict, controls: set[str] | None) -> dict[str, str]:
        self.require_control(library, controls, "OMPI_MCA_btl_tcp_if_include", "the TCP BTL")
        return {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": "lo"}
