"""commlens bisect: the halving search on recorded outcomes, what counts as a release having the
change, which releases a family's specs offer, and one real step through the workflow."""

import json
import math

import pytest

from commlens.analysis.bisection import (CHANGED, FAILED, UNCHANGED, UNDECIDED, FailedBisection, cell_outcome,
                                          conclude, next_release, read_bisections, release_outcome,
                                          write_bisections)
from commlens.cli import main
from commlens.launch.libraries import family_releases, spec_release


def search(truth: list[str]) -> tuple[list[int], object]:
    """Runs the search against recorded outcomes (truth[i]: what measuring release i gives); the
    releases measured, in order, and the conclusion."""
    outcomes, measured = [None] * len(truth), []
    while (index := next_release(outcomes)) is not None:
        assert index not in measured, f"release {index} measured twice"
        measured.append(index)
        outcomes[index] = truth[index]
    return measured, conclude(outcomes)


@pytest.mark.parametrize("first", range(1, 9))
def test_halving_finds_the_first_changed_release_in_logarithmic_steps(first):
    truth = [UNCHANGED] * first + [CHANGED] * (9 - first)      # 9 releases: baseline, 7 between, candidate
    measured, found = search(truth)
    assert measured[0] == 8                                    # the candidate first: is there a change at all
    assert found.confirmed and found.first == first and found.suspects == (first,)
    assert found.last_without == first - 1
    assert len(measured) <= 1 + math.ceil(math.log2(8))       # 7 between: at most 3 halvings after the candidate


def test_the_first_step_probes_the_middle_of_the_range():
    assert next_release([None, None, None, None, None, CHANGED]) == 2     # (0 + 5) / 2, the lower on a tie
    assert next_release([None, None, None, UNCHANGED, None, CHANGED]) == 4


def test_a_failed_or_undecided_release_is_stepped_over_and_the_search_goes_on():
    # Release 3, the middle, cannot be built: the search measures its neighbour instead and still pins 5.
    measured, found = search([UNCHANGED, UNCHANGED, UNCHANGED, FAILED, UNCHANGED, CHANGED, CHANGED, CHANGED])
    assert measured == [7, 3, 4, 5]
    assert found.first == 5 and found.suspects == (5,) and found.last_without == 4
    # The change came with a release that could not be told: both it and the next are named, neither as first.
    _, found = search([UNCHANGED, UNCHANGED, UNCHANGED, UNDECIDED, CHANGED])
    assert found.confirmed and found.first is None and found.suspects == (3, 4) and found.last_without == 2


def test_a_candidate_without_the_change_ends_the_search_at_once():
    for candidate in (UNCHANGED, UNDECIDED, FAILED):
        measured, found = search([UNCHANGED, CHANGED, CHANGED, candidate])
        assert measured == [3] and not found.confirmed and found.first is None


def test_a_range_without_releases_between_confirms_the_candidate_only():
    measured, found = search([UNCHANGED, CHANGED])
    assert measured == [1] and found.first == 1


def test_outcomes_are_checked():
    with pytest.raises(ValueError, match="baseline and a candidate"):
        next_release([None])
    with pytest.raises(ValueError, match="unknown outcome.*allowed: changed"):
        next_release([None, "regressed"])


def test_a_release_has_the_change_when_its_interval_lies_past_the_midpoint_of_the_candidates():
    # The candidate is 5 times slower: the line is sqrt(5) = 2.24.
    assert cell_outcome("regressed", 4.6, 5.4, 5.0) == CHANGED
    assert cell_outcome("regressed", 1.08, 1.2, 5.0) == UNCHANGED       # a 15% wobble is not the change
    assert cell_outcome("unchanged", 0.97, 1.03, 5.0) == UNCHANGED
    assert cell_outcome("inconclusive", 1.5, 3.0, 5.0) == UNDECIDED     # straddles the line
    assert cell_outcome("inconclusive", 2.5, 9.0, 5.0) == UNDECIDED     # past it, but compare did not call it
    assert cell_outcome("missing", float("nan"), float("nan"), 5.0) == UNDECIDED
    # An improvement (the candidate twice as fast) mirrors it.
    assert cell_outcome("improved", 0.45, 0.55, 0.5) == CHANGED
    assert cell_outcome("regressed", 1.02, 1.1, 0.5) == UNCHANGED
    with pytest.raises(ValueError, match="positive change"):
        cell_outcome("regressed", 1, 2, 1.0)


def test_a_release_changed_only_where_all_its_watched_cells_agree():
    assert release_outcome([CHANGED, CHANGED]) == CHANGED
    assert release_outcome([UNCHANGED]) == UNCHANGED
    assert release_outcome([CHANGED, UNCHANGED]) == UNDECIDED
    assert release_outcome([]) == UNDECIDED


def test_a_record_reads_back_as_it_was_written_older_records_too(tmp_path):
    """bisect.json and a campaign's bisections.json read back through one reader, the report's: a record
    from before steps could grow (no max_launches, no step launches) and the error form, unchanged."""
    from conftest import REPO

    recorded = json.loads((REPO / "tests" / "data" / "bisect" / "mpich-4.3.2-to-mpich-5.0.2.json").read_text())
    failed = {"baseline": "openmpi-4.1.8", "candidate": "openmpi-5.0.11", "error": "no spec"}
    write_bisections(tmp_path / "bisections.json", read_bisections(json.dumps([recorded, failed])))
    record, error = read_bisections((tmp_path / "bisections.json").read_text())
    assert [record.to_json(), error.to_json()] == [recorded, failed]
    assert isinstance(error, FailedBisection) and record.conclusion.suspects == ("mpich-5.0.0", "mpich-5.0.1",
                                                                                  "mpich-5.0.2")
    assert record.max_launches is None and record.steps[1].cells[0].reference_ratio == pytest.approx(3.31, abs=0.01)


# ----------------------------------------------------------------------------- the family's releases

def write_spec(directory, name, text):
    path = directory / "envs" / "mpi" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_specs_family_and_version_are_read_without_installing(tmp_path):
    assert spec_release(write_spec(tmp_path, "a", "pip: mpich==4.3.2\n")) == ("mpich", "4.3.2")
    assert spec_release(write_spec(tmp_path, "b", "module: openmpi/4.1.6\n")) == ("openmpi", "4.1.6")
    assert spec_release(write_spec(tmp_path, "mpich-4.2.9", "prefix: /opt/m\nfamily: mpich\n")) == ("mpich", "4.2.9")
    assert spec_release(write_spec(tmp_path, "site", "prefix: /opt/m\nfamily: mpich\n")) == ("mpich", None)


def test_the_releases_between_are_the_familys_specs_in_version_order(tmp_path):
    # The repository's specs, and one of the working directory's own (a site release between).
    write_spec(tmp_path, "mpich-5.0.0.9", "prefix: /opt/mpich-5.0.0.9\nfamily: mpich\n")
    releases, left_out = family_releases("mpich-4.3.2", "mpich-5.0.2", tmp_path)
    assert [r["name"] for r in releases] == ["mpich-4.3.2", "mpich-5.0.0", "mpich-5.0.0.9", "mpich-5.0.1",
                                             "mpich-5.0.2"]
    assert any(line.startswith("debian-mpich") for line in left_out)     # a prefix: its version is unknown
    # Newest first where the baseline is the newer release (an improvement looked for backwards).
    releases, _ = family_releases("mpich-5.0.1", "mpich-4.3.2", tmp_path)
    assert [r["name"] for r in releases] == ["mpich-5.0.1", "mpich-5.0.0.9", "mpich-5.0.0", "mpich-4.3.2"]


def test_bisect_refuses_what_it_cannot_bisect(tmp_path, capsys):
    base = ["bisect", "--directory", str(tmp_path), "--kernel", "pingpong.send", "--placement", "1N2P",
            "--sizes", "8"]
    assert main([*base[:1], "mpich-4.3.2", "openmpi-5.0.11", *base[1:]]) == 2
    assert "mpich-4.3.2 is mpich and openmpi-5.0.11 is openmpi" in capsys.readouterr().err
    assert main([*base[:1], "mpich-4.3.2", "mpich-4.3.9", *base[1:]]) == 2
    assert "candidate mpich-4.3.9: no spec envs/mpi/mpich-4.3.9.yaml" in capsys.readouterr().err
    assert main(["bisect", "mpich-4.3.2", "mpich-5.0.2", "--directory", str(tmp_path)]) == 2
    assert "give the cells to watch" in capsys.readouterr().err


# ----------------------------------------------------------------------------- one real step

@pytest.mark.mpi
def test_a_candidate_that_cannot_be_built_is_reported_from_a_real_step(workspace, built, tmp_path, capsys):
    """The candidate's step runs through the workflow: the baseline is launched, the candidate's
    environment fails (its prefix does not exist), and bisect says so instead of bisecting."""
    from conftest import LIBRARIES

    write_spec(tmp_path, "mpich-5.0.3", "prefix: /nonexistent/mpich-5.0.3\nfamily: mpich\n")
    snakemake = f"--config build_dir={workspace / 'build'} strict_build={','.join(LIBRARIES)}"
    code = main(["bisect", "mpich-5.0.2", "mpich-5.0.3", "--kernel", "pingpong.send", "--placement", "1N2P",
                 "--sizes", "8", "--launches", "1", "--directory", str(tmp_path), "--snakemake", snakemake,
                 "--json"])
    out = capsys.readouterr()
    record = json.loads(out.out)
    assert code == 1
    assert [s["release"] for s in record["steps"]] == ["mpich-5.0.3"]
    step = record["steps"][0]
    assert step["outcome"] == FAILED and step["reason"].startswith("env_failed")
    assert "/nonexistent/mpich-5.0.3" in step["reason"]
    assert record["summary"].startswith("mpich-5.0.3 could not be measured")
    assert not record["conclusion"]["confirmed"]
    assert "[bisect] step 1: mpich-5.0.3: failed" in out.err
    assert json.loads((tmp_path / "bisect" / "mpich-5.0.2-to-mpich-5.0.3" / "bisect.json").read_text()) == record


@pytest.mark.mpi
def test_an_undecided_step_is_measured_again_with_more_launches_paired_by_round(workspace, built, tmp_path,
                                                                                capsys):
    """A candidate that is the baseline's own library under another name shows no change: its step is
    undecided at 1 launch a side, measured again at 2 (the budget here), its first launches kept, the rows
    compared paired by round, and then bisect says there is nothing to bisect."""
    from conftest import LIBRARIES

    prefix = workspace / "build" / "envs" / "mpich-5.0.2" / "venv"
    write_spec(tmp_path, "mpich-5.0.3", f"prefix: {prefix}\nfamily: mpich\n")
    snakemake = f"--config build_dir={workspace / 'build'} strict_build={','.join(LIBRARIES)}"
    code = main(["bisect", "mpich-5.0.2", "mpich-5.0.3", "--kernel", "pingpong.send", "--placement", "1N2P",
                 "--sizes", "8,64", "--launches", "1", "--max-launches", "2", "--directory", str(tmp_path),
                 "--snakemake", snakemake, "--json"])
    out = capsys.readouterr()
    record = json.loads(out.out)
    assert code == 1 and record["max_launches"] == 2
    [step] = record["steps"]
    assert step["launches"] == 2 and step["outcome"] == UNDECIDED
    assert "[bisect] step 1: mpich-5.0.3: undecided at 1 launches a side; measuring again with 2" in out.err
    assert "paired t test by round" in step["method"]
    assert record["summary"].startswith("mpich-5.0.3 shows no change against mpich-5.0.2")
    raw = tmp_path / "results" / "bisect-mpich-5.0.3-vs-mpich-5.0.2" / "raw" / "mpich-5.0.2" / "1N2P"
    first, second = (json.loads((raw / "pingpong.send" / f"launch{i}.jsonl").read_text().splitlines()[0])
                     for i in (0, 1))
    assert first["started"] < second["started"]       # the first launch kept, the second added after it


# ----------------------------------------------------------------------------- options checked as they are read

@pytest.mark.parametrize("option, value, problem", [
    ("--min-effect", "nan", "must be a number between 0 and 1 (exclusive): the smallest relative change, 0.05 for 5%"),
    ("--min-effect", "inf", "must be a number between 0 and 1 (exclusive): the smallest relative change, 0.05 for 5%"),
    ("--min-effect", "0", "must be a number between 0 and 1 (exclusive): the smallest relative change, 0.05 for 5%"),
    ("--min-effect", "1", "must be a number between 0 and 1 (exclusive): the smallest relative change, 0.05 for 5%"),
    ("--min-effect", "5%", "must be a number between 0 and 1 (exclusive): the smallest relative change, 0.05 for 5%"),
    ("--confidence", "7", "must be a number between 0 and 1 (exclusive): the intervals' level, 0.95 for 95%"),
    ("--confidence", "1", "must be a number between 0 and 1 (exclusive): the intervals' level, 0.95 for 95%"),
    ("--confidence", "-0.5", "must be a number between 0 and 1 (exclusive): the intervals' level, 0.95 for 95%"),
    ("--confidence", "nan", "must be a number between 0 and 1 (exclusive): the intervals' level, 0.95 for 95%"),
    ("--launches", "0", "must be a whole number from 1 to 1000"),
    ("--launches", "2.5", "must be a whole number from 1 to 1000"),
    ("--launches", "1001", "must be a whole number from 1 to 1000"),
])
def test_a_bad_number_is_refused_in_one_line_before_any_work(tmp_path, monkeypatch, capsys, option, value, problem):
    """Checked as the command line is read: nothing is built, no folder made (an MPI library's build, the
    first step's, is minutes of pip install)."""
    import commlens.orchestrate.bisection_steps

    monkeypatch.setattr(commlens.orchestrate.bisection_steps, "run_step",
                        lambda *args: pytest.fail("a step was started"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(["bisect", "mpich-4.3.2", "mpich-5.0.2", "--kernel", "pingpong.send", "--placement", "1N2P",
              "--sizes", "8", option, value])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines() == [f"commlens bisect: {option} {value}: {problem}"]
    assert list(tmp_path.iterdir()) == []
