"""Validating a campaign: the schema's checks, its defaults filled in, and what the schema cannot say."""

from __future__ import annotations

import contextlib
import copy
import difflib
import hashlib
import json
import os
import tempfile
from collections import Counter
from pathlib import Path

from commlens.campaign.bounds import MAX_LAUNCHES, MAX_SIZES, check_size, problem_lines
from commlens.campaign.errors import CampaignError
from commlens.campaign.rounds import rounds_outside
from commlens.campaign.kernels import schedule_range, size_count
from commlens.campaign.model import Campaign
from commlens.campaign.schema import (SCHEMA_PATH, describe_error, fill_defaults, load_schema,
                                      structure_problems, validator)
from commlens.locations import cache_dir
from commlens.units import parse_size


def validate_campaign(config: dict, source: str = "<campaign>") -> dict:
    """Returns the config with defaults filled in, or raises CampaignError listing every problem. A
    config validated before (the same keys and values, the same schema) is read back from the cache:
    every launch of a workflow reads the campaign again, and validating costs a second."""
    if not isinstance(config, dict):
        raise CampaignError(f"{source}: a campaign file is a YAML mapping, got {type(config).__name__}")
    check_size(config, source)     # before anything walks it whole: the cache's JSON, the schema's validator
    cached = cache_path(config)
    if cached is not None and (validated := _read_cached(cached, config, source)) is not None:
        return validated
    validated = json.loads(json.dumps(_validate(config, source)))   # as a cached one reads back: plain JSON
    if cached is not None:
        _write_cached(cached, validated)
    return validated


def cache_path(config: dict) -> Path | None:
    """Where the validated form of `config` is cached: named by the hash of the config and the schema."""
    try:
        text = json.dumps(config, sort_keys=True)
    except (TypeError, ValueError):
        return None     # not plain data: validation says what is wrong with it
    digest = hashlib.sha256(text.encode() + b"\0" + SCHEMA_PATH.read_bytes()).hexdigest()
    return cache_dir() / "validated-campaigns" / f"{digest}.json"


def cache_entry(path: Path, validated: dict) -> dict:
    """What the cache keeps at `path`: the validated config, and the sha256 of what was validated (the
    hash `path` is named by) together with it, so that an entry edited or cut short is not read back."""
    return {"validated": validated, "sha256": _entry_digest(path, validated)}


def _entry_digest(path: Path, validated) -> str:
    """The sha256 of the hash `path` is named by and of `validated` (as JSON, its keys sorted)."""
    text = json.dumps(validated, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{path.stem}\0{text}".encode()).hexdigest()


def _read_cached(path: Path, config: dict, source: str) -> dict | None:
    """The validated config cached at `path`; None where there is none, or one that is not what a fresh
    validation of `config` gives, which is then validated afresh. The cache is a file anyone with the
    user's rights can edit, and its names become paths under results/: an entry whose digest does not
    match, that is not `config` with defaults added, or whose words or counts the schema's and
    _check_consistency's checks refuse is not trusted."""
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("sha256") != _entry_digest(path, entry.get("validated")):
        return None
    validated = entry.get("validated")
    if not isinstance(validated, dict) or not _adds_to(validated, config):
        return None
    schema = load_schema()
    if structure_problems(validated, schema, schema):
        return None
    try:
        _check_consistency(validated, source)
    except (LookupError, TypeError, ValueError):    # CampaignError among them
        return None
    return validated


def _adds_to(validated, given) -> bool:
    """Whether `validated` is `given` with keys added (the schema's defaults), every value given kept."""
    if isinstance(given, dict):
        return isinstance(validated, dict) and all(key in validated and _adds_to(validated[key], value)
                                                   for key, value in given.items())
    if isinstance(given, list):
        return isinstance(validated, list) and len(validated) == len(given) and all(map(_adds_to, validated, given))
    return type(validated) is type(given) and validated == given


def _write_cached(path: Path, validated: dict) -> None:
    """Writes the cache entry whole or not at all: to a temporary of its own beside it (a name no other
    process, and nobody who guesses, holds), renamed over it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as file:
                json.dump(cache_entry(path, validated), file)
            os.replace(partial, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise
    except OSError:
        pass      # a cache that cannot be written only costs the next validation its second


def _validate(config: dict, source: str) -> dict:
    schema = load_schema()
    errors = sorted(validator(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise CampaignError(f"{source}: invalid campaign file\n{problem_lines([describe_error(e) for e in errors])}")
    config = fill_defaults(copy.deepcopy(config), schema, schema)
    _check_consistency(config, source)
    return config


def _check_consistency(config: dict, source: str) -> None:
    """What the schema cannot say: unique placement names, ordered sizes, sample bounds, how many
    launches in all, and `compare:` pairs of two of the campaign's library rows."""
    problems = []
    names = [p["name"] for p in config["placements"]]
    for name in sorted(n for n, count in Counter(names).items() if count > 1):
        problems.append(f"placements: name {name!r} is used more than once")
    for placement in config["placements"]:
        if "network" in placement and placement["nodes"] < 2:
            problems.append(f"placements: {placement['name']!r} has a network but nodes: {placement['nodes']}; "
                            "an emulated interconnect needs nodes >= 2 (ranks on one node use shared memory)")
        if "switch" in placement and (placement["nodes"] < 2 or placement.get("emulate") == "loopback"):
            problems.append(f"placements: {placement['name']!r} has a switch with nodes: {placement['nodes']}, "
                            f"emulate: {placement.get('emulate', 'namespaces')}; a switch joins virtual nodes: "
                            "it needs nodes >= 2 and emulate: namespaces (or no emulate:)")
        if "topology" in placement:
            leaf = placement["topology"]["leaf_nodes"]
            if "network" not in placement or placement.get("emulate") == "loopback":
                problems.append(f"placements: {placement['name']!r} has a topology:, which joins virtual nodes with a "
                                "network: (emulate: namespaces, or no emulate:)")
            elif placement["nodes"] % leaf or placement["nodes"] // leaf < 2:
                problems.append(f"placements: {placement['name']!r} has nodes: {placement['nodes']} and topology "
                                f"leaf_nodes: {leaf}; the nodes must fill two leaves or more of leaf_nodes each "
                                f"(nodes a multiple of {leaf}, at least {2 * leaf})")
        for fault in placement.get("faults", []):
            if "network" not in placement or placement.get("emulate") == "loopback":
                problems.append(f"placements: {placement['name']!r} plants faults: on its links, which needs virtual "
                                "nodes with a network: (emulate: namespaces, or no emulate:)")
                break
            nodes = fault["link"] if "link" in fault else [fault["node"]]
            beyond = [node for node in nodes if node >= placement["nodes"]]
            if beyond:
                problems.append(f"placements: {placement['name']!r} plants a fault on node {beyond[0]}; its nodes "
                                f"are 0 to {placement['nodes'] - 1}")
            elif len(set(nodes)) < len(nodes):
                problems.append(f"placements: {placement['name']!r} plants a fault on the link {nodes}; a link joins "
                                "two different nodes")
    known = set(names)
    for entry, spec in config["kernels"].items():
        sizes = spec["sizes"]
        if "schedule" in sizes:
            low, high = schedule_range(sizes)
            if low > high:
                problems.append(f"kernels.{entry}.sizes: min {sizes.get('min', low)} is larger than "
                                f"max {sizes.get('max', high)}")
            elif (count := size_count(sizes)) > MAX_SIZES:
                given = ", ".join(f"{key} {value}" for key, value in sizes.items())
                fewer = {"small": "a larger step or ", "netpipe": "fewer per_octave or "}.get(sizes["schedule"], "")
                problems.append(f"kernels.{entry}.sizes: {count:,} sizes ({given}); a launch measures at most "
                                f"{MAX_SIZES:,} ({fewer}a narrower min to max gives fewer)")
        unknown = [p for p in spec.get("placements", []) if p not in known]
        if unknown:
            problems.append(f"kernels.{entry}.placements: {', '.join(map(repr, unknown))} not among the "
                            f"campaign's placements: {', '.join(names)}")
        if spec.get("integrity") and spec.get("window_buffers") == "shared":
            problems.append(f"kernels.{entry}: integrity needs window_buffers: distinct (a window of messages "
                            "on one buffer overwrites itself); allowed values: distinct, or leave it out")
        element = {"byte": 1, "int": 4, "double": 8}[spec["datatype"]]
        if element > 1 and "list" in sizes:
            odd = [s for s in sizes["list"] if parse_size(s) % element]
            if odd:
                problems.append(f"kernels.{entry}.sizes: with datatype {spec['datatype']}, sizes must be "
                                f"multiples of {element} bytes; not: {', '.join(map(str, odd))}")
    problems += _compare_problems(config)
    precision = config["precision"]
    if precision["max_samples"] < precision["min_samples"]:
        problems.append(f"precision.max_samples ({precision['max_samples']}) is below "
                        f"precision.min_samples ({precision['min_samples']})")
    problems += _until_decided_problems(config)
    most = config["launches"]["max"] if isinstance(config["launches"], dict) else config["launches"]
    launches = Campaign(name=config["campaign"], source=source, config={**config, "launches": most}).launch_count
    if launches > MAX_LAUNCHES:
        problems.append(f"launches: {most} of each of {launches // most:,} (library, placement, kernel) make "
                        f"{launches:,} launches; a campaign runs at most {MAX_LAUNCHES:,}")
    if problems:
        raise CampaignError(f"{source}: invalid campaign file\n{problem_lines(problems)}")


def _until_decided_problems(config: dict) -> list[str]:
    """Launches until decided: min <= rounds <= max, and `compare:` pairs to decide."""
    until = config["launches"]
    if not isinstance(until, dict):
        return [] if "rounds" not in config else [
            "rounds: only with launches until decided (launches: {min: 3, max: 8, until: decided}); "
            "with a fixed number of launches, leave it out"]
    problems = []
    if until["min"] > until["max"]:
        problems.append(f"launches.min ({until['min']}) is larger than launches.max ({until['max']})")
    elif "rounds" in config and (outside := rounds_outside(until, config["rounds"])):
        problems.append(f"rounds: {outside}")
    if not config.get("compare"):
        problems.append("launches: until decided needs `compare:` pairs (what is to be decided); allowed "
                        "values: a number of launches, or add compare: [{baseline: <row>, candidate: <row>}]")
    return problems


def _compare_problems(config: dict) -> list[str]:
    """Each `compare:` pair names two different library rows of the campaign."""
    rows = list(config["libraries"])
    problems = []
    for index, pair in enumerate(config.get("compare", [])):
        for role in ("baseline", "candidate"):
            if pair[role] not in rows:
                close = difflib.get_close_matches(pair[role], rows, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(f"compare[{index}].{role}: {pair[role]!r} is not a library row{hint}; "
                                f"allowed values: {', '.join(rows)}")
        if pair["baseline"] == pair["candidate"]:
            problems.append(f"compare[{index}]: baseline and candidate are both {pair['baseline']!r}; "
                            "a pair compares two different library rows")
    return problems
