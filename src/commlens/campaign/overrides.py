"""A workflow's `--config` overrides: the keys that are the workflow's own, and the values read and
written as a campaign file has them."""

from __future__ import annotations

import json
from collections.abc import Mapping

import yaml

from commlens.campaign.bounds import check_size


# Keys of a Snakemake config that say how the workflow runs, not what the campaign measures
# (workflow/rules/common.smk reads them), so `--config overwrite=true` may sit beside the campaign's keys.
WORKFLOW_OPTIONS = ("build_dir", "strict_build", "resource_checks", "overwrite", "kernels_dir")


def read_overrides(overrides: Mapping) -> dict:
    """`--config` values as a campaign file would give them. Snakemake reads a top-level value as a
    number or boolean where it can, but leaves everything inside a mapping or a list a string
    (`precision={rse: 0.05}` gives {'rse': '0.05'}); those strings are read again as YAML, and what they
    stand for is bounded as a campaign file's is (CampaignError), before anything merges them."""
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

    check_size(overrides, "--config")      # Snakemake's own YAML reading leaves aliases shared; read() copies them
    read_back = {key: read(value) if isinstance(value, (Mapping, list)) else value for key, value in overrides.items()}
    check_size(read_back, "--config")
    return read_back


def describe_overrides(overrides: Mapping) -> str:
    """`--config launches=5 precision={rse: 0.05}`, for messages and the dataset's record of its source."""
    def word(value) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, (Mapping, list)):
            return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 16).strip()
        return json.dumps(value)

    return "--config " + " ".join(f"{key}={word(value)}" for key, value in overrides.items())
