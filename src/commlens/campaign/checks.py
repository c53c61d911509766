"""Validating a campaign: the schema's checks, its defaults filled in, and what the schema cannot say."""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
from collections import Counter
from pathlib import Path

from commlens.campaign.bounds import MAX_LAUNCHES, check_size, problem_lines
from commlens.campaign.errors import CampaignError
from commlens.campaign.rounds import rounds_outside
from commlens.campaign.kernels import schedule_range
from commlens.campaign.model import Campaign
from commlens.campaign.schema import SCHEMA_PATH, describe_error, fill_defaults, load_schema, validator
from commlens.locations import cache_dir
from commlens.units import parse_size


def validate_campaign(config: dict, source: str = "<campaign>") -> dict:
    """Returns the config with defaults filled in, or raises CampaignError listing every problem. A
    config validated before (the same keys and values, the same schema) is read back from the cache:
    every launch of a workflow reads the campaign again, and validating costs a second."""
    if not isinstance(config, dict):
        raise CampaignError(f"{source}: a campaign file is a YAML mapping, got {type(config).__name__}")
    check_size(config, source)     # before anything walks it whole: the cache's JSON, the schema's validator
    cached = _validated_path(config)
    if cached is not None and cached.exists():
        try:
            return json.loads(cached.read_text())
        except (OSError, ValueError):
            pass
    validated = json.loads(json.dumps(_validate(config, source)))   # as a cached one reads back: plain JSON
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
            partial.write_text(json.dumps(validated))
            partial.replace(cached)
        except OSError:
            pass      # a cache that cannot be written only costs the next validation its second
    return validated


def _validated_path(config: dict) -> Path | None:
    """Where the validated form of `config` is cached: named by the hash of the config and the schema."""
    try:
        text = json.dumps(config, sort_keys=True)
    except (TypeError, ValueError):
        return None     # not plain data: validation says what is wrong with it
    digest = hashlib.sha256(text.encode() + b"\0" + SCHEMA_PATH.read_bytes()).hexdigest()
    return cache_dir() / "validated-campaigns" / f"{digest}.json"


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
