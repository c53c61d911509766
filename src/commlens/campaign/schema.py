"""The campaign file's schema: where it lives, the defaults it fills in, and its validation errors in words."""

from __future__ import annotations

import copy
import difflib
import math
import re

import yaml

from commlens.campaign.bounds import key_path, shown
from commlens.lean_imports import import_jsonschema
from commlens.locations import ROOT

SCHEMA_PATH = ROOT / "workflow" / "schemas" / "campaign.schema.yaml"   # the checkout's, or the installed copy


def load_schema() -> dict:
    # libyaml's loader where PyYAML has it: a campaign read back from the validated-campaign cache is
    # checked against the schema (structure_problems), and the pure-Python loader takes 35 ms of it, libyaml 7.
    return yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def validator(schema: dict):
    """A JSON-schema validator of `schema` whose integers are whole numbers written as such: JSON Schema
    takes 3.0 as an integer, but a launch count of 3.0 is no count (range(3.0) fails) and the harness
    reads "3.0" as no integer. jsonschema is imported here, on first use (commlens.lean_imports): every
    launch imports this package for the Campaign model alone."""
    jsonschema = import_jsonschema()

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool))

    def pattern(validator, regex, instance, _schema):   # an ECMA-262 pattern, read as ECMA reads it
        if validator.is_type(instance, "string") and not re.search(python_regex(regex), instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {regex!r}")

    return jsonschema.validators.extend(base, {"pattern": pattern}, type_checker=checker)(schema)


_TYPES: dict[str, type | tuple[type, ...]] = {"object": dict, "array": list, "string": str, "integer": int,
                                              "number": (int, float), "boolean": bool}


def structure_problems(instance, schema: dict, root: dict, path: tuple = ()) -> list[str]:
    """What `instance` breaks of the schema's types, required and unknown keys, enums, patterns, lengths
    and number bounds: what keeps its names and words safe (names become paths under results/, shell
    words and variable names) and its counts finite, checked without jsonschema. For a campaign read
    back from the validated-campaign cache, which anyone with the user's rights can edit: jsonschema's
    import would cost every launch that reads the campaign 0.1 s, the cache's whole gain."""
    schema = _resolve(schema, root)
    where = key_path(path)
    if "oneOf" in schema:
        tries = [structure_problems(instance, branch, root, path) for branch in schema["oneOf"]]
        if all(tries):
            return tries[0]
    kinds = [schema["type"]] if isinstance(schema.get("type"), str) else schema.get("type", [])
    if kinds and not any(isinstance(instance, _TYPES[kind]) and (kind == "boolean" or not isinstance(instance, bool))
                         for kind in kinds):
        return [f"{where}: {shown(instance)} is not {' or '.join(kinds)}"]
    if "enum" in schema and instance not in schema["enum"]:
        return [f"{where}: {shown(instance)} is not one of {', '.join(map(str, schema['enum']))}"]
    if isinstance(instance, str) and ("pattern" in schema and not re.search(python_regex(schema["pattern"]), instance)
                                      or len(instance) > schema.get("maxLength", len(instance))):
        return [f"{where}: {shown(instance)} is not allowed"]
    if isinstance(instance, (int, float)) and not isinstance(instance, bool) and not _within_bounds(instance, schema):
        return [f"{where}: {shown(instance)} is out of bounds"]
    problems = []
    if isinstance(instance, dict):
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties")
        problems += [f"{where}: no {key}" for key in schema.get("required", []) if key not in instance]
        for key, value in instance.items():
            if "propertyNames" in schema:
                problems += structure_problems(key, schema["propertyNames"], root, path + (key,))
            if key in properties:
                problems += structure_problems(value, properties[key], root, path + (key,))
            elif isinstance(extra, dict):
                problems += structure_problems(value, extra, root, path + (key,))
            elif extra is False:
                problems.append(f"{key_path(path + (key,))}: unknown key")
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(instance):
            problems += structure_problems(item, schema["items"], root, path + (index,))
    return problems


def _within_bounds(number, schema: dict) -> bool:
    """Whether `number` lies within the schema's minimum, maximum and exclusive bounds (nan never does)."""
    return (schema.get("minimum", -math.inf) <= number <= schema.get("maximum", math.inf)
            and schema.get("exclusiveMinimum", -math.inf) < number < schema.get("exclusiveMaximum", math.inf))


def python_regex(pattern: str) -> str:
    """A JSON-schema pattern (ECMA-262) for Python's `re`. They differ where it matters for names: ECMA's
    `$` is the end of the text, Python's also matches before a final newline, which would let the
    campaign name "quick\\n" through to paths and shell lines. `$` outside brackets becomes `\\Z`."""
    translated, in_brackets, escaped = [], False, False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "[]":
            in_brackets = char == "["
        elif char == "$" and not in_brackets:
            char = r"\Z"
        translated.append(char)
    return "".join(translated)


MAX_UNKNOWN_SHOWN = 5     # unknown keys one message names


def describe_error(error) -> str:
    """One line a user can act on: the key, the bad value and what is allowed."""
    where = key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        known = set(allowed)
        unknown = [k for k in error.instance if k not in known]
        hints = []
        for key in unknown[:MAX_UNKNOWN_SHOWN]:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hints.append(f"unknown key {shown(key)}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        if len(unknown) > MAX_UNKNOWN_SHOWN:
            hints.append(f"and {len(unknown) - MAX_UNKNOWN_SHOWN:,} more unknown keys")
        return f"{where}: {'; '.join(hints)}; allowed keys: {', '.join(allowed)}"
    if error.validator == "enum":
        allowed = [str(v) for v in error.validator_value]
        close = difflib.get_close_matches(str(error.instance), allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{where}: {shown(error.instance)} is not allowed{hint}; allowed values: {', '.join(allowed)}"
    if error.validator == "pattern":
        takes = PATTERN_WORDS.get(error.validator_value, f"a match of {error.validator_value}")
        return f"{where}: {shown(error.instance)} is not allowed; allowed: {takes}"
    if error.validator == "oneOf" and error.context:
        deepest = max(error.context, key=lambda e: len(e.absolute_path))
        if deepest.absolute_path != error.absolute_path:
            return describe_error(deepest)
        # The one branch the value has the type and the required keys of (launches: 0 is an integer; sizes
        # with `schedule:` are a schedule): what that branch refuses.
        fitting = [e for e in error.context if e.schema_path[0] not in
                   {e.schema_path[0] for e in error.context if e.validator == "type"}]
        if len({e.schema_path[0] for e in fitting}) > 1:
            fitting = [e for e in fitting if e.schema_path[0] not in
                       {e.schema_path[0] for e in fitting if e.validator == "required"}]
        if fitting and len({e.schema_path[0] for e in fitting}) == 1:
            # An unknown key says more than a missing one (`untl:` for `until:`).
            return describe_error(min(fitting, key=lambda e: e.validator != "additionalProperties"))
        branches = error.schema["oneOf"]
        # A value of none of the types, where the types alone say what is allowed: name them.
        if all(e.validator == "type" for e in error.context) and \
                all("type" in branch and "pattern" not in branch for branch in branches):
            takes = " or ".join(_number_words(branch) + (f" with keys {', '.join(branch['properties'])}"
                                                          if "properties" in branch else "") for branch in branches)
            return f"{where}: {shown(error.instance)} is not allowed; allowed: {takes}"
        takes = error.schema.get("description") or _clipped(error.message)
        return f"{where}: {shown(error.instance)} is not allowed; allowed: {takes}"
    if error.validator == "type":
        return f"{where}: {shown(error.instance)} is not allowed; allowed: {_number_words(error.schema)}"
    if error.validator == "maxLength":
        return f"{where}: {shown(error.instance)} is too long; allowed: at most {error.validator_value} characters"
    if error.validator in ("maxItems", "maxProperties"):
        return f"{where}: {len(error.instance):,} {'items' if error.validator == 'maxItems' else 'keys'}; " \
               f"allowed: at most {error.validator_value:,}"
    return f"{where}: {_clipped(error.message)}"


def _clipped(message: str) -> str:
    """jsonschema's own message, which quotes the whole value, cut to a line."""
    return message if len(message) <= 200 else message[:197] + "..."


def _number_words(schema: dict) -> str:
    """What a typed key takes, in words: 'an integer, at least 1'."""
    kinds: list[str] = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    words = " or ".join({"integer": "an integer", "number": "a number", "boolean": "true or false",
                         "string": "a string", "array": "a list", "object": "a mapping"}.get(k, k) for k in kinds)
    bounds = [f"{word} {schema[key]}" for key, word in (("minimum", "at least"), ("exclusiveMinimum", "above"),
                                                       ("maximum", "at most"), ("exclusiveMaximum", "below"))
              if key in schema]
    return ", ".join([words, *bounds])


# The schema's name patterns in words: names become paths, shell words and variable names.
PATTERN_WORDS = {
    "^[a-z][a-z0-9_.]*$": "a kernel name (lower-case letters, digits, '_' and '.')",
    "^[0-9]+N[0-9]+P$": "a placement named <nodes>N<ppn>P, e.g. 1N2P",
    "^[0-9]+(k|K|M|G|Ki|Mi|Gi)?$": "bytes as digits with an optional k, K, M, G, Ki, Mi or Gi suffix",
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


def fill_defaults(instance, schema: dict, root: dict):
    """Fills in the schema's defaults, recursing through properties, maps and oneOf branches."""
    schema = _resolve(schema, root)
    if "oneOf" in schema:
        for branch in schema["oneOf"]:
            branch = _resolve(branch, root)
            if validator(root).evolve(schema=branch).is_valid(instance):
                return fill_defaults(instance, branch, root)
        return instance
    if isinstance(instance, dict):
        for key, sub in schema.get("properties", {}).items():
            sub = _resolve(sub, root)
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
            if key in instance:
                instance[key] = fill_defaults(instance[key], sub, root)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in instance:
                if key not in schema.get("properties", {}):
                    instance[key] = fill_defaults(instance[key], extra, root)
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        return [fill_defaults(item, schema["items"], root) for item in instance]
    return instance
