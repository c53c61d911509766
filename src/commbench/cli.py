"""`commbench validate CAMPAIGN` and `commbench summary CAMPAIGN|DATASET`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .campaign import CampaignError, load_campaign


def _dataset_path(target: str) -> Path:
    path = Path(target)
    if path.suffix in {".yaml", ".yml"}:
        name = load_campaign(path).name
        return Path("results") / name / f"{name}.nc"
    return path


def summary(target: str) -> int:
    import numpy as np

    from .dataset import open_campaign

    path = _dataset_path(target)
    ds = open_campaign(path)
    stats = ds.commbench.summary(ci=False)
    print(f"dataset: {path}")
    status = ds["status"].values.ravel().tolist()
    print(f"launches: {status.count('ok')} ok of {len(status)}")
    sizes = ds["size"].values
    small, large = sizes.min(), sizes.max()
    print(f"{'library':<24}{'placement':<12}{'kernel':<18}{f'{small} B latency (us)':>20}"
          f"{f'{large} B bandwidth (MB/s)':>28}")
    for lib in ds.library.values:
        for pl in ds.placement.values:
            for k in ds.kernel.values:
                cell = stats.sel(library=lib, placement=pl, kernel=k)
                lat = cell["median"].sel(size=small).item()
                bw = cell["bandwidth"].sel(size=large).item()
                show = (lambda v, scale: f"{v * scale:.3f}" if np.isfinite(v) else "n/a")
                print(f"{lib:<24}{pl:<12}{k:<18}{show(lat, 1e6):>20}{show(bw, 1e-6):>28}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="commbench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("validate", help="check a campaign file").add_argument("campaign")
    commands.add_parser("summary", help="latency and bandwidth table of a campaign's dataset").add_argument(
        "target", help="campaign file or dataset (.nc)")
    args = parser.parse_args(argv)
    try:
        if args.command == "validate":
            campaign = load_campaign(args.campaign)
            print(f"{args.campaign}: ok, campaign {campaign.name!r}, {sum(1 for _ in campaign.runs())} launches")
            return 0
        return summary(args.target)
    except (CampaignError, FileNotFoundError, ValueError) as error:
        print(f"commbench: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
