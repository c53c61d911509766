"""Building commbench-kernels and libcommbench-kernels.so with one MPI library's compiler wrapper."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from .libraries import in_environment
from .provenance import KERNELS_DIR, source_hash

# How each family's wrapper shows the compiler command it runs.
SHOW_FLAG = {"mpich": "-show", "openmpi": "--showme"}


def build_kernels(library: dict, build_dir, kernels_dir: Path = KERNELS_DIR, log=sys.stderr) -> dict:
    """Compiles the kernels, as a binary and as a shared library for mpi4py programs (warnings are
    errors), and writes build.json next to them."""
    build_dir = Path(build_dir).resolve()
    env_dir = library["env_dir"]
    make = f"make -C {shlex.quote(str(kernels_dir))} MPICC=mpicc BUILD_DIR={shlex.quote(str(build_dir))}"

    def shell(command: str) -> str:
        return subprocess.run(in_environment(env_dir, command), capture_output=True, text=True,
                              check=True).stdout.strip()

    print("+", make, file=log, flush=True)
    subprocess.run(in_environment(env_dir, make), check=True, stdout=log, stderr=log)
    record = {
        "mpi": library["name"],
        "binary": str(build_dir / "commbench-kernels"),
        "shared_library": str(build_dir / "libcommbench-kernels.so"),
        "compiler": shell("mpicc --version 2>&1 | head -n 1"),
        "compiler_command": shell(f"mpicc {SHOW_FLAG[library['family']]} 2>&1"),
        "cflags": shell(f"make -s -C {shlex.quote(str(kernels_dir))} print-cflags"),
        "shared_library_flags": shell(f"make -s -C {shlex.quote(str(kernels_dir))} print-library-flags"),
        "kernel_source_hash": source_hash(kernels_dir),
        "kernels": [json.loads(line) for line in shell(
            f"{shlex.quote(str(build_dir / 'commbench-kernels'))} --list").splitlines()],
    }
    (build_dir / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
