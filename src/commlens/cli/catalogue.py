"""`commlens validate CAMPAIGN` and `commlens kernels`: what a campaign file may name."""

from __future__ import annotations

import dataclasses
import json
import sys

from commlens.campaign import load_campaign


def validate(args) -> int:
    from commlens.launch.catalogue import CatalogueError
    from commlens.launch.preflight import check_campaign

    campaign = load_campaign(args.campaign)
    try:
        check_campaign(campaign)
    except CatalogueError as error:
        print(f"{args.campaign}: warning: kernels not checked: {error}", file=sys.stderr)
    print(f"{args.campaign}: ok, campaign {campaign.name!r}, {campaign.launches_in_words()}")
    return 0


def kernels(args) -> int:
    """Every kernel of the catalogue (kernels/catalogue.def), one line each: its name and what one
    sample's time means; with --json, every field of every kernel's description."""
    from commlens.launch.catalogue import catalogue

    described = catalogue()
    if args.json:
        print(json.dumps([dataclasses.asdict(kernel) for kernel in described.values()], indent=1))
        return 0
    width = max(len(name) for name in described)
    for name, kernel in described.items():
        print(f"{name:<{width}}  {kernel.metric}")
    return 0
