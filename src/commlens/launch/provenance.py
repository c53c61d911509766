"""Where a result came from: source hashes, the commit, the host and its software."""

from __future__ import annotations

import hashlib
import platform
import subprocess
from pathlib import Path

from commlens.locations import CHECKOUT, ROOT

# The kernels' sources: the checkout's, or the installed package's copies (commlens.locations.ROOT).
KERNELS_DIR = ROOT / "kernels"


def source_hash(directory: Path = KERNELS_DIR) -> str:
    """sha256 over every kernel source, its relative path included, in a fixed order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(directory).rglob("*") if p.is_file() and p.suffix in {".c", ".h", ".def", ""}):
        digest.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def git_commit(repo: Path | None = CHECKOUT) -> str:
    """HEAD's commit, with '+dirty' when tracked files differ from it; 'unknown' outside git, and for
    an installed package (never the commit of some repository its environment happens to sit in)."""
    if repo is None:
        return "unknown"
    try:
        commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def os_description() -> str:
    pretty = ""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return f"{pretty} ({platform.system()} {platform.release()} {platform.machine()})".strip()
