"""``benchmarks/bench_robust.py --scale``: the online robust learners against our PCP on N
patches, each learner's time as a fraction of PCP's (the time goal of issue #31), and the
options' refusals. A small N keeps it short."""

import re

import numpy as np
import pytest
from scripts import load_script

BENCH = load_script("benchmarks/bench_robust.py")


def test_scale_rows_time_every_online_robust_learner_against_pcp(capsys):
    rows = BENCH.scale_rows([120], ["spikes"], side=6)
    assert len(rows) == 1
    row = rows[0]
    assert row["data"] == "patches 120 (6 x 6)" and row["class"] == "spikes"
    for name in BENCH.SCALE_COLUMNS:
        value, seconds = row[name]
        assert seconds > 0 and value > row["input"][0]  # spikes: every method beats the input
    BENCH.scale_ratios(rows)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    pcp_seconds = row["PCP (ours)"][1]
    for name in BENCH.ONLINE_ROBUST:
        printed = float(re.search(rf"{name} ([0-9.]+) \(", line).group(1))
        assert printed == pytest.approx(row[name][1] / pcp_seconds, abs=1e-3)


@pytest.mark.parametrize("argv, message", [
    (["--scale", "0"], "positive numbers of patches"),
    (["--scale", "100", "--patch-size", "2"], "4 to 64 pixels"),
    (["--scale", "100", "--small"], "not allowed with"),
    (["--kinds", "nothing"], "invalid choice"),
    (["--video", "--frames", "1"], "2 frames or more"),
    (["--scale", "100", "--frames", "240"], "--scale runs no video"),
])
def test_bad_options_are_refused_by_name(capsys, argv, message):
    with pytest.raises(SystemExit):
        BENCH.main(argv)
    assert message in capsys.readouterr().err


def test_a_longer_video_shows_the_same_object_slower():
    short, long = BENCH.video(20), BENCH.video(40)
    for clean, corrupted, truth in (short, long):
        assert truth.any(axis=1).all()  # the object is in every frame
        assert not (truth & (corrupted == clean)).any()  # and only where it changed a pixel
    # the same path, once: it starts at the same place and ends at the right edge in both
    assert np.array_equal(short[2][0], long[2][0])
    for _, _, truth in (short, long):
        columns = np.flatnonzero(truth[-1].reshape(64, 64).any(axis=0))
        assert columns.max() == 63


def test_the_occluder_hides_a_block_with_values_inside_the_range():
    clean = BENCH.faces(6)
    corrupted = BENCH.corrupt(clean, "occluder", "weak", (25, 25))
    changed = corrupted != clean
    assert changed[::2].any(axis=1).all() and not changed[1::2].any()  # every other sample
    side = int(round(np.sqrt(0.07 * 625)))
    for image, hit in zip(corrupted[::2], changed[::2]):
        assert side * side - 5 <= hit.sum() <= side * side  # one square (a few equal pixels)
        assert 0 < image[hit].min() and image[hit].max() < 1  # no sample's extreme
        assert np.unique(image[hit]).size > side  # a texture, not a flat block
