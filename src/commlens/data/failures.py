"""What a campaign's collection records of launches and libraries that gave no data: the failure log
(failures.jsonl), and each library row's status where its environment or build failed."""

from __future__ import annotations

import json
from collections.abc import Sequence

from commlens.campaign import Campaign
from commlens.io.atomic import write_text
from commlens.io.raw import LaunchResult, RawFileError


def library_failure(library: dict | None, build: dict | None) -> dict:
    """The failed environment's or build's record (status, reason, log_tail), else {}."""
    for record in (library, build):
        if record and record.get("status", "ok") != "ok":
            return record
    return {}


def library_status(library: dict | None, build: dict | None) -> str:
    return library_failure(library, build).get("status", "ok" if library and build else "missing")


def failures(results: list[LaunchResult], refused: Sequence[RawFileError] = (), campaign: Campaign | None = None,
             libraries: dict[str, dict] | None = None, builds: dict[str, dict] | None = None) -> list[dict]:
    """One entry per library row whose environment or build failed (reason and log tail), and one
    per other launch that gave no data: failed, timed-out or unsupported launches with their exit
    code, reason and console tail, and refused raw files with the file, line and why."""
    entries = []
    failed_rows = set()
    mpis = {row: campaign.mpi_of(row) for row in campaign.libraries} if campaign else {}
    for row, mpi in mpis.items():
        failure = library_failure((libraries or {}).get(mpi), (builds or {}).get(mpi))
        if failure:
            failed_rows.add(row)
            entries.append({"status": failure["status"], "library": row, "mpi": mpi,
                            "reason": failure.get("reason", ""), "log_tail": failure.get("log_tail", "")})
    for result in results:
        meta = result.launch
        if result.status == "ok" or (meta.get("library") in failed_rows and result.status in ("env_failed",
                                                                                            "build_failed")):
            continue
        entries.append({key: meta.get(key) for key in (
            "status", "library", "placement", "kernel", "launch", "exit_code", "reason", "started",
            "duration_s", "timeout_s", "console_tail")} | {"raw": result.path})
    for error in refused:
        entry = {"status": "refused", "raw": error.path, "line": error.line, "reason": str(error)}
        try:
            with open(error.path, errors="replace") as raw:
                meta = json.loads(raw.readline())
            entry |= {key: meta[key] for key in ("library", "placement", "kernel", "launch")}
        except (OSError, ValueError, KeyError, TypeError):
            pass  # the launch record itself is damaged: the file's path still names the cell
        entries.append(entry)
    return entries


def write_failures(entries: list[dict], path) -> None:
    """The campaign's failure log, JSON Lines, rewritten whole by every collection (empty: none)."""
    write_text(path, "".join(json.dumps(entry, sort_keys=True) + "\n" for entry in entries))
