"""How large a campaign may be before anything reads it whole, and values shown in messages cut to a line.

A campaign file is a few kilobytes and a few hundred values. YAML lets a short file stand for a huge
one: an alias (`*name`) repeats what its anchor (`&name`) marks, and anchors nest, so 600 bytes can
stand for a billion strings. PyYAML builds such a file cheaply (every alias is the same Python
object), but everything that walks it afterwards (the validated-campaign cache's JSON, the schema's
validator, its error message that quotes the value) pays for every copy: gigabytes and minutes
before a MemoryError. So the file's size and the number of values it stands for are bounded here,
before validation, for a campaign file read by commlens and for the config Snakemake read from it.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from commlens.campaign.errors import CampaignError

MAX_FILE_BYTES = 1 << 20     # the largest shipped campaign file is 4 KiB
MAX_VALUES = 100_000         # mapping keys and values, list items, aliases counted as the copies they stand for;
                             # the largest shipped campaign holds about 500
MAX_DEPTH = 32               # nesting; a campaign's deepest key (kernels.<k>.sizes.list[i]) is at depth 5
MAX_SIZES = 1000             # in one launch, however given (a list, or a schedule's min, max and step); the
                             # schema says it of a list (maxItems) for editors; the largest shipped entry has 109
MAX_LAUNCHES = 100_000       # in all (rows x placements x kernels x launches): at a second each, more than a day;
                             # the largest shipped campaign has 190
SHOWN_DEPTH = 4              # keys of the path an error names (libraries.<row>.env.<NAME>)
MAX_SHOWN_CHARS = 120        # of one value quoted in a message
MAX_PROBLEMS = 40            # lines of one error message; the rest are counted

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict, _SHOWN.maxstring, _SHOWN.maxother = 2, 4, 4, 80, 80


def shown(value) -> str:
    """`value` as a message quotes it: its repr, cut to one short line however large the value."""
    text = _SHOWN.repr(value).replace("\n", "\\n")
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS - 3] + "..."


def problem_lines(problems: list[str]) -> str:
    """The problems as an error message's indented lines, at most MAX_PROBLEMS of them."""
    lines = [f"  {p}" for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        lines.append(f"  ... and {len(problems) - MAX_PROBLEMS} more")
    return "\n".join(lines)


def read_yaml(path: Path) -> object:
    """The YAML document in `path`, refused (CampaignError naming the file) when the file is larger than a
    campaign file can be or nests deeper than Python's parser can follow. What it stands for once its
    aliases are expanded is check_size's to bound."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise CampaignError(f"{path}: no such campaign file") from None
    if size > MAX_FILE_BYTES:
        raise CampaignError(f"{path}: {size:,} bytes; a campaign file is at most {MAX_FILE_BYTES:,} bytes")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise CampaignError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:
        raise CampaignError(f"{path}: nested too deeply to read; a campaign nests at most {MAX_DEPTH} levels") \
            from None
    except UnicodeDecodeError as exc:
        raise CampaignError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None


def key_path(path) -> str:
    """('kernels', 'pingpong.send', 'sizes', 'list', 2) -> kernels.pingpong.send.sizes.list[2]"""
    parts: list[str] = []
    for part in path:
        parts.append(f"[{part}]" if isinstance(part, int) else (f".{part}" if parts else str(part)))
    return shown_key("".join(parts)) if parts else "(top level)"


def shown_key(text: str) -> str:
    """A key as a message names it: as it is, unless it is long or holds a newline or other control character."""
    return text if len(text) <= MAX_SHOWN_CHARS and text.isprintable() else shown(text)


def _outer(path: tuple) -> tuple:
    """The part of a path an error names: at most SHOWN_DEPTH keys, and one list index (report.notes[5],
    not report.notes[5][6][0], whose indices only say how the aliases nest)."""
    indices = [i for i, part in enumerate(path) if isinstance(part, int)]
    return path[:min(SHOWN_DEPTH, indices[1] if len(indices) > 1 else len(path))]


def check_size(config, source: str) -> None:
    """Raises CampaignError naming `source` and where `config` holds more than MAX_VALUES values or nests
    deeper than MAX_DEPTH, counting what is shared (a YAML alias) as often as it appears. Stops counting
    at the bound, so refusing a billion values takes as long as counting MAX_VALUES."""
    if not isinstance(config, Mapping):
        return      # validation says what a campaign file is
    count, shared, seen = len(config), False, set()
    stack: list[tuple[Any, tuple]] = [(value, (key,)) for key, value in reversed(list(config.items()))]
    while stack:
        value, path = stack.pop()
        if not isinstance(value, (Mapping, list)):
            continue
        shared = shared or id(value) in seen
        seen.add(id(value))
        if len(path) >= MAX_DEPTH:
            how = " (an alias inside what its own anchor marks?)" if shared else ""
            raise CampaignError(f"{source}: {key_path(_outer(path))}: nested more than {MAX_DEPTH} levels deep{how}; "
                                f"a campaign nests at most {MAX_DEPTH}")
        count += len(value) * (2 if isinstance(value, Mapping) else 1)
        if count > MAX_VALUES:
            how = " once its YAML aliases (*name: a copy of what &name marks) are expanded" if shared else ""
            raise CampaignError(f"{source}: {key_path(_outer(path))}: more than {MAX_VALUES:,} values{how}; "
                                f"a campaign holds at most {MAX_VALUES:,}")
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        stack.extend(reversed([(item, path + (key,)) for key, item in items]))
