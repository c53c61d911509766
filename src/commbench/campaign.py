"""Campaign files: loading, validation against the schema, defaults, and the runs they ask for."""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from .units import parse_size

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "campaign.schema.yaml"


class CampaignError(ValueError):
    """A campaign file that cannot be run; the message names the file and every bad key."""


def _load_schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _key_path(path) -> str:
    parts = []
    for part in path:
        parts.append(f"[{part}]" if isinstance(part, int) else (f".{part}" if parts else str(part)))
    return "".join(parts) or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    """One line a user can act on: the key, the bad value and what is allowed."""
    where = _key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        known = set(allowed)
        unknown = [k for k in error.instance if k not in known]
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, allowed, n=1)
            hints.append(f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        return f"{where}: {'; '.join(hints)}; allowed keys: {', '.join(allowed)}"
    if error.validator == "enum":
        allowed = [str(v) for v in error.validator_value]
        close = difflib.get_close_matches(str(error.instance), allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{where}: {error.instance!r} is not allowed{hint}; allowed values: {', '.join(allowed)}"
    if error.validator == "pattern":
        return (f"{where}: {error.instance!r} is not allowed: use letters, digits, '.', '_', '+' and '-', "
                "starting with a letter or digit")
    if error.validator == "oneOf" and error.context:
        deepest = max(error.context, key=lambda e: len(e.absolute_path))
        return _describe(deepest) if deepest.absolute_path != error.absolute_path else (
            f"{where}: {error.instance!r} matches none of the allowed forms: {error.message}")
    return f"{where}: {error.message}"


def _resolve(schema: dict, root: dict) -> dict:
    ref = schema.get("$ref")
    if ref:
        node = root
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]
        return node
    return schema


def _fill_defaults(instance, schema: dict, root: dict):
    """Fills in the schema's defaults, recursing through properties, maps and oneOf branches."""
    schema = _resolve(schema, root)
    if "oneOf" in schema:
        for branch in schema["oneOf"]:
            branch = _resolve(branch, root)
            if jsonschema.Draft202012Validator(root).evolve(schema=branch).is_valid(instance):
                return _fill_defaults(instance, branch, root)
        return instance
    if isinstance(instance, dict):
        for key, sub in schema.get("properties", {}).items():
            sub = _resolve(sub, root)
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
            if key in instance:
                instance[key] = _fill_defaults(instance[key], sub, root)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in instance:
                if key not in schema.get("properties", {}):
                    instance[key] = _fill_defaults(instance[key], extra, root)
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        return [_fill_defaults(item, schema["items"], root) for item in instance]
    return instance


def validate_campaign(config: dict, source: str = "<campaign>") -> dict:
    """Returns the config with defaults filled in, or raises CampaignError listing every problem."""
    if not isinstance(config, dict):
        raise CampaignError(f"{source}: a campaign file is a YAML mapping, got {type(config).__name__}")
    schema = _load_schema()
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = "\n".join(f"  {_describe(e)}" for e in errors)
        raise CampaignError(f"{source}: invalid campaign file\n{lines}")
    config = _fill_defaults(copy.deepcopy(config), schema, schema)
    _check_consistency(config, source)
    return config


def _check_consistency(config: dict, source: str) -> None:
    """What the schema cannot say: unique placement names, ordered sizes and sample bounds."""
    problems = []
    names = [p["name"] for p in config["placements"]]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"placements: name {name!r} is used more than once")
    for kernel, spec in config["kernels"].items():
        sizes = spec["sizes"]
        if "schedule" in sizes and parse_size(sizes["min"]) > parse_size(sizes["max"]):
            problems.append(f"kernels.{kernel}.sizes: min {sizes['min']} is larger than max {sizes['max']}")
    precision = config["precision"]
    if precision["max_samples"] < precision["min_samples"]:
        problems.append(f"precision.max_samples ({precision['max_samples']}) is below "
                        f"precision.min_samples ({precision['min_samples']})")
    if problems:
        raise CampaignError(f"{source}: invalid campaign file\n" + "\n".join(f"  {p}" for p in problems))


@dataclass(frozen=True)
class Campaign:
    """A validated campaign: what to run, and the hash that identifies its configuration."""

    name: str
    source: str
    config: dict

    @property
    def config_hash(self) -> str:
        canonical = json.dumps(self.config, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def libraries(self) -> list[str]:
        return list(self.config["libraries"])

    @property
    def placements(self) -> list[str]:
        return [p["name"] for p in self.config["placements"]]

    @property
    def kernels(self) -> list[str]:
        return list(self.config["kernels"])

    @property
    def launches(self) -> int:
        return self.config["launches"]

    @property
    def mpi_names(self) -> list[str]:
        """The installations the campaign needs, each built once however many rows use it."""
        return sorted({row["mpi"] for row in self.config["libraries"].values()})

    def mpi_of(self, library: str) -> str:
        return self.config["libraries"][library]["mpi"]

    def library_env(self, library: str) -> dict[str, str]:
        return {k: _env_value(v) for k, v in self.config["libraries"][library].get("env", {}).items()}

    def placement(self, name: str) -> dict:
        return next(p for p in self.config["placements"] if p["name"] == name)

    def kernel_args(self, kernel: str) -> list[str]:
        """Command-line options of commbench-kernels for one kernel of this campaign."""
        sizes = self.config["kernels"][kernel]["sizes"]
        if "list" in sizes:
            args = ["--sizes", ",".join(str(parse_size(s)) for s in sizes["list"])]
        else:
            args = ["--schedule", sizes["schedule"],
                    "-m", f"{parse_size(sizes['min'])}:{parse_size(sizes['max'])}"]
        precision = self.config["precision"]
        return args + [
            "--rse", str(precision["rse"]),
            "--min-samples", str(precision["min_samples"]),
            "--max-samples", str(precision["max_samples"]),
            "--max-point-time", str(precision["max_point_time"]),
        ]

    def runs(self):
        """Every (library, placement, kernel, launch) the campaign measures."""
        for library in self.libraries:
            for placement in self.placements:
                for kernel in self.kernels:
                    for launch in range(self.launches):
                        yield library, placement, kernel, launch


def _env_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def load_campaign(path) -> Campaign:
    """Reads and validates a campaign file; raises CampaignError naming the file on any problem."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise CampaignError(f"{path}: no such campaign file") from None
    except yaml.YAMLError as exc:
        raise CampaignError(f"{path}: not valid YAML: {exc}") from None
    config = validate_campaign(raw, source=str(path))
    return Campaign(name=config["campaign"], source=str(path), config=config)
