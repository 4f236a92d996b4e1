"""Smoke runs of benchmarks/bench_svrmf.py and examples/svrmf_curves.py on tiny data."""

import csv
import math

import pytest
from scripts import load_script

pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")



def test_benchmark_quick_run_writes_sane_curves(tmp_path, capsys):
    bench = load_script("benchmarks/bench_svrmf.py", "bench_svrmf")
    out = tmp_path / "curves.csv"
    results = bench.main(["--quick", "--n-samples", "200", "--passes", "1", "--no-memory",
                          "--out", str(out)])
    printed = capsys.readouterr().out
    assert "| odl-digits | VR (paper) |" in printed and "µs / sample" in printed
    assert [r.setup.name for r in results] == ["odl-digits", "orpca-synth", "onmf-digits"]
    rows = list(csv.DictReader(out.open()))
    methods = {(row["setup"], row["method"]) for row in rows}
    assert len(methods) == 12  # 3 setups x (VR paper, VR mb~n, SGD, SMM)
    for row in rows:
        assert math.isfinite(float(row["f"])) and float(row["seconds"]) >= 0
        assert 0 <= float(row["passes_read"]) <= float(row["solves"]) + 1e-12
    for result in results:
        recorded = [r["f"] for rows in result.curves.values() for r in rows]
        assert result.f_ref == pytest.approx(min(min(recorded), result.f_long) - 1e-5)
        assert set(result.best) == {"VR (paper)", "VR (mb~n)", "SGD", "SMM"}
    evs = [float(row["ev"]) for row in rows if row["setup"] == "orpca-synth"]
    assert all(0 <= ev <= 1 + 1e-12 for ev in evs)


def test_benchmark_grid_and_reached():
    bench = load_script("benchmarks/bench_svrmf.py", "bench_svrmf")
    setup = bench.odl_digits(n_samples=100)
    grid = bench.method_grid(setup)
    assert [label for label, _, _ in grid].count("VR (paper)") == len(setup.vr_steps)
    b = round(0.2 * 100 ** (2 / 3))
    assert all(params.get("epoch_length") == round(100 / b)
               for label, _, params in grid if label == "VR (mb~n)")
    rows = [{"f": 3.0}, {"f": 1.0}, {"f": 0.5}]
    assert bench.reached(rows, 1.0) is rows[1] and bench.reached(rows, 0.1) is None


def test_example_writes_figures(tmp_path):
    example = load_script("examples/svrmf_curves.py", "svrmf_curves")
    paths = example.main(["--n-samples", "200", "--passes", "1", "--long-factor", "1",
                          "--out", str(tmp_path)])
    assert [p.name for p in paths] == ["svrmf_odl-digits.png", "svrmf_orpca-synth.png"]
    assert all(p.exists() and p.stat().st_size > 10_000 for p in paths)
