"""The error every campaign problem raises."""


class CampaignError(ValueError):
    """A campaign file that cannot be run; the message names the file and every bad key."""
