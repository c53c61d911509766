"""The campaign file: its schema and checks, the Campaign model and its overrides. Whether its kernels exist
and its launches fit this machine is checked against the kernel catalogue (commlens.launch.preflight)."""

from commlens.campaign.checks import validate_campaign
from commlens.campaign.errors import CampaignError
from commlens.campaign.kernels import SCHEDULE_DEFAULT_RANGE, kernel_of, schedule_range
from commlens.campaign.loading import campaign_from_config, load_campaign
from commlens.campaign.model import Campaign
from commlens.campaign.overrides import WORKFLOW_OPTIONS, describe_overrides, read_overrides
from commlens.campaign.placements import shape_from_placement_name

__all__ = ["Campaign", "CampaignError", "SCHEDULE_DEFAULT_RANGE", "WORKFLOW_OPTIONS",
           "campaign_from_config", "describe_overrides", "kernel_of",
           "load_campaign", "read_overrides", "schedule_range", "shape_from_placement_name",
           "validate_campaign"]
