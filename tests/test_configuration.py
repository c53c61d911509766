"""What a library was set to and where its ranks ran: each launch's control variables (MPI_T cvars, the
harness's "mpi_t" record), each build's description of them (cvars.json), each host's hwloc topology (the
launcher's "topology" record), as the dataset, Methods and the findings table carry them."""

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from commlens import open_campaign
from commlens.analysis.configuration import (UNEXPLAINED, default_difference, difference, explain_findings, near,
                                             release_difference, settings, settings_where_changed, size_valued)
from commlens.analysis.bisection import BisectionStep, WatchedCell
from commlens.data.export import export
from commlens.data.merge import append_to_campaign
from commlens.io.netcdf import write_dataset
from commlens.orchestrate.bisection_steps import release_settings
from commlens.io.cvars import read_descriptions
from commlens.launch.placement import Placement
from commlens.report.methods import methods_markdown

from conftest import LIBRARIES, launch

GRID = np.array([2.0 ** k for k in range(0, 17)])        # 1 B to 64 KiB, powers of two


def switch(size, low, high) -> dict:
    return {"kind": "protocol_switch", "size": size, "size_low": low, "size_high": high}


@pytest.mark.parametrize("limit", [4096, 16384])
def test_a_switch_is_matched_to_the_eager_limit_that_lies_there_and_no_other(limit):
    """Open MPI's shared-memory eager limit at two places: the switch found between the sizes either side
    of it names that limit, not the transport's other size-valued settings elsewhere, nor a count."""
    settings = {"btl_sm_eager_limit": str(limit), "btl_sm_max_send_size": "32768" if limit == 4096 else "2048",
                "btl_sm_fbox_max": "32",
                "pml_ob1_priority": "20", "btl_sm_fbox_size": "4096" if limit != 4096 else "65536"}
    candidates = size_valued(settings, 1, 65536)
    assert "pml_ob1_priority" not in candidates and "btl_sm_fbox_max" not in candidates
    found = switch(limit * 2, limit, limit * 2)          # the curve steps between the limit and the next size
    matched = [cvar for cvar, value in candidates.items() if near(value, found, GRID)]
    assert matched == ["btl_sm_eager_limit"], matched
    elsewhere = switch(limit * 8, limit * 4, limit * 8)   # two steps of the grid away: not this setting
    assert "btl_sm_eager_limit" not in [cvar for cvar, value in candidates.items() if near(value, elsewhere, GRID)]


def test_a_moved_limit_is_said_to_lie_where_a_comparison_found_a_change():
    """An eager limit raised from 4 KiB to 16 KiB sends 8 KiB and 16 KiB messages another way: a change
    found from 8 KiB to 16 KiB is where it lies, a change at 1 MiB is not; a limit that moved elsewhere
    and a priority (no size) are never said to."""
    before = {"btl_sm_eager_limit": "4096", "btl_sm_max_send_size": "32768", "pml_ob1_priority": "20"}
    after = {"btl_sm_eager_limit": "16384", "btl_sm_max_send_size": "65536", "pml_ob1_priority": "40"}
    table = default_difference(before, after, {})
    near_it = pd.DataFrame([{"kernel": "pingpong.send", "placement": "1N2P", "size_from": 8192, "size_to": 16384}])
    lines = settings_where_changed(table, near_it)
    assert lines == ["btl_sm_eager_limit (4096 -> 16384) lies where a change was found: pingpong.send 1N2P 8 KiB "
                     "to 16 KiB"], lines
    far = pd.DataFrame([{"kernel": "pingpong.send", "placement": "1N2P", "size_from": 2 ** 20, "size_to": 2 ** 21}])
    assert settings_where_changed(table, far) == [
        "None of the 2 size-valued settings that differ lies where a change was found"]
    assert settings_where_changed(table[table["cvar"] == "pml_ob1_priority"], near_it) == []


def test_a_release_difference_names_the_defaults_that_changed(tmp_path):
    """Two builds' own descriptions: the cvars whose default differs, appeared or disappeared, with the
    newer description; a build that described none gives an empty table that says why."""
    def described(name, cvars):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"record": "mpi_t_cvars", "status": "ok", "count": len(cvars), "cvars": [
            {"name": cvar, "datatype": "int", "scope": "all", "description": f"{cvar} in {name}", "value": value}
            for cvar, value in cvars.items()]}))
        return {"status": "ok", "cvars": {"status": "ok", "path": str(path), "count": len(cvars)}}

    before = described("old", {"MPIR_CVAR_CH4_EAGER_MAX": 16384, "MPIR_CVAR_GONE": 1, "MPIR_CVAR_SAME": 2})
    after = described("new", {"MPIR_CVAR_CH4_EAGER_MAX": 65536, "MPIR_CVAR_NEW": 0, "MPIR_CVAR_SAME": 2})
    table = release_difference(before, after)
    rows = {row.cvar: (row.change, row.baseline, row.candidate) for row in table.itertuples()}
    assert rows == {"MPIR_CVAR_CH4_EAGER_MAX": ("changed", "16384", "65536"), "MPIR_CVAR_NEW": ("appeared", "", "0"),
                    "MPIR_CVAR_GONE": ("disappeared", "1", "")}, rows
    described = table.loc[table["cvar"] == "MPIR_CVAR_CH4_EAGER_MAX", "description"].item()
    assert described == "MPIR_CVAR_CH4_EAGER_MAX in new"
    none = release_difference(before, {"status": "ok", "cvars": {"status": "unsupported", "reason": "no MPI_T"}})
    assert none.empty and "after: no MPI_T" in none.attrs["reason"]


@pytest.mark.mpi
def test_each_launch_records_its_librarys_settings_and_the_build_their_defaults(workspace, built, tmp_path):
    """A real launch of each library records every control variable it ran with; a variable a row's
    environment sets reads back as set (Open MPI's shared-memory eager limit, MPICH's short-broadcast limit),
    and the build's
    description holds its default."""
    settings = {"mpich-5.0.2": ("MPIR_CVAR_BCAST_SHORT_MSG_SIZE", "MPIR_CVAR_", "32768"),
                "openmpi-5.0.11": ("btl_sm_eager_limit", "OMPI_MCA_", "32768")}
    for library in LIBRARIES:
        cvar, prefix, value = settings[library]
        variable = cvar if prefix == "MPIR_CVAR_" else prefix + cvar
        result = launch(workspace, library, Placement("1N2P", 1, 2), ["pingpong.send", "-m", "8:64"], tmp_path,
                        library_env={variable: value})
        assert result.status == "ok", result.launch
        assert result.mpi_t["status"] == "ok" and len(result.mpi_t["cvars"]) > 100, result.mpi_t.get("reason")
        assert str(result.mpi_t["cvars"].get(cvar)) == value, (library, result.mpi_t["cvars"].get(cvar))
        assert result.topology["status"] == "ok" and result.topology["machines"][0]["xml_gz_base64"]
        build = json.loads((workspace / "build" / "kernels" / library / "build.json").read_text())
        described = read_descriptions(build["cvars"]["path"])
        assert described.status == "ok" and cvar in described.cvars, (library, build["cvars"])
        assert str(described.cvars[cvar].default) != value      # the build's run set nothing


@pytest.mark.mpi
def test_the_dataset_and_methods_say_what_each_row_was_set_to_and_where_ranks_ran(tiny, tmp_path):
    """The tiny campaign: each row's control variables as a table, Open MPI's shared-memory eager limit at
    its build's default; every placement's ranks said in hwloc's terms in Methods; two rows' settings
    differ by family (every variable appears on one side only, none changed)."""
    ds = open_campaign(tiny / "tiny.nc")
    table = ds.commlens.configuration()
    for library in LIBRARIES:
        rows = table[table["library"] == library]
        assert len(rows) > 100 and (rows["status"] == "read").mean() > 0.9, library
    # On one node at its build's default; off-node Open MPI opens no shared-memory transport, so its row's
    # launches differ by placement and the variable reads per placement.
    eager = table[(table["library"] == "openmpi-5.0.11") & (table["cvar"] == "btl_sm_eager_limit")].iloc[0]
    assert settings(ds, "openmpi-5.0.11", "1N2P")["btl_sm_eager_limit"] == eager["default"]
    assert int(eager["default"]) > 0
    text = methods_markdown(ds)
    for placement in ("1N2P", "2N1P"):
        item = next(line for line in text.splitlines() if line.lstrip("- ").startswith(f"{placement}:"))
        where = item.split("where the ranks ran (hwloc): ", 1)[1]
        assert where.startswith("ranks 0 and 1: ") and "not recorded" not in where, item
    ranks = ds.commlens.topology()
    assert set(ranks["placement"]) == {"1N2P", "2N1P"} and (ranks["cores"] != "").all()
    changed = difference(ds, "mpich-5.0.2", "openmpi-5.0.11")
    assert len(changed) > 100 and set(changed["change"]) == {"appeared", "disappeared"}
    # The report's comparison of the two rows says so, rather than list some 1,200 variables.
    assert ("Settings: mpich-5.0.2 and openmpi-5.0.11 are libraries of different families: their control "
            "variables are not compared.") in (tiny / "report.html").read_text()
    # An export carries each row's settings in the file's own metadata, where any Parquet reader finds them.
    written = export(ds, "parquet", tmp_path / "points.parquet")
    carried = json.loads(pq.read_schema(written).metadata[b"configuration"])
    assert carried["openmpi-5.0.11"]["mpi_t_status"] == "ok"
    assert carried["openmpi-5.0.11"]["cvars"]["btl_sm_eager_limit"]["by_placement"]["1N2P"] == eager["default"]


@pytest.mark.mpi
def test_findings_say_which_recorded_setting_lies_there_or_that_none_does(tiny):
    """Every switch, regime change or packet step of the tiny campaign's findings is said with a recorded
    size-valued setting of its row near it, or as explained by none; other kinds are left alone."""
    ds = open_campaign(tiny / "tiny.nc")
    findings = ds.commlens.anomalies()
    planted = pd.DataFrame([{"library": "openmpi-5.0.11", "placement": "1N2P", "kernel": "pingpong.send",
                             "kind": "protocol_switch", "size": 65536.0, "size_low": 1024.0, "size_high": 65536.0},
                            {"library": "openmpi-5.0.11", "placement": "1N2P", "kernel": "pingpong.send",
                             "kind": "spike", "size": 8.0}])
    explained = explain_findings(ds, pd.concat([findings, planted], ignore_index=True))
    kinds = explained["kind"].isin(("protocol_switch", "regime_change", "packet_steps"))
    assert (explained.loc[kinds, "explanation"] != "").all() and (explained.loc[~kinds, "explanation"] == "").all()
    said = explained.iloc[-2]["explanation"]
    assert said == UNEXPLAINED or (said.startswith("at 64 KiB: ") and "btl_sm_eager_limit" in said), said


@pytest.mark.mpi
def test_a_bisection_says_which_defaults_differ_between_the_releases_it_ends_between(tiny, tmp_path):
    """The releases a bisection ends between as its steps' datasets hold them: a later Open MPI whose build
    defaults to a 16 KiB shared-memory eager limit, the change watched at 8 KiB; the record keeps what it
    said, and reads back with it."""
    ds = open_campaign(tiny / "tiny.nc").sel(library=["openmpi-5.0.11"])
    later = ds.copy(deep=True)
    later["cvar_default"].loc[{"library": "openmpi-5.0.11", "cvar": "btl_sm_eager_limit"}] = "16384"
    write_dataset(append_to_campaign(ds, later, library="openmpi-5.0.12"), tmp_path / "step.nc")
    step = replace(BisectionStep(step=1, release="openmpi-5.0.12", version="5.0.12", campaign="", launches=1,
                                 cells=()), dataset=str(tmp_path / "step.nc"))
    watched = [WatchedCell("pingpong.send", "1N2P", 8192)]
    said = release_settings([step], "openmpi-5.0.11", "openmpi-5.0.12", watched)
    assert said[0].startswith("Control variables whose defaults differ between openmpi-5.0.11 and openmpi-5.0.12 "
                              "(1): btl_sm_eager_limit: 4096 -> 16384: Maximum size"), said
    assert said[1:] == ("btl_sm_eager_limit (4096 -> 16384) lies where a change was found: pingpong.send 1N2P 8 KiB",)
    assert release_settings([step], "openmpi-5.0.11", None, watched) == ()
