"""The gallery's selection example on labelled climate-like data (examples/select_climate.py):
the rule finds the planted grouping and rank, and the chosen model's factors are labelled."""


import pytest
from scripts import load_script


def test_the_climate_example_chooses_free_maps_at_the_planted_rank(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    example = load_script("examples/select_climate.py")
    out = example.main(["--days", "30", "--out", str(tmp_path)])
    assert out["chosen"]["grouping"] == "lat,lon;variable"
    assert out["chosen"]["n_components"] == 3
    factors = out["model"].factors_
    assert set(factors["variable"].values) == {"t2m", "rh", "wind", "precip"}
    assert factors["lat_lon_loadings"].dims[:2] == ("lat", "lon")
    printed = capsys.readouterr().out
    assert printed.count("component ") == 3 and "map peak at lat" in printed
    assert (tmp_path / "select_climate.png").stat().st_size > 0
