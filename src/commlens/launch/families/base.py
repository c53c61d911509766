"""What commlens needs to know of an MPI family and its launcher, as two small classes.

A family (MPICH, Open MPI, or a site's own) says how to recognise its `mpiexec --version`, read its
release, list its control variables, bind ranks, and make ranks on one host take its network path.
A launcher (Hydra, ORTE, PRRTE) says how its mpiexec oversubscribes cores and starts ranks on other
hosts through a remote shell. commlens.launch.families registers them; nothing else in commlens
compares family or launcher names.
"""

from __future__ import annotations

import re


class Unsupported(Exception):
    """This library cannot do the launch as asked; the message says why."""


def version_tuple(version: str | None) -> tuple[int, ...]:
    """"4.1.8" -> (4, 1, 8); unknown -> () (compares below every release)."""
    return tuple(int(part) for part in re.findall(r"\d+", version or ""))


class Launcher:
    """How one kind of mpiexec takes options."""

    name = ""
    # Files the launcher's or the ranks' processes make in a fixed place and remove only when they exit
    # (globs): a launch that had to kill them removes those that appeared while it ran (launches never
    # overlap on a machine).
    leftovers: tuple[str, ...] = ()

    def oversubscribe_options(self) -> list[str]:
        """Options that let ranks outnumber cores (none: the launcher allows it unasked)."""
        return []

    def remote_start_options(self, exec_script: str, hosts: str) -> list[str]:
        """Options that start ranks on `hosts` ("node:slots,...") through `exec_script`, an ssh-like
        remote shell (the virtual nodes' node-exec)."""
        raise NotImplementedError


class MPIFamily:
    """One MPI implementation family. Subclasses set the class attributes and override what differs."""

    name = ""                   # as a spec's `family:` and library.json's "family" say it
    display_name = ""           # as people write it: "Open MPI"
    control_prefix = ""         # environment variables the library reads as control variables
    controls_source = ""        # the program that lists them, for messages
    controls_probe = ""         # shell command that lists them
    compiler_show_option = ""   # what makes the wrapper compiler print its command
    device_probe = ""           # shell command whose output says the library's device ("" none)

    def recognises(self, mpiexec_version: str) -> bool:
        """Whether `mpiexec --version` says this family."""
        raise NotImplementedError

    def launcher(self, version: str | None, mpiexec_version: str) -> Launcher:
        raise NotImplementedError

    def parse_controls(self, listing: str) -> list[str]:
        """Environment names of the control variables the listing (controls_probe's output) names."""
        raise NotImplementedError

    def cvar_of_environment(self, variable: str) -> str | None:
        """The MPI_T name of the control variable an environment variable sets (Open MPI's OMPI_MCA_x sets
        cvar x), None where it sets none."""
        prefix = self.control_prefix
        if prefix and variable.startswith(prefix) and len(variable) > len(prefix):
            return variable[len(prefix):]
        return None

    def parse_device(self, output: str) -> str:
        """The device (network layer) the device probe's output names, "" when it says none."""
        return ""

    def bind_options(self, binding: str) -> list[str]:
        raise NotImplementedError

    def launch_env(self, as_root: bool) -> dict[str, str]:
        """Environment every launch of this family needs (e.g. to be allowed to run as root)."""
        return {}

    def emulated_network_env(self, library: dict, controls: set[str] | None) -> dict[str, str]:
        """What makes ranks on one host take this library's network path (TCP over loopback), from
        the control variables it has (None: it lists none, so none is checked); Unsupported where it
        has no way to."""
        raise NotImplementedError

    def describe(self, library: dict) -> str:
        """"MPICH 3.4.3": this family's name and a library's version (its library.json record)."""
        return f"{self.display_name} {library.get('version', '')}".strip()

    def require_control(self, library: dict, controls: set[str] | None, name: str, why: str) -> None:
        if controls is not None and name not in controls:
            raise Unsupported(f"{self.describe(library)} has no {name} ({why}), so ranks on one host cannot be "
                              f"made to use its network path; run this placement on real nodes")
