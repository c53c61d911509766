"""Building commlens-kernels and libcommlens-kernels.so with one MPI library's compiler wrapper.

A build never raises: build.json records `status: ok`, or `build_failed` (the harness
did not compile or link) or `env_failed` (the library's environment was never made),
with the reason and the log's tail, so that a campaign goes on with its other
libraries. The build's own `commlens-kernels --describe` (the kernel catalogue, and which
kernels this build has) is kept in the record. A kernel family that does not compile against this
library is left out of an ok build (kernels/Makefile), and a kernel whose MPI calls are newer than
the library's mpi.h is built without them: such kernels are listed in `unsupported` with the reason
(the compiler's first error in the family's source). Warnings do not stop a build; they are kept in
the record.

An ok build also describes the library's control variables once (`commlens-kernels --describe-cvars` under
the library's own `mpiexec -n 2`, without any of the family's settings from the environment): their
descriptions, datatypes, scopes, enumerations and the values they default to, in cvars.json beside
build.json (commlens.io.cvars reads it), which names it under `cvars` with a count, or says why there is
none. Each launch records only the values it ran with (the kernel's "mpi_t" record); what is the same for
every launch of a library is said here once. A description that fails never fails the build.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from commlens.launch.families import family_named
from commlens.launch.libraries import LOG_TAIL_CHARS, in_environment
from commlens.launch.provenance import KERNELS_DIR, source_hash

MAX_WARNINGS_KEPT = 50


def build_kernels(library: dict, build_dir, log_path, kernels_dir: Path = KERNELS_DIR,
                  strict: bool = False) -> dict:
    """Compiles the kernels with this library's mpicc as a binary and as a shared library for
    mpi4py programs, and writes (and returns) build.json next to them. `strict` (the project's
    own check) makes warnings errors and every kernel family required."""
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    record = {"mpi": library["name"], "binary": str(build_dir / "commlens-kernels"),
              "shared_library": str(build_dir / "libcommlens-kernels.so"), "strict": strict,
              "kernel_source_hash": source_hash(kernels_dir)}
    if library.get("status", "ok") != "ok":
        record |= {"status": library["status"], "reason": library.get("reason", "")}
        Path(log_path).write_text(f"not built: the environment of {library['name']} failed: {record['reason']}\n")
        return _write(record, build_dir)
    make = (f"make -C {shlex.quote(str(kernels_dir))} MPICC=mpicc BUILD_DIR={shlex.quote(str(build_dir))}"
            f" STRICT={int(strict)}")
    with open(log_path, "w") as log:
        print("+", make, file=log, flush=True)
        done = subprocess.run(in_environment(library["env_dir"], make), stdout=log, stderr=subprocess.STDOUT)
    output = Path(log_path).read_text(errors="replace")
    record["warnings"] = sorted(set(re.findall(r"^\S+:\d+:\d+: warning: .*$", output, flags=re.MULTILINE)))
    record["warning_count"] = len(record["warnings"])
    record["warnings"] = record["warnings"][:MAX_WARNINGS_KEPT]
    if done.returncode != 0 or not Path(record["binary"]).exists():
        record |= {"status": "build_failed", "reason": f"{library['name']}: {_first_error(output) or 'make failed'}",
                   "log_tail": output[-LOG_TAIL_CHARS:]}
        return _write(record, build_dir)

    def shell(command: str) -> str:
        done = subprocess.run(in_environment(library["env_dir"], command), capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildFailed(f"{library['name']}: `{command}` exited with {done.returncode}: "
                              f"{(done.stdout + done.stderr)[-LOG_TAIL_CHARS:]}")
        return done.stdout.strip()

    try:
        record |= _describe_build(record, library, kernels_dir, strict, output, shell)
    except (BuildFailed, ValueError) as error:
        record |= {"status": "build_failed", "reason": str(error).splitlines()[0], "log_tail": str(error)}
    if record["status"] == "ok":
        record["cvars"] = describe_cvars(library, Path(record["binary"]), build_dir / CVARS_FILE)
    return _write(record, build_dir)


CVARS_FILE = "cvars.json"
# Two ranks: Open MPI registers a component's variables (its shared-memory transport's eager limit) only
# where it opens the component, and with one rank it opens no shared-memory transport.
DESCRIBE_RANKS = 2
DESCRIBE_TIMEOUT_S = 120


def describe_cvars(library: dict, binary: Path, output: Path) -> dict:
    """The library's control variables described into `output` (cvars.json: commlens-kernels
    --describe-cvars under the library's mpiexec, no setting of the family's in its environment, so that
    the values are the library's defaults); returns what build.json says of it: {"status": "ok", "path",
    "count", "unreadable"} or {"status": "unsupported" | "failed", "reason"}. Never raises."""
    family = family_named(library["family"])
    launcher = family.launcher(library.get("version"), library.get("mpiexec_version", ""))
    command = shlex.join(["mpiexec", "-n", str(DESCRIBE_RANKS), *launcher.oversubscribe_options(), str(binary),
                          "--describe-cvars"])
    env = {name: value for name, value in os.environ.items()
           if not (family.control_prefix and name.startswith(family.control_prefix))}
    env |= family.launch_env(as_root=os.geteuid() == 0)
    try:
        done = subprocess.run(in_environment(library["env_dir"], command), capture_output=True, text=True, env=env,
                              timeout=DESCRIBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"`{command}` did not end within {DESCRIBE_TIMEOUT_S} s"}
    except OSError as error:
        return {"status": "failed", "reason": f"`{command}` could not start: {error}"}
    try:
        described = json.loads(done.stdout)
    except ValueError:
        return {"status": "failed", "reason": f"`{command}` exited with {done.returncode} and printed no "
                                              f"description: {(done.stdout + done.stderr)[-LOG_TAIL_CHARS:]}"}
    output.write_text(json.dumps(described, indent=None) + "\n")
    if described.get("status") != "ok":
        return {"status": "unsupported", "reason": described.get("reason", "")}
    cvars = described.get("cvars", [])
    return {"status": "ok", "path": str(output.resolve()), "count": len(cvars),
            "unreadable": sum("unreadable" in cvar for cvar in cvars)}


class BuildFailed(Exception):
    """A step after compiling (listing the kernels, the wrapper's flags) did not work."""


def _describe_build(record: dict, library: dict, kernels_dir: Path, strict: bool, output: str, shell) -> dict:
    """What a successful build holds: its kernels (the catalogue as it describes itself), those left
    out and why, compiler and flags."""
    described = [json.loads(line) for line in shell(f"{shlex.quote(record['binary'])} --describe").splitlines()]
    make_vars = f"make -s -C {shlex.quote(str(kernels_dir))} STRICT={int(strict)}"
    return {
        "status": "ok",
        "compiler": shell("mpicc --version 2>&1 | head -n 1"),
        "compiler_command": shell(f"mpicc {family_named(library['family']).compiler_show_option} 2>&1"),
        "cflags": shell(f"{make_vars} print-cflags"),
        "shared_library_flags": shell(f"{make_vars} print-library-flags"),
        # The kernels this build has, as it describes them; those it has not, and why.
        "kernels": [k for k in described if k.get("available", True)],
        "unsupported": _left_out([k for k in described if not k.get("available", True)], output, library),
    }


def strict_installations(setting, names) -> set[str]:
    """Which installations get the strict build: `setting` is a workflow config value, true or
    false, or installation names separated by commas."""
    if isinstance(setting, bool) or str(setting).lower() in ("true", "false", "1", "0", "yes", "no", ""):
        return set(names) if str(setting).lower() in ("true", "1", "yes") else set()
    return {name.strip() for name in str(setting).split(",") if name.strip()}


def retry_token(record_path) -> str:
    """"" while the library.json or build.json at record_path is absent or says ok; after a
    failure, a value that changes with every failed attempt. As a rule's params it makes each
    run of the workflow retry a failed environment or build (its spec fixed, the network back),
    and so everything downstream of it, while a library that works is left alone."""
    path = Path(record_path)
    try:
        status = json.loads(path.read_text()).get("status", "ok")
    except (OSError, ValueError):
        return ""
    return "" if status == "ok" else f"{status}, retried after {path.stat().st_mtime_ns}"


def _left_out(unavailable: list[dict], output: str, library: dict) -> dict:
    """kernel -> why it is not in this build: the build's own reason, with the compiler's first error in
    the family's source where that did not compile."""
    reasons = {}
    for kernel in unavailable:
        source = kernel["source"].removeprefix("kernels/")
        error = _first_error(output, source)
        reasons[kernel["kernel"]] = (f"kernels/{source} did not compile against {library['name']} "
                                     f"({library.get('version', 'unknown version')}): {error}" if error
                                     else f"{kernel['unavailable']} ({library['name']})")
    return reasons


def _first_error(output: str, source: str | None = None) -> str | None:
    pattern = rf"^{re.escape(source)}:\d+:\d+: (?:fatal )?error: .*$" if source else r"^.*\berror\b.*$"
    found = re.search(pattern, output, flags=re.MULTILINE)
    return found.group(0).strip() if found else None


def _write(record: dict, build_dir: Path) -> dict:
    (build_dir / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
