"""Hostile but realistic input, refused up front with one clear message and nothing written: YAML alias
bombs, placements and counts beyond what runs, spec-file typos, and datasets that are truncated,
empty or not netCDF at all."""

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from commlens import cli
from commlens.campaign import CampaignError, load_campaign, read_overrides
from commlens.campaign.bounds import MAX_LAUNCHES, MAX_VALUES
from commlens.data.imported import import_files
from commlens.data.opening import DatasetError, check_dataset, open_campaign
from commlens.io.netcdf import write_dataset
from commlens.launch.preflight import (RANKS_PER_CPU, check_specs, partition_problems, placement_problems,
                                        resource_problems)

from conftest import REPO, snakemake, workflow_command, write_campaign as write

OSU = REPO / "tests" / "data" / "osu-7.4"

BASE = """\
campaign: hostile
libraries:
  mpich-5.0.2:
    mpi: mpich-5.0.2
placements:
  - {name: 1N2P, nodes: 1, ppn: 2}
kernels:
  pingpong.send: {sizes: {list: [8, 1Ki]}}
"""


# --- YAML alias bombs ------------------------------------------------------------------------------

def alias_bomb(levels: int, fan: int = 9, anchor: str = "a") -> str:
    """A flow list whose anchors nest `levels` deep, each alias list repeating the one before `fan` times:
    about 600 bytes at 9 levels standing for 9^9 (387 million) strings."""
    chain = [f'&{anchor}0 ["lololololololololololol"]'] + [
        f"&{anchor}{i} [" + ",".join([f"*{anchor}{i - 1}"] * fan) + "]" for i in range(1, levels + 1)]
    return "[" + ", ".join(chain) + "]"


def mapping_bomb(levels: int, fan: int = 9) -> str:
    anchors = ['a0: &a0 {x: "lololololololololololol"}'] + [
        f"a{i}: &a{i} {{" + ", ".join(f"k{j}: *a{i - 1}" for j in range(fan)) + "}" for i in range(1, levels + 1)]
    return "\n" + "\n".join("  " + line for line in anchors)


BOMBS = {   # where the bomb sits -> (the campaign file, the key its refusal names)
    "description": (BASE + f"description: {alias_bomb(9)}\n", "description[5]"),
    "report.notes": (BASE + f"report:\n  notes: {alias_bomb(9)}\n", "report.notes[5]"),
    "env value": (BASE.replace("    mpi: mpich-5.0.2\n", f"    mpi: mpich-5.0.2\n    env:\n      X: {alias_bomb(9)}\n"),
                  "libraries.mpich-5.0.2.env.X"),
    "unknown key": (BASE + f"junk: {alias_bomb(9)}\n", "junk[5]"),
    "mappings": (BASE + f"description: {mapping_bomb(9)}\n", "description.a5.k2.k4"),
}


def validate_limited(path: Path) -> subprocess.CompletedProcess:
    """`commlens validate` in 2 GiB of address space: a bomb that is expanded fails there with a
    MemoryError (a traceback, exit 1) instead of taking the machine's memory."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run([sys.executable, "-m", "commlens.cli", "validate", str(path)], capture_output=True,
                          text=True, preexec_fn=limit, timeout=300)


@pytest.mark.parametrize("where", list(BOMBS))
def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path, where):
    text, key = BOMBS[where]
    path = write(tmp_path, text, "bomb.yaml")
    assert len(text) < 1500
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {key}: more than {MAX_VALUES:,} values"), message
    assert "YAML aliases" in message and "\n" not in message and len(message) < 400, message


@pytest.mark.parametrize("where", ["env value", "mappings"])
def test_the_command_line_refuses_a_bomb_in_one_line_within_bounded_memory(tmp_path, where):
    text, key = BOMBS[where]
    refused = validate_limited(write(tmp_path, text, "bomb.yaml"))
    assert refused.returncode == 2, refused.stderr[-2000:]     # not 1: a MemoryError's traceback
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{key}: more than {MAX_VALUES:,} values" in lines[0] and len(lines[0]) < 400, lines


def test_values_below_the_bound_get_messages_of_a_line_each(tmp_path):
    """Four levels (7,381 strings) pass the bound; the schema refuses them, quoting each value cut short."""
    text = BASE + f"description: {alias_bomb(4)}\nreport:\n  notes: {alias_bomb(4, anchor='b')}\n"
    path = write(tmp_path, text, "b.yaml")
    with pytest.raises(CampaignError) as info:
        load_campaign(path)
    lines = str(info.value).splitlines()
    assert lines[0] == f"{path}: invalid campaign file"
    assert lines[1].startswith("  description: [['lolololololololololol") and lines[1].endswith("allowed: a string")
    assert [line.split(":")[0] for line in lines[2:]] == [f"  report.notes[{i}]" for i in range(5)]
    assert all(len(line) < 250 for line in lines), max(map(len, lines))


def test_thousands_of_bad_keys_make_a_message_of_a_few_lines(tmp_path):
    junk = "".join(f"junk{i}: 1\n" for i in range(3000))
    names = "".join(f"  - {{name: 'bad name {i}', nodes: 1, ppn: 2}}\n" for i in range(100))
    with pytest.raises(CampaignError) as info:
        load_campaign(write(tmp_path, BASE.replace("placements:\n", "placements:\n" + names) + junk))
    lines = str(info.value).splitlines()
    assert lines[1].startswith("  (top level): unknown key 'junk0'; ") and "and 2,995 more unknown keys" in lines[1]
    assert len(lines) == 42 and lines[-1] == "  ... and 61 more", lines[-3:]    # 100 bad names after it
    assert all(len(line) < 400 for line in lines)


def test_files_too_large_or_too_deep_and_aliases_inside_themselves(tmp_path):
    big = write(tmp_path, BASE + "description: " + "x" * (2 << 20) + "\n", "big.yaml")
    with pytest.raises(CampaignError, match=r"big.yaml: 2,097,\d+ bytes; a campaign file is at most 1,048,576 bytes"):
        load_campaign(big)
    deep = write(tmp_path, BASE + "description: " + "[" * 5000 + "]" * 5000 + "\n", "deep.yaml")
    with pytest.raises(CampaignError, match="deep.yaml: nested too deeply to read"):
        load_campaign(deep)
    nested = write(tmp_path, BASE + "description: " + "[" * 40 + "]" * 40 + "\n", "nested.yaml")
    with pytest.raises(CampaignError, match=r"nested.yaml: description(\[0\])?: nested more than 32 levels deep"):
        load_campaign(nested)
    cycle = write(tmp_path, BASE + "description: &self [x, *self]\n", "cycle.yaml")
    with pytest.raises(CampaignError, match="an alias inside what its own anchor marks"):
        load_campaign(cycle)


def test_the_workflow_refuses_a_bomb_in_its_campaign_file(tmp_path):
    """Snakemake reads the file (an alias list stays one shared object there); commlens's bound refuses it
    before anything expands it, as `commlens validate` does."""
    (tmp_path / "config").mkdir()
    bomb = write(tmp_path / "config", BOMBS["description"][0], "bomb.yaml")
    run = snakemake(tmp_path, "--configfile", str(bomb), "--dry-run", check=False)
    output = run.stdout + run.stderr
    assert run.returncode != 0 and f"{bomb}: description[5]: more than {MAX_VALUES:,} values" in output, output[-3000:]
    assert len(output) < 5000


def test_a_bomb_in_a_config_override_is_refused_before_it_is_read_again():
    """Snakemake reads `--config description=[&a0 [...], ...]` with YAML, its aliases one shared list;
    reading its strings again as YAML must not copy them out first."""
    import yaml

    shared = yaml.safe_load(alias_bomb(9))
    with pytest.raises(CampaignError, match=rf"^--config: description\[5\]: more than {MAX_VALUES:,} values"):
        read_overrides({"description": shared})
    assert read_overrides({"precision": {"rse": "0.05"}}) == {"precision": {"rse": 0.05}}


# --- Placements and counts beyond what runs --------------------------------------------------------

def test_ranks_and_nodes_beyond_this_host_are_refused_and_existing_shapes_kept(tmp_path):
    text = BASE.replace("  - {name: 1N2P, nodes: 1, ppn: 2}\n",
                        "  - {name: 1N2P, nodes: 1, ppn: 2}\n  - {name: 1N4P, nodes: 1, ppn: 4}\n"
                        "  - {name: 2N2P, nodes: 2, ppn: 2}\n  - {name: 1N512P, nodes: 1, ppn: 512}\n"
                        "  - {name: 512N1P, nodes: 512, ppn: 1}\n"
                        "  - {name: 300N1P, nodes: 300, ppn: 1, emulate: loopback}\n")
    campaign = load_campaign(write(tmp_path, text))
    assert placement_problems(campaign, cpus=2) == [
        f"placements[3] 1N512P: 1 x 512 = 512 ranks on this host's 2 CPUs; at most {2 * RANKS_PER_CPU} run here "
        f"({RANKS_PER_CPU} a CPU: more starve each other until the launch times out)",
        f"placements[4] 512N1P: 512 x 1 = 512 ranks on this host's 2 CPUs; at most {2 * RANKS_PER_CPU} run here "
        f"({RANKS_PER_CPU} a CPU: more starve each other until the launch times out)",
        "placements[4] 512N1P: nodes 512; at most 250 virtual nodes can be made on one host (emulate: loopback "
        "runs more nodes, all as TCP on this host)",
        f"placements[5] 300N1P: 300 x 1 = 300 ranks on this host's 2 CPUs; at most {2 * RANKS_PER_CPU} run here "
        f"({RANKS_PER_CPU} a CPU: more starve each other until the launch times out)",
    ]
    # On a host of 128 CPUs (512 ranks at most) only the 512 virtual nodes are too many.
    assert placement_problems(campaign, cpus=128) == placement_problems(campaign, cpus=2)[2:3]
    # Memory and scratch are checked with them, in one message.
    lines = resource_problems(campaign, memory=64 << 30, disk=64 << 30, cpus=2)
    assert lines == placement_problems(campaign, cpus=2)


def test_validate_and_the_workflow_refuse_placements_this_host_cannot_run(tmp_path):
    (tmp_path / "config").mkdir()
    placements = "{name: 1N512P, nodes: 1, ppn: 512}\n  - {name: 512N1P, nodes: 512, ppn: 1}"
    campaign_file = write(tmp_path / "config", BASE.replace("{name: 1N2P, nodes: 1, ppn: 2}", placements), "c.yaml")
    expected = ["placements[0] 1N512P: 1 x 512 = 512 ranks on this host's", "placements[1] 512N1P: 512 x 1 = 512 ranks",
                "placements[1] 512N1P: nodes 512; at most 250 virtual nodes can be made"]
    cli_run = subprocess.run([sys.executable, "-m", "commlens.cli", "validate", str(campaign_file)],
                             capture_output=True, text=True)
    assert cli_run.returncode == 2 and all(line in cli_run.stderr for line in expected), cli_run.stderr
    run = snakemake(tmp_path, "--configfile", str(campaign_file), "--dry-run", check=False)
    assert run.returncode != 0 and all(line in run.stdout + run.stderr for line in expected), run.stderr[-3000:]
    assert "rule run_launch" not in run.stdout


def test_launch_counts_are_bounded_and_counted_without_listing(tmp_path):
    with pytest.raises(CampaignError, match="launches: 1000000000 is greater than the maximum of 1000"):
        load_campaign(write(tmp_path, BASE + "launches: 1000000000\n"))
    # 1000 launches of 101 kernel entries on one row: more than a campaign runs.
    entries = "".join(f"  memcpy@{i}: {{sizes: {{list: [8]}}}}\n" for i in range(100))
    with pytest.raises(CampaignError) as info:
        load_campaign(write(tmp_path, BASE + entries + "launches: 1000\n"))
    assert (f"launches: 1000 of each of 101 (library, placement, kernel) make 101,000 launches; a campaign runs at "
            f"most {MAX_LAUNCHES:,}") in str(info.value)
    text = BASE.replace("  - {name: 1N2P, nodes: 1, ppn: 2}\n",
                        "  - {name: 1N2P, nodes: 1, ppn: 2}\n  - {name: 2N1P, nodes: 2, ppn: 1}\n")
    campaign = load_campaign(write(tmp_path, text + "  memcpy: {placements: [1N2P]}\nlaunches: 7\n"))
    assert campaign.launch_count == len(list(campaign.runs())) == 3 * 7


@pytest.mark.parametrize("value", ["10000000000", "4294967496", "1000001"])
def test_sample_counts_beyond_what_the_harness_holds_are_refused(tmp_path, value):
    with pytest.raises(CampaignError, match=rf"precision.max_samples: {value} is greater than the maximum of 1000000"):
        load_campaign(write(tmp_path, BASE + f"precision: {{max_samples: {value}}}\n"))


def test_the_largest_sample_count_reaches_the_harness_as_written(tmp_path):
    campaign = load_campaign(write(tmp_path, BASE + "precision: {min_samples: 1000000, max_samples: 1000000}\n"))
    args = campaign.kernel_args("pingpong.send", 0)
    assert args[args.index("--max-samples") + 1] == "1000000" == str(campaign.config["precision"]["max_samples"])


@pytest.mark.parametrize("key,value", [("launches", "3.0"), ("precision", "{max_samples: 1.0e3}")])
def test_integers_are_whole_numbers_written_as_such(tmp_path, key, value):
    with pytest.raises(CampaignError, match="is not allowed; allowed: an integer"):
        load_campaign(write(tmp_path, BASE + f"{key}: {value}\n"))


# --- Spec files ------------------------------------------------------------------------------------

TYPO = BASE.replace("  mpich-5.0.2:\n    mpi: mpich-5.0.2\n", "  mpich:\n    mpi: mpich-5.02\n")


def test_a_spec_typo_is_named_with_the_nearest_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    campaign = load_campaign(write(tmp_path, TYPO))
    with pytest.raises(CampaignError) as info:
        check_specs(campaign)
    lines = str(info.value).splitlines()
    assert lines[0] == f"{tmp_path / 'c.yaml'}: invalid campaign file"
    assert lines[1].startswith("  libraries.mpich.mpi: no spec envs/mpi/mpich-5.02.yaml; did you mean mpich-5.0.2? "
                               f"(looked in {tmp_path / 'envs' / 'mpi'} or {REPO / 'envs' / 'mpi'}; there: "), lines
    # A site's own spec beside the campaign is found first, and one that cannot be used says why.
    (tmp_path / "envs" / "mpi").mkdir(parents=True)
    (tmp_path / "envs" / "mpi" / "mpich-5.02.yaml").write_text("pip: mpich==5.0.2\nversion: 5\n")
    with pytest.raises(CampaignError, match=r"libraries.mpich.mpi: envs/mpi/mpich-5.02.yaml: unknown key\(s\) version"):
        check_specs(campaign)
    (tmp_path / "envs" / "mpi" / "mpich-5.02.yaml").write_text("pip: mpich==5.0.2\n")
    check_specs(campaign)


def test_validate_and_the_workflow_name_the_spec_typo(tmp_path):
    (tmp_path / "config").mkdir()
    campaign_file = write(tmp_path / "config", TYPO, "typo.yaml")
    expected = "libraries.mpich.mpi: no spec envs/mpi/mpich-5.02.yaml; did you mean mpich-5.0.2?"
    cli_run = subprocess.run([sys.executable, "-m", "commlens.cli", "validate", str(campaign_file)],
                             capture_output=True, text=True, cwd=tmp_path)
    assert cli_run.returncode == 2 and expected in cli_run.stderr, cli_run.stderr
    run = snakemake(tmp_path, "--configfile", str(campaign_file), "--dry-run", check=False)
    output = run.stdout + run.stderr
    assert run.returncode != 0 and expected in output and "MissingInputException" not in output, output[-3000:]


# --- Slurm partitions ------------------------------------------------------------------------------

@pytest.mark.slurm
def test_placements_the_slurm_partition_cannot_hold_are_refused(tmp_path, local_slurm):
    most = max(local_slurm.nodes.values())
    text = BASE.replace("  - {name: 1N2P, nodes: 1, ppn: 2}\n",
                        f"  - {{name: 2N1P, nodes: 2, ppn: 1}}\n  - {{name: 1N{most}P, nodes: 1, ppn: {most}}}\n"
                        f"  - {{name: 9N1P, nodes: 9, ppn: 1}}\n"
                        f"  - {{name: 1N{most + 1}P, nodes: 1, ppn: {most + 1}}}\n")
    campaign = load_campaign(write(tmp_path, text))
    problems = partition_problems(campaign, local_slurm.partition)
    assert [line.split(":")[0] for line in problems] == ["placements[2] 9N1P", f"placements[3] 1N{most + 1}P"]
    assert problems[0].startswith(f"placements[2] 9N1P: needs 9 nodes of 1 CPUs or more; Slurm partition "
                                  f"{local_slurm.partition} has {len(local_slurm.nodes)} (its nodes' CPUs: ")
    assert partition_problems(campaign, None) == [line.replace(f"Slurm partition {local_slurm.partition}",
                                                               "the default Slurm partition") for line in problems]
    assert partition_problems(campaign, "nosuchpartition") == ["Slurm partition nosuchpartition: sinfo lists no "
                                                               "node in it"]
    # The workflow through the Slurm profile refuses them before it submits anything.
    (tmp_path / "config").mkdir()
    campaign_file = write(tmp_path / "config", text, "c.yaml")
    run = subprocess.run([*workflow_command(tmp_path, "--profile", str(REPO / "workflow" / "profiles" / "slurm")),
                          "--configfile", str(campaign_file), "--default-resources",
                          f"slurm_partition={local_slurm.partition}"],
                         capture_output=True, text=True, env=local_slurm.env, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode != 0 and "does not fit the Slurm partition" in output, output[-3000:]
    assert problems[0] in output and problems[1] in output and "has been submitted" not in output


# --- Datasets that cannot be read ------------------------------------------------------------------

@pytest.fixture(scope="module")
def good_dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("datasets") / "good.nc"
    write_dataset(import_files([OSU / "osu_latency-z-openmpi-5.0.11-1N2P.txt"], "osu", "openmpi-5.0.11", "1N2P"),
                  path, keep_previous=False)
    return path


def bad_files(good: Path, folder: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of file a user may hand over as a dataset, with the problem its refusal names."""
    import xarray as xr

    whole = good.read_bytes()
    half, most = len(whole) // 2, len(whole) - 10
    files = {"truncated": (whole[:half], f"truncated HDF5 file: {half:,} of {len(whole):,} bytes"),
             "cut short by 10 bytes": (whole[:most], f"truncated HDF5 file: {most:,} of {len(whole):,} bytes"),
             "empty": (b"", "empty file"),
             "csv": (b"library,placement,kernel,size\nmpich,1N2P,pingpong.send,8\n", "a CSV file, not netCDF"),
             "json": (b'{"record": "run"}\n', "a JSON file, not netCDF"),
             "text": (b"hello\n", "a text file, not netCDF"),
             "zip": (b"PK\x03\x04" + bytes(60), "a zip file, not netCDF")}
    paths = {}
    for name, (content, problem) in files.items():
        path = folder / f"{name.replace(' ', '-')}.nc"
        path.write_bytes(content)
        paths[name] = (path, f"{path}: not a commlens dataset ({problem})")
    other = folder / "other.nc"
    xr.Dataset({"x": ("i", [1.0, 2.0])}).to_netcdf(other)
    paths["netCDF of something else"] = (other, f"{other}: not a commlens dataset (no commlens_version attribute)")
    # A dataset written before the rename: whole and readable, but its writer's version under the former name.
    former = folder / "former-name.nc"
    with xr.open_dataset(good) as ds:
        renamed = ds.load()
    renamed.attrs["commbench_version"] = renamed.attrs.pop("commlens_version")
    renamed.to_netcdf(former)
    broken = folder / "broken-config.nc"
    renamed.attrs["commlens_version"] = renamed.attrs.pop("commbench_version")
    renamed.assign_attrs(campaign_config="{broken").to_netcdf(broken)
    paths["campaign_config not JSON"] = (
        broken, f"{broken}: its campaign_config attribute is not the campaign as JSON (Expecting property name "
                f"enclosed in double quotes: line 1 column 2 (char 1)); recollect it")
    lacking = folder / "lacking.nc"
    renamed.drop_vars("median").to_netcdf(lacking)
    paths["a variable missing"] = (lacking, f"{lacking}: a commlens dataset without the variable median; recollect "
                                            f"it from its raw files")
    paths["written under the former name"] = (
        former, f"{former}: written before the project took the name commlens (its commbench_version attribute); "
                f"recollect it from its raw files with this version")
    return paths


def test_every_bad_dataset_is_named_with_its_problem_in_one_line(good_dataset, tmp_path):
    assert open_campaign(good_dataset).sizes["library"] == 1
    for name, (path, message) in bad_files(good_dataset, tmp_path).items():
        for opener in (open_campaign, check_dataset):
            with pytest.raises(DatasetError) as info:
                opener(path)
            assert str(info.value) == message, name
    with pytest.raises(FileNotFoundError, match="absent.nc: no such campaign dataset"):
        open_campaign(tmp_path / "absent.nc")


@pytest.mark.parametrize("verb", ["summary", "export", "compare", "report"])
def test_verbs_on_a_bad_dataset_print_one_line_and_write_nothing(good_dataset, tmp_path, capsys, verb):
    (tmp_path / "in").mkdir()
    files = bad_files(good_dataset, tmp_path / "in")
    out = tmp_path / "out"
    for name in ("truncated", "empty", "csv"):
        path, message = files[name]
        argv = {"summary": [str(path)], "export": [str(path), "--output", str(out / "table.csv")],
                "compare": [str(good_dataset), str(path)], "report": [str(path), "--output-dir", str(out)]}[verb]
        assert cli.main([verb, *argv]) == 2, name
        err = capsys.readouterr().err
        assert err.strip().splitlines() == [f"commlens {verb}: {message}"], err
        assert not out.exists(), sorted(out.rglob("*"))


# --- a validated-campaign cache edited by hand -----------------------------------------------------

def poisoned_campaign(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A campaign file validated once into a cache of its own, and the cache's entry for it."""
    monkeypatch.setenv("COMMLENS_CACHE", str(tmp_path / "cache"))
    workspace = tmp_path / "outer" / "work"     # results/../../poisoned would be outer/poisoned
    (workspace / "config").mkdir(parents=True)
    campaign_file = write(workspace / "config", BASE, "hostile.yaml")
    assert load_campaign(campaign_file).name == "hostile"
    [entry] = (tmp_path / "cache" / "validated-campaigns").glob("*.json")
    return campaign_file, entry


def vouch(entry: Path, change) -> None:
    """Rewrites a cache entry as one with its digest recomputed would be: the validated config changed by
    `change`, and a sha256 that matches it."""
    import json

    from commlens.campaign.checks import cache_entry

    validated = json.loads(entry.read_text())["validated"]
    change(validated)
    entry.write_text(json.dumps(cache_entry(entry, validated)))


def test_a_cache_entry_edited_by_hand_is_dropped_and_the_campaign_validated_afresh(tmp_path, monkeypatch, capsys):
    campaign_file, entry = poisoned_campaign(tmp_path, monkeypatch)
    # Its content changed, its digest not.
    entry.write_text(entry.read_text().replace('"campaign": "hostile"', '"campaign": "../../poisoned"'))
    assert cli.main(["validate", str(campaign_file)]) == 0
    assert capsys.readouterr().out == f"{campaign_file}: ok, campaign 'hostile', 3 launches\n"
    assert "poisoned" not in entry.read_text()      # validated afresh, and written again
    # Its content changed and its digest recomputed: the name is not the file's, and no name at all.
    for hostile in ("../../poisoned", "other"):
        vouch(entry, lambda validated, hostile=hostile: validated.update(campaign=hostile))
        assert cli.main(["validate", str(campaign_file)]) == 0
        assert capsys.readouterr().out == f"{campaign_file}: ok, campaign 'hostile', 3 launches\n"
    # Values the file leaves to the schema's defaults, changed to what a fresh validation refuses.
    fresh = load_campaign(campaign_file).config
    for change in (lambda v: v["kernels"]["pingpong.send"].update(timer="$(reboot)"),
                   lambda v: v["precision"].update(rse="0.01; reboot"),
                   lambda v: v.update(launches=10**9),
                   lambda v: v["precision"].update(max_samples=5)):     # below min_samples: 10
        vouch(entry, change)
        assert load_campaign(campaign_file).config == fresh


HOSTILE_NAMES = {   # a name that would leave results/ or split a shell word: how a campaign file gives it
    "campaign": lambda c: c.update(campaign="../../poisoned"),
    "libraries": lambda c: c.update(libraries={"../../x": c["libraries"]["mpich-5.0.2"]}),
    "libraries.x.mpi": lambda c: c["libraries"]["mpich-5.0.2"].update(mpi="../mpich"),
    "placements[0].name": lambda c: c["placements"][0].update(name="../1N2P"),
    "kernels": lambda c: c.update(kernels={"../k": c["kernels"]["pingpong.send"]}),
}


@pytest.mark.parametrize("where", HOSTILE_NAMES)
def test_a_hostile_name_vouched_for_by_a_cache_entry_is_refused(tmp_path, monkeypatch, where):
    """A campaign file with a name the schema refuses, and a cache entry (its digest recomputed) that says
    it was validated: refused as a fresh validation refuses it."""
    import yaml

    from commlens.campaign.checks import cache_path

    campaign_file, entry = poisoned_campaign(tmp_path, monkeypatch)
    config = yaml.safe_load(BASE)
    HOSTILE_NAMES[where](config)
    campaign_file.write_text(yaml.safe_dump(config))
    cached = cache_path(config)
    cached.write_text(entry.read_text())
    vouch(cached, HOSTILE_NAMES[where])
    with pytest.raises(CampaignError, match=r"hostile.yaml: invalid campaign file\n  .*'\.\./.*is not allowed"):
        load_campaign(campaign_file)


@pytest.mark.parametrize("digest", ["left", "recomputed"])
def test_the_dry_run_of_a_poisoned_cache_plans_nothing_outside_results(tmp_path, monkeypatch, digest):
    campaign_file, entry = poisoned_campaign(tmp_path, monkeypatch)
    if digest == "left":
        entry.write_text(entry.read_text().replace('"campaign": "hostile"', '"campaign": "../../poisoned"'))
    else:
        vouch(entry, lambda validated: validated.update(campaign="../../poisoned"))
    workspace = campaign_file.parents[1]
    run = snakemake(workspace, "--configfile", str(campaign_file), "--dry-run")
    planned = [line.split(":", 1)[1] for line in run.stdout.splitlines() if line.strip().startswith("output:")]
    outputs = [path.strip() for line in planned for path in line.split(",")]
    assert "results/hostile/hostile.nc" in outputs and not [p for p in outputs if ".." in p], outputs
    assert [p.name for p in (tmp_path / "outer").iterdir()] == ["work"]
