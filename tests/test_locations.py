"""A dataset path relative to the checkout opens from wherever a notebook's kernel starts."""

import pytest

from commlens.data import synthetic as syn
from commlens import open_campaign


def _write(path):
    ds = syn.campaign_dataset({("lib", "1N2P", "pingpong.send"): syn.generate(
        [8, 64], syn.GroundTruth(1e-6, 1e9), n_samples=5, n_launches=1)})
    ds.attrs.update(commlens_version="test", campaign="loc")
    path.parent.mkdir(parents=True)
    ds.to_netcdf(path)


def test_a_notebook_folder_finds_the_checkouts_results(tmp_path, monkeypatch):
    (tmp_path / "workflow").mkdir()
    (tmp_path / "workflow" / "Snakefile").write_text("")
    (tmp_path / "notebooks").mkdir()
    _write(tmp_path / "results" / "loc" / "loc.nc")
    monkeypatch.chdir(tmp_path / "notebooks")          # where JupyterLab starts the kernel
    assert open_campaign("results/loc/loc.nc").attrs["campaign"] == "loc"
    assert open_campaign("results/loc").attrs["campaign"] == "loc"


def test_results_kept_elsewhere_are_found_through_the_environment(tmp_path, monkeypatch):
    _write(tmp_path / "elsewhere" / "loc" / "loc.nc")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COMMLENS_RESULTS", str(tmp_path / "elsewhere"))
    assert open_campaign("results/loc/loc.nc").attrs["campaign"] == "loc"
    with pytest.raises(FileNotFoundError, match="tried results/none/none.nc, .*elsewhere/none/none.nc"):
        open_campaign("results/none/none.nc")
