"""The campaign file's schema: where it lives, the defaults it fills in, and its validation errors in words."""

from __future__ import annotations

import copy
import difflib

import yaml

from commbench.locations import ROOT

SCHEMA_PATH = ROOT / "workflow" / "schemas" / "campaign.schema.yaml"   # the checkout's, or the installed copy


def load_schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _key_path(path) -> str:
    parts = []
    for part in path:
        parts.append(f"[{part}]" if isinstance(part, int) else (f".{part}" if parts else str(part)))
    return "".join(parts) or "(top level)"


def validator(schema: dict):
    """A JSON-schema validator of `schema` (jsonschema imported on first use: see checks.validate_campaign)."""
    import jsonschema

    return jsonschema.Draft202012Validator(schema)


def describe_error(error) -> str:
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
            return describe_error(deepest)
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
