"""The `tensorstream` command: the demo runs end to end and errors are one clear line."""

import pytest

from tensorstream.cli import main
from tensorstream.demo import match_atoms, planted_patterns, run_demo


def test_demo_recovers_the_planted_atoms_and_writes_the_figure(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["demo", "--out", str(tmp_path), "--steps", "60"]) == 0
    output = capsys.readouterr().out
    assert "held-out rel. error" in output
    assert (tmp_path / "atoms.png").stat().st_size > 1000


def test_demo_error_decreases_and_atoms_match():
    rows = run_demo(n_steps=50, plot=False)["table"]
    assert rows[-1]["error"] < rows[0]["error"]
    assert rows[-1]["recovery"] > 0.95


def test_match_atoms_is_a_permutation():
    planted = planted_patterns()
    shuffled = [U[:, [2, 0, 3, 1]] for U in planted]
    score, partners = match_atoms(shuffled, planted)
    assert score == pytest.approx(1.0)
    assert list(partners) == [1, 3, 0, 2]


def test_bad_arguments_give_one_line_errors(capsys):
    assert main(["demo", "--steps", "0", "--no-plot"]) == 1
    assert "error: --steps" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["no-such-command"])
