"""Campaign files: loading, validation against the schema, defaults, and the runs they ask for."""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from .locations import ROOT
from .units import parse_size

SCHEMA_PATH = ROOT / "workflow" / "schemas" / "campaign.schema.yaml"   # the checkout's, or the installed copy


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
        allowed = PATTERN_WORDS.get(error.validator_value, f"a match of {error.validator_value}")
        return f"{where}: {error.instance!r} is not allowed; allowed: {allowed}"
    if error.validator == "oneOf" and error.context:
        deepest = max(error.context, key=lambda e: len(e.absolute_path))
        if deepest.absolute_path != error.absolute_path:
            return _describe(deepest)
        allowed = error.schema.get("description") or error.message
        return f"{where}: {error.instance!r} is not allowed; allowed: {allowed}"
    if error.validator == "type":
        return f"{where}: {error.instance!r} is not allowed; allowed: {_number_words(error.schema)}"
    if error.validator == "maxLength":
        return f"{where}: {error.instance!r} is too long; allowed: at most {error.validator_value} characters"
    return f"{where}: {error.message}"


def _number_words(schema: dict) -> str:
    """What a typed key takes, in words: 'an integer, at least 1'."""
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    words = " or ".join({"integer": "an integer", "number": "a number", "boolean": "true or false",
                         "string": "a string", "array": "a list", "object": "a mapping"}.get(k, k) for k in kinds)
    bounds = [f"{word} {schema[key]}" for key, word in (("minimum", "at least"), ("exclusiveMinimum", "above"),
                                                       ("maximum", "at most"), ("exclusiveMaximum", "below"))
              if key in schema]
    return ", ".join([words, *bounds])


# The schema's name patterns in words: names become paths, shell words and variable names.
PATTERN_WORDS = {
    "^[A-Za-z0-9][A-Za-z0-9._+-]*$": "letters, digits, '.', '_', '+' and '-', starting with a letter or digit",
    "^[a-z][a-z0-9_.]*(@[A-Za-z0-9._+-]+)?$": "a kernel name (lower-case letters, digits, '_' and '.'), "
                                               "optionally '@label' of letters, digits, '.', '_', '+' and '-'",
    "^[A-Za-z_][A-Za-z0-9_]*$": "an environment variable name: letters, digits and '_', not starting with a digit",
    "^[0-9]+(k|M|G|Ki|Mi|Gi)?$": "bytes as digits with an optional k, M, G, Ki, Mi or Gi suffix",
    "^[0-9]+(\\.[0-9]+)?(bit|kbit|mbit|gbit)$": "a tc rate such as 100mbit or 1gbit",
}


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
    """What the schema cannot say: unique placement names, ordered sizes, sample bounds, and
    `compare:` pairs of two of the campaign's library rows."""
    problems = []
    names = [p["name"] for p in config["placements"]]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"placements: name {name!r} is used more than once")
    for placement in config["placements"]:
        if "network" in placement and placement["nodes"] < 2:
            problems.append(f"placements: {placement['name']!r} has a network but nodes: {placement['nodes']}; "
                            "an emulated interconnect needs nodes >= 2 (ranks on one node use shared memory)")
        if "switch" in placement and (placement["nodes"] < 2 or placement.get("emulate") == "loopback"):
            problems.append(f"placements: {placement['name']!r} has a switch with nodes: {placement['nodes']}, "
                            f"emulate: {placement.get('emulate', 'namespaces')}; a switch joins virtual nodes: "
                            "it needs nodes >= 2 and emulate: namespaces (or no emulate:)")
    known = known_kernels()
    for entry, spec in config["kernels"].items():
        kernel = kernel_of(entry)
        if kernel not in known:
            close = difflib.get_close_matches(kernel, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"kernels: {kernel!r} is not a kernel{hint}; allowed values: {', '.join(known)}")
        sizes = spec["sizes"]
        if "schedule" in sizes:
            low, high = schedule_range(sizes)
            if low > high:
                problems.append(f"kernels.{entry}.sizes: min {sizes.get('min', low)} is larger than "
                                f"max {sizes.get('max', high)}")
        unknown = [p for p in spec.get("placements", []) if p not in names]
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
    if problems:
        raise CampaignError(f"{source}: invalid campaign file\n" + "\n".join(f"  {p}" for p in problems))


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


def known_kernels() -> list[str]:
    return list(_load_schema()["$defs"]["kernel"]["enum"])


def kernel_of(entry: str) -> str:
    """The kernel a campaign entry runs: 'pingpong.send@nocache' runs 'pingpong.send'."""
    return entry.split("@", 1)[0]


# Ranges a schedule covers when the campaign gives no min or max.
SCHEDULE_DEFAULT_RANGE = {"powers": (1, 4 * 2**20), "netpipe": (1, 4 * 2**20),
                          "small": (4, 8000), "large": (1, 4 * 2**20)}


def schedule_range(sizes: dict) -> tuple[int, int]:
    low, high = SCHEDULE_DEFAULT_RANGE[sizes["schedule"]]
    return parse_size(sizes.get("min", low)), parse_size(sizes.get("max", high))


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

    def kernel_args(self, entry: str, launch: int) -> list[str]:
        """The kernel name and options commbench-kernels gets for one launch of one entry."""
        spec = self.config["kernels"][entry]
        sizes = spec["sizes"]
        if "list" in sizes:
            args = ["--sizes", ",".join(str(parse_size(s)) for s in sizes["list"])]
        else:
            low, high = schedule_range(sizes)
            args = ["--schedule", sizes["schedule"], "-m", f"{low}:{high}"]
            for key, option in (("per_octave", "--per-octave"), ("perturbation", "--perturbation"),
                                ("step", "--step")):
                if key in sizes:
                    args += [option, str(sizes[key])]
        precision = self.config["precision"]
        args += [
            "--rse", str(precision["rse"]),
            "--min-samples", str(precision["min_samples"]),
            "--max-samples", str(precision["max_samples"]),
            "--max-point-time", str(precision["max_point_time"]),
            "-x", str(spec["warmup"]),
            "--min-sample-time", str(spec["min_sample_time"]),
            "--timer", spec["timer"],
            "--cache", spec["cache"],
            "--align", str(spec["align"]),
            "--datatype", spec["datatype"],
            "--window", str(spec["window"]),
            "--messages", str(spec["messages"]),
            "--pieces", str(spec["pieces"]),
            "--rma-sync", spec["sync"],
            "--halo", spec["halo"],
        ]
        if "proc_grid" in spec:
            args += ["--proc-grid", "x".join(map(str, spec["proc_grid"]))]
        if "method" in spec:
            args += ["--method", spec["method"]]
        if "window_buffers" in spec:
            args += ["--window-buffers", spec["window_buffers"]]
        for flag in ("integrity", "io_sync", "drop_cache"):
            if spec[flag]:
                args.append("--" + flag.replace("_", "-"))
        if self.config["shuffle"]:
            args += ["--shuffle", str(launch)]
        if "test_hang_after" in spec:
            args += ["--test-hang-after", str(spec["test_hang_after"])]
        return [kernel_of(entry), *args]

    def launch_settings(self, library: str, placement: str, kernel: str, launch: int) -> dict:
        """Everything about one launch that, when changed, must rerun it."""
        return {
            "placement": self.placement(placement),
            "kernel_args": self.kernel_args(kernel, launch),
            "library_env": self.library_env(library),
            "mpi": self.mpi_of(library),
            "timeout": self.config["timeout"],
            "scratch": self.config["scratch"],
        }

    def changed_settings(self, library: str, placement: str, kernel: str, launch: int,
                         recorded: dict) -> list[str]:
        """What differs between the settings a launch was measured with and those this campaign
        asks for (empty: the same launch)."""
        wanted = json.loads(json.dumps(self.launch_settings(library, placement, kernel, launch)))
        return _differences(recorded, wanted) if recorded != wanted else []

    def runs_on(self, kernel: str, placement: str) -> bool:
        return placement in self.config["kernels"][kernel].get("placements", self.placements)

    def runs(self):
        """Every (library, placement, kernel, launch) the campaign measures."""
        for library in self.libraries:
            for placement in self.placements:
                for kernel in self.kernels:
                    if self.runs_on(kernel, placement):
                        for launch in range(self.launches):
                            yield library, placement, kernel, launch


def _differences(old: dict, new: dict) -> list[str]:
    """Which settings differ; for kernel options, the options themselves (`--rse 0.01 -> 0.05`)."""
    found = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        if key == "kernel_args":
            before, after = _options(old.get(key) or []), _options(new.get(key) or [])
            found += [f"{option} {before.get(option, '(none)')} -> {after.get(option, '(none)')}"
                      for option in sorted(set(before) | set(after)) if before.get(option) != after.get(option)]
        else:
            found.append(f"{key} {json.dumps(old.get(key))} -> {json.dumps(new.get(key))}")
    return found


def _options(args: list[str]) -> dict[str, str]:
    options, key = {}, None
    for word in args[1:]:
        if word.startswith("-") and not word.lstrip("-").replace(".", "").isdigit():
            key = word
            options[key] = ""
        elif key:
            options[key] = (options[key] + " " + word).strip()
    return options


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
    return campaign_from_config(raw, source=str(path))


# Keys of a Snakemake config that say how the workflow runs, not what the campaign measures
# (workflow/rules/common.smk reads them), so `--config overwrite=true` may sit beside the campaign's keys.
WORKFLOW_OPTIONS = ("build_dir", "strict_build", "resource_checks", "overwrite")


def campaign_from_config(config, source: str) -> Campaign:
    """The campaign a config holds: a campaign file's keys, as read or as Snakemake's `config` has them
    (the --configfile with --config overrides merged in, or a using workflow's module config), with
    the workflow's options left out. Raises CampaignError naming `source` on any problem."""
    if isinstance(config, Mapping):
        config = {key: value for key, value in config.items() if key not in WORKFLOW_OPTIONS}
    config = validate_campaign(config, source=source)
    return Campaign(name=config["campaign"], source=source, config=config)


def read_overrides(overrides: Mapping) -> dict:
    """`--config` values as a campaign file would give them. Snakemake reads a top-level value as a
    number or boolean where it can, but leaves everything inside a mapping or a list a string
    (`precision={rse: 0.05}` gives {'rse': '0.05'}); those strings are read again as YAML."""
    def read(value):
        if isinstance(value, Mapping):
            return {key: read(item) for key, item in value.items()}
        if isinstance(value, list):
            return [read(item) for item in value]
        if isinstance(value, str):
            try:
                return yaml.safe_load(value)
            except yaml.YAMLError:
                return value
        return value

    return {key: read(value) if isinstance(value, (Mapping, list)) else value for key, value in overrides.items()}


def describe_overrides(overrides: Mapping) -> str:
    """`--config launches=5 precision={rse: 0.05}`, for messages and the dataset's record of its source."""
    def word(value) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, (Mapping, list)):
            return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 16).strip()
        return json.dumps(value)

    return "--config " + " ".join(f"{key}={word(value)}" for key, value in overrides.items())
