"""Loading a campaign: from its file, or from the config Snakemake holds."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from commlens.campaign.bounds import read_yaml
from commlens.campaign.checks import validate_campaign
from commlens.campaign.model import Campaign
from commlens.campaign.overrides import WORKFLOW_OPTIONS


def load_campaign(path) -> Campaign:
    """Reads and validates a campaign file; raises CampaignError naming the file on any problem, a file
    too large for a campaign or standing for too many values (commlens.campaign.bounds) among them."""
    path = Path(path)
    return campaign_from_config(read_yaml(path), source=str(path))


def campaign_from_config(config, source: str) -> Campaign:
    """The campaign a config holds: a campaign file's keys, as read or as Snakemake's `config` has them
    (the --configfile with --config overrides merged in, or a using workflow's module config), with
    the workflow's options left out. Raises CampaignError naming `source` on any problem."""
    if isinstance(config, Mapping):
        config = {key: value for key, value in config.items() if key not in WORKFLOW_OPTIONS}
    config = validate_campaign(config, source=source)
    return Campaign(name=config["campaign"], source=source, config=config)
