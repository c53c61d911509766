"""A campaign dataset's attributes: its provenance (the campaign, the code and builds that ran it, the
hosts), from the campaign and what its launches recorded (commlens.data.collect's run records)."""

from __future__ import annotations

import getpass
import json
from collections.abc import Sequence
import socket
from datetime import datetime, UTC

import numpy as np

from commlens import __version__
from commlens.campaign import Campaign
from commlens.io.raw import RawFileError
from commlens.launch.provenance import cpu_model, git_commit, os_description, source_hash


def dataset_attributes(campaign: Campaign, builds: dict[str, dict], runs, refused: Sequence[RawFileError]) -> dict:
    """The dataset's provenance: the campaign, the code and builds that ran it, and the hosts."""
    flags = sorted({b["cflags"] for b in builds.values() if "cflags" in b})
    return {
        "campaign": campaign.name,
        "campaign_file": campaign.source,
        "campaign_config": json.dumps(campaign.config, sort_keys=True),
        "config_hash": campaign.config_hash,
        "kernel_source_hash": source_hash(),
        "commlens_version": __version__,
        "git_commit": git_commit(),
        "compilers": json.dumps({m: builds[m].get("compiler_command", "") for m in sorted(builds)}),
        "build_warnings": json.dumps({m: builds[m].get("warnings", []) for m in sorted(builds)
                                      if builds[m].get("warnings")}),
        "compiler_flags": " | ".join(flags),
        "hosts": ",".join(sorted(runs.all_hosts)),
        "cpu_model": cpu_model(),
        "os": os_description(),
        "timer_resolution_s": (float(np.nanmin(runs.resolution)) if np.isfinite(runs.resolution).any()
                               else np.nan),
        "first_launch": min((s for s in runs.started.ravel() if s), default=""),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "refused_files": json.dumps([str(e) for e in refused]),
        # The seed of the launches' order in each round (commlens.campaign.rounds), where it ran in rounds.
        **({"round_seed": campaign.round_seed} if campaign.round_seed is not None else {}),
        **creator(campaign),
    }


def creator(campaign: Campaign) -> dict:
    """ACDD's creator_name and institution: the campaign file's `creator` and `institution` where it
    names them, else who collected the dataset and on which host (a catalogue lists a dataset by them)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):     # no login name: a container's user without a passwd entry
        user = "unknown"
    return {"creator_name": str(campaign.config.get("creator") or user),
            "institution": str(campaign.config.get("institution") or socket.gethostname())}
