"""The Campaign model: a validated campaign's libraries, placements and kernels, the runs it asks for,
each launch's command-line options and settings, and the hash that identifies its configuration."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from commlens.campaign import rounds
from commlens.campaign.kernels import kernel_of, size_range_option, timing_args
from commlens.units import parse_size


@dataclass(frozen=True)
class Campaign:
    """A validated campaign: what to run, and the hash that identifies its configuration."""

    name: str
    source: str
    config: dict

    @property
    def config_hash(self) -> str:
        canonical = json.dumps(self.config, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def libraries(self) -> list[str]:
        return list(self.config["libraries"])

    @property
    def placements(self) -> list[str]:
        return [p["name"] for p in self.config["placements"]]

    @property
    def kernels(self) -> list[str]:
        return list(self.config["kernels"])

    @property
    def launches(self) -> int:
        """Launches of each (library, placement, kernel): the rounds the workflow runs. With launches
        until decided, the rounds run so far (`rounds`, set by commlens run), at first the minimum."""
        until = self.until_decided
        return self.config["launches"] if until is None else self.config.get("rounds", until["min"])

    @property
    def until_decided(self) -> dict | None:
        """{min, max, until: decided} where the campaign runs launches until decided, else None."""
        value = self.config["launches"]
        return value if isinstance(value, dict) else None

    def launches_in_words(self) -> str:
        """'12 launches', or for launches until decided '4 launches a round, 3 to 8 rounds ...'."""
        until = self.until_decided
        if until is None:
            return f"{self.launch_count} launches"
        return (f"{self.launch_count // self.launches} launches a round, {until['min']} to {until['max']} rounds "
                f"until the compare: pairs are decided")

    @property
    def mpi_names(self) -> list[str]:
        """The installations the campaign needs, each built once however many rows use it."""
        return sorted({row["mpi"] for row in self.config["libraries"].values()})

    def mpi_of(self, library: str) -> str:
        return self.config["libraries"][library]["mpi"]

    def library_env(self, library: str) -> dict[str, str]:
        return {k: _env_value(v) for k, v in self.config["libraries"][library].get("env", {}).items()}

    def placement(self, name: str) -> dict:
        return next(p for p in self.config["placements"] if p["name"] == name)

    def kernel_args(self, entry: str, launch: int) -> list[str]:
        """The kernel name and options commlens-kernels gets for one launch of one entry."""
        spec = self.config["kernels"][entry]
        sizes = spec["sizes"]
        if "list" in sizes:
            args = ["--sizes", ",".join(str(parse_size(s)) for s in sizes["list"])]
        else:
            args = ["--schedule", sizes["schedule"], "-m", size_range_option(sizes)]
            for key, option in (("per_octave", "--per-octave"), ("perturbation", "--perturbation"),
                                ("step", "--step")):
                if key in sizes:
                    args += [option, str(sizes[key])]
        precision = self.config["precision"]
        args += [
            "--rse", str(precision["rse"]),
            "--min-samples", str(precision["min_samples"]),
            "--max-samples", str(precision["max_samples"]),
            "--max-point-time", str(precision["max_point_time"]),
            "--min-sample-time", str(spec["min_sample_time"]),
            "--timer", spec["timer"],
            "--cache", spec["cache"],
            "--align", str(spec["align"]),
            "--datatype", spec["datatype"],
            "--window", str(spec["window"]),
            "--messages", str(spec["messages"]),
            "--pieces", str(spec["pieces"]),
            "--partitions", str(spec["partitions"]),
            "--rma-sync", spec["sync"],
            "--halo", spec["halo"],
        ]
        if "proc_grid" in spec:
            args += ["--proc-grid", "x".join(map(str, spec["proc_grid"]))]
        args += timing_args(spec)
        if "method" in spec:
            args += ["--method", spec["method"]]
        if "window_buffers" in spec:
            args += ["--window-buffers", spec["window_buffers"]]
        for flag in ("integrity", "io_sync", "drop_cache"):
            if spec[flag]:
                args.append("--" + flag.replace("_", "-"))
        if self.config["shuffle"]:
            args += ["--shuffle", str(launch)]
        if "test_hang_after" in spec:
            args += ["--test-hang-after", str(spec["test_hang_after"])]
        return [kernel_of(entry), *args]

    def launch_settings(self, library: str, placement: str, kernel: str, launch: int) -> dict:
        """Everything about one launch that, when changed, must rerun it: a changed round_seed
        changes the design every launch was placed in."""
        settings = {
            "placement": self.placement(placement),
            "kernel_args": self.kernel_args(kernel, launch),
            "library_env": self.library_env(library),
            "mpi": self.mpi_of(library),
            "timeout": self.config["timeout"],
            "scratch": self.config["scratch"],
        }
        if self.round_seed is not None:
            settings["round_seed"] = self.round_seed
        return settings

    def changed_settings(self, library: str, placement: str, kernel: str, launch: int,
                         recorded: dict) -> list[str]:
        """What differs between the settings a launch was measured with and those this campaign
        asks for (empty: the same launch)."""
        wanted = json.loads(json.dumps(self.launch_settings(library, placement, kernel, launch)))
        return _differences(recorded, wanted) if recorded != wanted else []

    def runs_on(self, kernel: str, placement: str) -> bool:
        return placement in self.config["kernels"][kernel].get("placements", self.placements)

    @property
    def launch_count(self) -> int:
        """How many launches runs() yields, counted without listing them (a campaign may ask for a billion,
        which validation refuses by this count)."""
        names = set(self.placements)
        per_library = sum(len(names & set(spec.get("placements", names))) for spec in self.config["kernels"].values())
        return len(self.libraries) * per_library * self.launches

    def runs(self):
        """Every (library, placement, kernel, launch) the campaign measures."""
        for library, placement, kernel in self.cells():
            for launch in range(self.launches):
                yield library, placement, kernel, launch

    def cells(self) -> list[rounds.Cell]:
        """Every (library, placement, kernel) the campaign measures: what one round runs."""
        return [(library, placement, kernel) for library in self.libraries for placement in self.placements
                for kernel in self.kernels if self.runs_on(kernel, placement)]

    @property
    def round_seed(self) -> int | None:
        """The seed of the order of launches within each round (commlens.campaign.rounds); None until
        the workflow has drawn or read it."""
        return self.config.get("round_seed")

    def in_rounds(self) -> list[rounds.Run]:
        """Every launch in the order it runs: round by round (launch index r is round r), each round's
        cells in the order drawn from round_seed."""
        return rounds.sequence(self.cells(), self._seed(), self.launches)

    def turn(self, library: str, placement: str, kernel: str, launch: int) -> dict[str, int]:
        """A launch's place in the design: its round and its position within the round (0: first)."""
        order = rounds.round_order(self.cells(), self._seed(), launch)
        return {"round": launch, "round_position": order.index((library, placement, kernel))}

    def _seed(self) -> int:
        if self.round_seed is None:
            raise ValueError(f"{self.source}: campaign {self.name!r} has no round_seed yet (the workflow draws "
                             f"one when the campaign first runs)")
        return self.round_seed


def _differences(old: dict, new: dict) -> list[str]:
    """Which settings differ; for kernel options, the options themselves (`--rse 0.01 -> 0.05`)."""
    found = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        if key == "kernel_args":
            before, after = _options(old.get(key) or []), _options(new.get(key) or [])
            found += [f"{option} {before.get(option, '(none)')} -> {after.get(option, '(none)')}"
                      for option in sorted(set(before) | set(after)) if before.get(option) != after.get(option)]
        else:
            found.append(f"{key} {json.dumps(old.get(key))} -> {json.dumps(new.get(key))}")
    return found


def _options(args: list[str]) -> dict[str, str]:
    options, key = {}, None
    for word in args[1:]:
        if word.startswith("-") and not word.lstrip("-").replace(".", "").isdigit():
            key = word
            options[key] = ""
        elif key:
            options[key] = (options[key] + " " + word).strip()
    return options


def _env_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
