import pytest

from commlens.units import parse_size


@pytest.mark.parametrize("text, expected", [
    (0, 0), (4096, 4096), ("8", 8), ("1k", 1024), ("1K", 1024), ("64Ki", 65536), ("4Mi", 4194304),
    ("2M", 2 * 2**20), ("1Gi", 2**30), ("1G", 2**30),
])
def test_sizes_in_bytes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["4MB", "-1", "", "1.5k", True, -3, "Mi"])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError):
        parse_size(bad)
