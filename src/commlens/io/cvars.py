"""A library's control variables (MPI_T cvars) as commlens records them: each launch's values (the raw
file's "mpi_t" record, commlens.io.raw) and, once per library, their descriptions (cvars.json, which the
build writes beside build.json: commlens.launch.build.describe_cvars).

Values are compared and stored as text: a string as it is, an integer in decimal, a boolean as true or
false, an enumeration's item by its name, several elements as a JSON list. So 12288 read as an unsigned
long in one release and as an int in another is the same value, and Open MPI 4's booleans (an
enumeration of false and true) compare with Open MPI 5's (MPI_C_BOOL).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path


def value_text(value) -> str:
    """A cvar's value (as JSON gave it) as commlens compares and stores it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    if value is None:
        return "null"
    return json.dumps(value, separators=(",", ":"))


def integer_value(text: str) -> int | None:
    """The integer a value's text is, None where it is none (a string, a list, a fraction)."""
    try:
        number = float(text)
    except (TypeError, ValueError):
        return None
    return int(number) if math.isfinite(number) and number.is_integer() else None


@dataclass(frozen=True)
class CvarDescription:
    """One control variable as the library describes it (MPI_T_cvar_get_info), and the value it read in the
    build's own run (`default`: none set by the environment; None where it could not be read)."""

    name: str
    datatype: str          # int, unsigned, unsigned long, ..., double, char, bool ("" unknown)
    scope: str             # constant, readonly, local, group, group_eq, all, all_eq
    verbosity: str         # user_basic ... mpidev_all
    bind: str              # no_object, communicator, ...
    description: str
    enumeration: dict = field(default_factory=dict)   # an enumeration's items: name -> value
    default: str | None = None
    unreadable: str = ""


@dataclass
class CvarDescriptions:
    """What cvars.json says: `status` (ok, unsupported, failed, absent), why not ok, the library's version
    string and its variables by name."""

    status: str
    reason: str = ""
    library_version: str = ""
    cvars: dict[str, CvarDescription] = field(default_factory=dict)


def read_descriptions(path) -> CvarDescriptions:
    """cvars.json at `path`; status "absent" where there is none, "failed" where it cannot be read."""
    try:
        described = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return CvarDescriptions(status="absent", reason=f"no {path}")
    except (OSError, ValueError) as error:
        return CvarDescriptions(status="failed", reason=f"{path}: {error}")
    if not isinstance(described, dict):
        return CvarDescriptions(status="failed", reason=f"{path}: not a description of control variables")
    cvars = {}
    for entry in described.get("cvars", []):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        cvars[entry["name"]] = CvarDescription(
            name=entry["name"], datatype=str(entry.get("datatype") or ""), scope=str(entry.get("scope", "")),
            verbosity=str(entry.get("verbosity", "")), bind=str(entry.get("bind", "")),
            description=str(entry.get("description", "")), enumeration=dict(entry.get("items") or {}),
            default=value_text(entry["value"]) if "value" in entry else None,
            unreadable=str(entry.get("unreadable", "")))
    return CvarDescriptions(status=str(described.get("status", "failed")), reason=str(described.get("reason", "")),
                            library_version=str(described.get("library_version", "")), cvars=cvars)


def build_descriptions(build: dict) -> CvarDescriptions:
    """The descriptions a library's build made (its build.json record's `cvars`), or why there are none."""
    summary = build.get("cvars")
    if not isinstance(summary, dict):
        return CvarDescriptions(status="absent", reason="the build described no control variables (built before "
                                                        "commlens recorded them)")
    if summary.get("status") != "ok" or not summary.get("path"):
        return CvarDescriptions(status=str(summary.get("status", "failed")), reason=str(summary.get("reason", "")))
    return read_descriptions(summary["path"])


def launch_values(record: dict | None) -> tuple[str, dict[str, str], dict[str, str]]:
    """A launch's mpi_t record as (status, {cvar: value text}, {cvar: why unreadable}); status "not recorded"
    where the launch has none, or the record's own ("unsupported: why")."""
    if record is None:
        return "not recorded", {}, {}
    if record.get("status") != "ok":
        reason = record.get("reason", "")
        return f"{record.get('status')}: {reason}" if reason else str(record.get("status")), {}, {}
    values = {str(name): value_text(value) for name, value in record.get("cvars", {}).items()}
    return "ok", values, {str(name): str(why) for name, why in record.get("unreadable", {}).items()}
