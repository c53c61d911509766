"""A campaign's launches in rounds: round r runs every (library, placement, kernel) cell once (launch
index r of each), in an order drawn at random per round from the campaign's `round_seed`, and round
r+1 starts only once round r has ended (the workflow makes each launch wait for the one before it).
Whatever drifts through a campaign (another job, the CPU's frequency, a filling cache) then falls on
every row alike, and a comparison can pair two rows' launches of the same round.

A round's order is its cells sorted by the SHA-256 of (seed, round, cell): a uniformly random
permutation that anyone can recompute from the recorded seed, independent of the order the campaign
file lists its rows in and of the Python that drew it; a cell added to the campaign takes a place in
each round without reordering the others, and adding rounds leaves the earlier ones as they were.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable
from pathlib import Path

Cell = tuple[str, str, str]              # (library, placement, kernel)
Run = tuple[str, str, str, int]          # (library, placement, kernel, launch)

# A drawn seed: below 2**31, so that it reads as an ordinary integer everywhere it is shown.
SEED_LIMIT = 2 ** 31
# Where a results folder keeps the seed its launches are measured with (results/<campaign>/<this>).
SEED_FILE = "rounds.json"


def round_order(cells: Iterable[Cell], seed: int, round_: int) -> list[Cell]:
    """The cells in the order round `round_` runs them."""
    return sorted(cells, key=lambda cell: _key(seed, round_, cell))


def _key(seed: int, round_: int, cell: Cell) -> bytes:
    # '/' and ':' are in no name (the schema's name patterns), so distinct cells never share a text.
    return hashlib.sha256(f"{seed}:{round_}:{'/'.join(cell)}".encode()).digest()


def sequence(cells: Iterable[Cell], seed: int, rounds: int) -> list[Run]:
    """Every launch of the campaign in the order it runs: round 0's cells, then round 1's, ..."""
    cells = list(cells)
    return [(*cell, round_) for round_ in range(rounds) for cell in round_order(cells, seed, round_)]


def draw_seed() -> int:
    return secrets.randbelow(SEED_LIMIT)


def recorded_seed(results: Path) -> int | None:
    """The seed results/<campaign>/ recorded when its campaign first ran, or None where there is none.
    A damaged file is named, never silently replaced by a new seed (which would reorder the rest)."""
    path = Path(results) / SEED_FILE
    if not path.exists():
        return None
    try:
        seed = json.loads(path.read_text())["round_seed"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: cannot read the recorded round_seed ({error}); give the campaign's "
                         f"round_seed, or remove the file to draw a new one (the remaining launches "
                         f"then run in another order)") from None
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"{path}: round_seed {seed!r} is no integer of at least 0")
    return seed


def seed_record(seed: int) -> str:
    """The text of results/<campaign>/rounds.json."""
    return json.dumps({"round_seed": seed}) + "\n"


# Where a campaign of launches until decided keeps its looks and the rounds it runs
# (results/<campaign>/<this>); `commlens run` writes it after each look (commlens.orchestrate.until_decided).
DECISIONS_FILE = "decisions.json"


def rounds_outside(until: dict, rounds: int) -> str | None:
    """Launches until decided: why `rounds` cannot be run under `until` ({min, max, until}), or None."""
    if until["min"] <= rounds <= until["max"]:
        return None
    return f"{rounds} is outside launches.min..launches.max ({until['min']}..{until['max']})"


def recorded_decisions(results: Path) -> dict | None:
    """results/<campaign>/decisions.json, or None where there is none. A damaged file is named."""
    path = Path(results) / DECISIONS_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        rounds = record["rounds"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: cannot read the rounds recorded by launches until decided ({error}); "
                         f"remove the file to start again from the campaign's launches.min") from None
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ValueError(f"{path}: rounds {rounds!r} is no integer of at least 1")
    return record
