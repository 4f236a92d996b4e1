"""benchmarks/bench_defaults.py: the paper's outlier recipe, the "clearly worse" rule, and a
smoke run of its cheapest row (El Nino as a labelled DataArray)."""


import numpy as np
import pytest
from scripts import load_script


def test_paper_outliers_replace_10_percent_of_70_percent_of_the_samples():
    bench = load_script("benchmarks/bench_defaults.py")
    X = np.random.default_rng(1).random((100, 50))
    noisy = bench.paper_outliers(X)
    changed = noisy != X
    assert changed.any(axis=1).sum() == 70
    assert set(changed.sum(axis=1)) == {0, 5}  # 10% of the 50 pixels
    assert noisy.min() >= X.min() and noisy.max() <= X.max()  # clipped to the data's range


def test_clearly_worse_follows_the_metric():
    bench = load_script("benchmarks/bench_defaults.py")

    def row(metric, ours, peer):
        return bench.row("d", "L", metric, (ours, 1.0), "P", (peer, 1.0))

    assert bench.clearly_worse(row("PSNR (dB)", 18.0, 19.5))
    assert not bench.clearly_worse(row("PSNR (dB)", 18.8, 19.5))
    assert bench.clearly_worse(row("top-8 topic purity", 0.5, 1.0))
    assert bench.clearly_worse(row("rel. error held-out", 0.2, 0.1))
    assert not bench.clearly_worse(row("rel. error held-out", 0.1, 0.2))


def test_elnino_row_runs(capsys):
    pytest.importorskip("statsmodels")
    rows = load_script("benchmarks/bench_defaults.py").main(["--quick", "--only", "elnino"])
    assert len(rows) == 1 and 0 < rows[0]["ours"] < 0.2 and rows[0]["said"] == []
    assert "| elnino (DataArray year x month) | OnlineCPDL |" in capsys.readouterr().out


def test_digits_passes_diagnostic_runs(capsys):
    """The section that explains the digits row: own codes as good as NNLS codes, and the
    default weights ahead of the former ``1/t`` after 200 passes (quick data)."""
    rows = load_script("benchmarks/bench_defaults.py").main(["--quick", "--only", "digits-passes"])
    assert len(rows) == 5
    assert rows[1]["ours"] == pytest.approx(rows[0]["ours"], abs=0.05)  # same model, NNLS codes
    assert rows[3]["ours"] > rows[4]["ours"] + 0.2  # t^-0.5 against 1/t, both 200 passes
    assert "| digits, 200 passes | OnlineNMF(max_iter=200) |" in capsys.readouterr().out
