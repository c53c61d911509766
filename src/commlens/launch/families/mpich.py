"""MPICH, and its launcher Hydra."""

from __future__ import annotations

import re

from commlens.launch.families.base import Launcher, MPIFamily, Unsupported


class Hydra(Launcher):
    name = "hydra"
    # hydra_pmi_proxy writes the node's hwloc topology to /tmp/hydra_hwloc_xmlfile_XXXXXX (a path built in)
    # and unlinks it when it exits: a proxy killed on a virtual node leaves it behind. The ranks of one node
    # share a 2 MiB segment, /dev/shm/mpich_shm_XXXXXXXX, which ranks killed at a timeout leave behind.
    leftovers = ("/tmp/hydra_hwloc_xmlfile_*", "/dev/shm/mpich_shm_*")

    def remote_start_options(self, exec_script: str, hosts: str) -> list[str]:
        return ["-launcher", "ssh", "-launcher-exec", exec_script, "-hosts", hosts]


class MPICH(MPIFamily):
    name = "mpich"
    display_name = "MPICH"
    control_prefix = "MPIR_CVAR_"
    controls_source = "mpivars"
    controls_probe = "command -v mpivars >/dev/null && mpivars"
    compiler_show_option = "-show"
    # ch4:ofi, ch4:ucx, ch3:nemesis: which network path NOLOCAL falls back to
    device_probe = "command -v mpichversion >/dev/null && mpichversion"

    def recognises(self, mpiexec_version: str) -> bool:
        text = mpiexec_version.lower()
        return "hydra" in text or "mpich" in text

    def launcher(self, version: str | None, mpiexec_version: str) -> Launcher:
        return Hydra()

    def parse_controls(self, listing: str) -> list[str]:
        return sorted(set(re.findall(r"^\s*(MPIR_CVAR_\w+)", listing, flags=re.MULTILINE)))

    def cvar_of_environment(self, variable: str) -> str | None:
        # MPI_T names MPICH's variables as the environment does: MPIR_CVAR_X (MPICH_X and MPIR_PARAM_X are
        # the same variable's older spellings).
        for prefix in ("MPIR_CVAR_", "MPICH_", "MPIR_PARAM_"):
            if variable.startswith(prefix) and len(variable) > len(prefix):
                return "MPIR_CVAR_" + variable[len(prefix):]
        return None

    def parse_device(self, output: str) -> str:
        return next((line.split(":", 1)[1].strip() for line in output.splitlines()
                     if line.startswith("MPICH Device:")), "")

    def bind_options(self, binding: str) -> list[str]:
        return ["-bind-to", binding]

    def emulated_network_env(self, library: dict, controls: set[str] | None) -> dict[str, str]:
        self.require_control(library, controls, "MPIR_CVAR_NOLOCAL", "treating every rank as remote")
        env = {"MPIR_CVAR_NOLOCAL": "1"}
        device = library.get("device", "")
        if device.startswith("ch3"):          # ch3's netmods (nemesis tcp, sock) are TCP already
            return env
        if device and "ofi" not in device:
            if "ucx" in device:               # Debian's MPICH: UCX's tcp transport on loopback between ranks
                return {**env, "UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"}
            raise Unsupported(f"{self.describe(library)} uses device {device}; the one-host emulation knows ch4:ofi, "
                              f"ch4:ucx and ch3, not this device")
        env.update({"FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"})
        # MPICH 4.0 added the netmod switch; 3.4's builds with several netmods take ofi, the first.
        if controls is None or "MPIR_CVAR_CH4_NETMOD" in controls:
            env["MPIR_CVAR_CH4_NETMOD"] = "ofi"
        return env
