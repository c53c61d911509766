"""The MPI families commlens knows, and their launchers: one class each, registered here.

    MPICH     with Hydra                      (commlens.launch.families.mpich)
    Open MPI  with ORTE (4.x) or PRRTE (5.x)  (commlens.launch.families.openmpi)

A site with another MPI (or a fork that reports itself differently) subclasses MPIFamily and
Launcher (commlens.launch.families.base) and calls `register(MyFamily())` before a campaign runs;
its spec files then name it with `family:`. Everything else in commlens asks the registry and never
compares family or launcher names itself.
"""

from __future__ import annotations

import re

from commlens.launch.families.base import Launcher, MPIFamily, Unsupported, version_tuple
from commlens.launch.families.mpich import MPICH, Hydra
from commlens.launch.families.openmpi import ORTE, PRRTE, OpenMPI

__all__ = ["FAMILIES", "LAUNCHERS", "Launcher", "MPIFamily", "Unsupported", "describe", "detect_family",
           "detect_launcher", "detect_version", "family_named", "launcher_named", "parse_controls", "register",
           "version_tuple"]

FAMILIES: dict[str, MPIFamily] = {}
LAUNCHERS: dict[str, Launcher] = {}


def register(family: MPIFamily, *launchers: Launcher) -> None:
    """Makes `family` (and the launchers it may name) known, replacing one of the same name."""
    FAMILIES[family.name] = family
    for launcher in launchers:
        LAUNCHERS[launcher.name] = launcher


register(MPICH(), Hydra())
register(OpenMPI(), ORTE(), PRRTE())


def family_named(name: str) -> MPIFamily:
    """The registered family `name`; KeyError naming the known ones otherwise."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown MPI family {name!r}; known: {', '.join(FAMILIES)}") from None


def launcher_named(name: str) -> Launcher:
    try:
        return LAUNCHERS[name]
    except KeyError:
        raise KeyError(f"unknown MPI launcher {name!r}; known: {', '.join(LAUNCHERS)}") from None


def describe(library: dict) -> str:
    """"MPICH 3.4.3" or "Open MPI 4.1.8": a library.json record's family and version, for messages."""
    family = FAMILIES.get(library.get("family", ""))
    return family.describe(library) if family else f"{library.get('family')} {library.get('version', '')}".strip()


def detect_family(mpiexec_version: str) -> str | None:
    """The name of the family whose `mpiexec --version` this is, None when none recognises it."""
    return next((family.name for family in FAMILIES.values() if family.recognises(mpiexec_version)), None)


def detect_version(mpiexec_version: str) -> str | None:
    """The release from `mpiexec --version`: Hydra's "Version: 4.0.3", Open MPI's
    "mpiexec (OpenRTE) 4.1.8" or "mpiexec (Open MPI) 5.0.8"."""
    found = re.search(r"Version:\s*(\d+(?:\.\d+)+)", mpiexec_version) or \
        re.search(r"\)\s*(\d+(?:\.\d+)+)", mpiexec_version)
    return found.group(1) if found else None


def detect_launcher(family: str, version: str | None, mpiexec_version: str) -> str:
    """How this mpiexec takes options: MPICH's Hydra, Open MPI 4's ORTE or Open MPI 5's PRRTE."""
    return family_named(family).launcher(version, mpiexec_version).name


def parse_controls(family: str, listing: str) -> list[str]:
    """Environment names of the control variables a library lists: MPICH's MPIR_CVAR_* (mpivars),
    Open MPI's MCA parameters and their synonyms as OMPI_MCA_* (ompi_info --all --parsable)."""
    return family_named(family).parse_controls(listing)
