"""Checkpoints: resume equals an uninterrupted run (numpy/torch, labelled/plain), the mode layout
survives (datetimes, MultiIndexes, non-dimension coords), kills and corrupt files are handled."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pytest
import tensorly as tl
import xarray as xr

from tensorstream import OnlineCPDL, load
from tensorstream.io import read_checkpoint

MODES = [("station", "hour"), "variable"]


def _labelled(rng, n_time=60):
    """time x station (MultiIndex) x hour (datetimes) x variable, with extra coords."""
    data = rng.random((n_time, 3, 4, 2))
    return xr.DataArray(
        data, dims=("time", "station", "hour", "variable"), name="obs",
        coords={"time": pd.date_range("2000-01-01", periods=n_time, freq="D"),
                "station": pd.MultiIndex.from_arrays([["b", "a", "b"], [3, 1, 2]],
                                                     names=("network", "id")),
                "hour": pd.date_range("2000-01-01", periods=4, freq="6h"),
                "variable": np.array(["t2m", "tp"], dtype=object),
                "height": ("variable", [2.0, 0.0], {"units": "m"}),
                "source": "synthetic"},
        attrs={"units": "K", "count": np.int64(3), "levels": np.arange(3)})


def _batches(labelled, backend, n_batches=12):
    rng = np.random.default_rng(0)
    if labelled:
        da = _labelled(rng, n_time=5 * n_batches)
        return [da.isel(time=slice(5 * k, 5 * k + 5)) for k in range(n_batches)]
    return [rng.random((5, 6, 4)) for _ in range(n_batches)]


def _feed(model, batches, labelled):
    for k, X in enumerate(batches):
        model.partial_fit(X, **({"sample_dim": "time", "modes": MODES}
                                if labelled and k == 0 and "layout_" not in model.__dict__
                                else {}))
    return model


@pytest.mark.parametrize("labelled", [False, True], ids=["plain", "labelled"])
def test_resume_equals_uninterrupted_run(backend, labelled, tmp_path):
    batches = _batches(labelled, backend)
    params = dict(alpha=0.05, weights=0.7, search_radius=1.0, random_state=0, backend=backend)
    straight = _feed(OnlineCPDL(3, **params), batches, labelled)
    interrupted = _feed(OnlineCPDL(3, **params), batches[:5], labelled)
    path = interrupted.save(tmp_path / "run.npz")
    del interrupted  # "killed"
    resumed = load(path)
    assert resumed.n_steps_ == 5 and resumed.backend_ == backend
    assert ("layout_" in resumed.__dict__) == labelled
    _feed(resumed, batches[5:], labelled)
    for a, b in zip(straight.loadings_, resumed.loadings_):
        np.testing.assert_array_equal(tl.to_numpy(a), tl.to_numpy(b))
    np.testing.assert_array_equal(tl.to_numpy(straight.statistics_["B"]),
                                  tl.to_numpy(resumed.statistics_["B"]))
    assert straight.statistics_["c"] == resumed.statistics_["c"]
    assert straight.factors_.identical(resumed.factors_)
    if labelled:
        codes = resumed.transform(batches[0])
        assert codes.dims == ("time", "component")
        np.testing.assert_array_equal(codes["time"].values, batches[0]["time"].values)


def test_layout_round_trips_every_kind_of_coordinate(tmp_path):
    da = _labelled(np.random.default_rng(1), n_time=8)
    model = OnlineCPDL(2, random_state=0).partial_fit(da, sample_dim="time", modes=MODES)
    back = load(model.save(tmp_path / "m.npz")).layout_
    layout = model.layout_
    assert (back.dims, back.sample_dim, back.modes) == (layout.dims, layout.sample_dim,
                                                         layout.modes)
    assert back.feature_coords.to_dataset().identical(layout.feature_coords.to_dataset())
    index = back.feature_coords.xindexes["station"].to_pandas_index()
    assert list(index.names) == ["network", "id"]  # MultiIndex level order kept
    assert back.feature_coords["hour"].dtype.kind == "M"
    assert back.name == "obs"
    assert back.attrs == {"units": "K", "count": 3, "levels": [0, 1, 2]}


def test_layout_with_named_stacked_mode_and_plain_dims(tmp_path):
    da = xr.DataArray(np.random.default_rng(2).random((6, 3, 4)), dims=("t", "y", "x"))
    modes = {"space": ("x", "y")}  # stacking order differs from the array's order
    model = OnlineCPDL(2, random_state=0).partial_fit(da, sample_dim="t", modes=modes)
    resumed = load(model.save(tmp_path / "m.npz"))
    assert resumed.layout_.mode_names == ("space",)
    assert resumed.factors_.identical(model.factors_)
    resumed.partial_fit(da)  # the stored layout takes new batches
    assert resumed.n_steps_ == 2


def test_unstorable_coordinate_is_named_and_old_checkpoint_kept(tmp_path):
    da = xr.DataArray(np.ones((4, 2, 3)), dims=("t", "x", "y"),
                      coords={"x": np.array([(1, 2), (3, 4)] + [None], dtype=object)[:2]})
    model = OnlineCPDL(2, random_state=0).partial_fit(np.ones((4, 2, 3)))
    path = model.save(tmp_path / "m.npz")
    good = path.read_bytes()
    labelled = OnlineCPDL(2, random_state=0).partial_fit(da, sample_dim="t")
    with pytest.raises(TypeError, match="coordinate 'x'"):
        labelled.save(path)
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz"]


def test_crash_while_saving_a_labelled_checkpoint_keeps_the_previous_one(tmp_path,
                                                                         monkeypatch):
    da = _labelled(np.random.default_rng(3), n_time=10)
    model = OnlineCPDL(2, random_state=0).partial_fit(da, sample_dim="time", modes=MODES)
    path = model.save(tmp_path / "ckpt.npz")
    model.partial_fit(da)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(np.lib.format, "write_array", crash)  # what writes a checkpoint
    with pytest.raises(KeyboardInterrupt):
        model.save(path)
    monkeypatch.undo()
    restored = load(path)
    assert restored.n_steps_ == 1
    assert restored.layout_.mode_names == ("station_hour", "variable")
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.npz"]


_SAVER = textwrap.dedent("""
    import sys
    import numpy as np
    from tensorstream import OnlineCPDL
    X = np.random.default_rng(0).random((4, 400, 300))
    model = OnlineCPDL(8, random_state=0, code_max_iter=2).partial_fit(X)
    model.save(sys.argv[1])
    print("saved", flush=True)
    while True:
        model.n_samples_seen_ += 1  # distinct contents every time
        model.save(sys.argv[1])
""")


def test_sigkill_during_saves_leaves_a_readable_checkpoint(tmp_path):
    """A process killed (SIGKILL, no clean-up) while rewriting its checkpoint leaves it whole."""
    path = tmp_path / "run.npz"
    script = tmp_path / "saver.py"
    script.write_text(_SAVER)
    child = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        assert child.stdout.readline().strip() == "saved"
        time.sleep(0.7)  # a few rewrites of ~8 MB: the kill lands during one
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    model = load(path)  # never a torn file
    assert model.n_steps_ == 1 and model.n_samples_seen_ >= 4
    assert model.statistics_["B"].shape == (400, 300, 8)


def test_tampered_layout_and_newer_versions_are_refused(tmp_path):
    da = _labelled(np.random.default_rng(4), n_time=6)
    model = OnlineCPDL(2, random_state=0).partial_fit(da, sample_dim="time", modes=MODES)
    meta, arrays = read_checkpoint(model.save(tmp_path / "good.npz"))

    def write(name, meta, arrays):
        np.savez(tmp_path / name, __meta__=np.array(json.dumps(meta)), **arrays)
        return tmp_path / name

    broken = dict(meta, layout=dict(meta["layout"], coords=meta["layout"]["coords"][:1]))
    with pytest.raises(ValueError, match="mode layout"):
        load(write("broken.npz", broken, arrays))
    resized = dict(meta, layout=dict(meta["layout"], sizes={**meta["layout"]["sizes"],
                                                            "variable": 5}))
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        load(write("resized.npz", resized, arrays))
    with pytest.raises(ValueError, match="version 99 is not supported"):
        load(write("future.npz", dict(meta, version=99), arrays))
    with pytest.raises(ValueError, match="corrupt or not a tensorstream checkpoint"):
        load(write("list.npz", [1, 2], arrays))


@pytest.mark.parametrize("layout", [{"sizes": {}}, "oops", {"modes": [], "sizes": {}}])
def test_info_names_a_tampered_layout_as_loading_does(tmp_path, layout, capsys):
    """``tensorstream info`` on a checkpoint whose layout description lacks its fields or is
    not a mapping exits 1 with loading's message (it printed ``'modes'`` or a raw TypeError)."""
    from tensorstream.cli import main

    da = _labelled(np.random.default_rng(4), n_time=6)
    model = OnlineCPDL(2, random_state=0).partial_fit(da, sample_dim="time", modes=MODES)
    meta, arrays = read_checkpoint(model.save(tmp_path / "good.npz"))
    path = tmp_path / "tampered.npz"
    np.savez(path, __meta__=np.array(json.dumps(dict(meta, layout=layout))), **arrays)
    capsys.readouterr()
    assert main(["info", str(path)]) == 1
    assert "mode layout is incomplete or inconsistent" in capsys.readouterr().err


@pytest.mark.parametrize("version", [1, 5, "6", True, None])
def test_other_format_versions_are_refused_clearly(tmp_path, version):
    """No release wrote a version before the current one: nothing upgrades it."""
    model = OnlineCPDL(2, random_state=0).partial_fit(np.ones((3, 4, 2)))
    meta, arrays = read_checkpoint(model.save(tmp_path / "new.npz"))
    np.savez(tmp_path / "old.npz", __meta__=np.array(json.dumps(dict(meta, version=version))),
             **arrays)
    with pytest.raises(ValueError, match=f"format version {version!r} is not supported by "
                       f"this tensorstream, which reads version 6; fit anew"):
        load(tmp_path / "old.npz")


# -- tampered files and left-overs -----------------------------------------------------------


def _rewritten(path, tmp_path, name="tampered.npz", meta_change=None, array_change=None,
               compression=None):
    """A copy of the checkpoint at ``path`` with its metadata or arrays changed."""
    import zipfile

    with np.load(path, allow_pickle=False) as archive:
        meta = json.loads(str(archive["__meta__"]))
        arrays = {k: archive[k] for k in archive.files if k != "__meta__"}
    if meta_change:
        meta_change(meta)
    if array_change:
        array_change(arrays)
    out = tmp_path / name
    if compression is None:
        np.savez(out, __meta__=np.array(json.dumps(meta)), **arrays)
    else:
        with zipfile.ZipFile(out, "w", compression=compression) as archive:
            for key, value in {"__meta__": np.array(json.dumps(meta)), **arrays}.items():
                with archive.open(f"{key}.npy", "w", force_zip64=True) as handle:
                    np.lib.format.write_array(handle, np.asarray(value))
    return out


@pytest.fixture
def saved(tmp_path):
    X = np.random.default_rng(0).random((20, 5, 4))
    return OnlineCPDL(3, batch_size=5, max_iter=1, random_state=0).fit(X).save(
        tmp_path / "run.npz")


def test_a_compressed_member_is_refused_without_expanding_it(saved, tmp_path):
    """A zip bomb: a member that expands far beyond the file (2 MB on disk, 200 MB inside)."""
    import tracemalloc
    import zipfile

    bomb = _rewritten(saved, tmp_path, compression=zipfile.ZIP_DEFLATED,
                      array_change=lambda a: a.update(B=np.zeros((5_000, 5_000))))
    assert bomb.stat().st_size < 2_000_000
    tracemalloc.start()
    with pytest.raises(ValueError, match="compressed"):
        load(bomb)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20_000_000


@pytest.mark.parametrize("change, match", [
    (lambda m: m["params"].update(n_components=10**12), "components"),
    (lambda m: m.update(n_steps=-5), "n_steps"),
    (lambda m: m.update(batch_size=0), "batch_size"),
    (lambda m: m.update(batch_size=True), "batch_size"),
    (lambda m: m.update(n_samples_seen=2), "n_samples_seen"),
    (lambda m: m.update(dtype="float16"), "float32 or float64"),
    (lambda m: m.update(scale=-1.0), "scale"),
    (lambda m: m["params"].update(alpha=-1.0), "invalid parameters"),
    (lambda m: m["health"].update(idle_steps=[0]), "health.idle_steps holds 1 atoms, not 3"),
    (lambda m: m["health"].update(idle_samples=[0, 0]),
     "health.idle_samples holds 2 atoms, not 3"),
    (lambda m: m["health"].pop("block"), "block"),
])
def test_invalid_metadata_is_refused_naming_the_field(saved, tmp_path, change, match):
    with pytest.raises(ValueError, match=match):
        load(_rewritten(saved, tmp_path, meta_change=change))


@pytest.mark.parametrize("change, match", [
    (lambda a: a.update(loading_0=-a["loading_0"]), "negative"),
    (lambda a: a.update(A=np.full_like(a["A"], np.nan)), "NaN or infinite"),
])
def test_an_infeasible_state_is_refused(saved, tmp_path, change, match):
    with pytest.raises(ValueError, match=match):
        load(_rewritten(saved, tmp_path, array_change=change))


def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        load(fifo)


def test_temporaries_of_killed_saves_are_removed_by_the_next_save(tmp_path):
    X = np.random.default_rng(0).random((20, 5, 4))
    model = OnlineCPDL(3, batch_size=5, max_iter=1, random_state=0).fit(X)
    stale = tmp_path / ".run.npz.0123456789ab.tmp"  # a killed save, before it locked
    stale.write_bytes(b"x" * 1000)
    orphan = tmp_path / ".run.npz.ba9876543210.tmp"  # a killed save, its lock released
    orphan.write_bytes(b"y")
    (tmp_path / (orphan.name + ".lock")).touch()
    other = tmp_path / ".other.npz.0123456789ab.tmp"  # another target's: not ours to remove
    other.write_bytes(b"z")
    old = time.time() - 60
    for path in (stale, orphan, other):
        os.utime(path, (old, old))
    # a save in progress in another process holds its lock: its temporary must survive
    live = tmp_path / ".run.npz.aaaaaaaaaaaa.tmp"
    live.write_bytes(b"w")
    os.utime(live, (old, old))
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(live) + '.lock'!r}, os.O_WRONLY | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(30)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        model.save(tmp_path / "run.npz")
        assert not stale.exists() and not orphan.exists()
        assert other.exists() and live.exists()
    finally:
        holder.kill()
        holder.wait()
    assert load(tmp_path / "run.npz").n_steps_ == model.n_steps_


def test_checkpoints_with_the_old_parameter_names_are_refused_by_name(tmp_path):
    """Names the parameters had in development versions (column_norm_bound, basis_sweeps,
    ...) are not translated: the file is refused, naming what differs."""
    from tensorstream import OnlineMaxNormMD

    Z = np.random.default_rng(0).standard_normal((30, 8))
    model = OnlineMaxNormMD(2, dict_passes=2, code_tol=1e-5, random_state=0).fit(Z)

    def old_names(meta):
        params = meta["params"]
        params["column_norm_bound"] = params.pop("column_bound")
        params["basis_sweeps"] = params.pop("dict_passes")

    old = _rewritten(model.save(tmp_path / "new.npz"), tmp_path, meta_change=old_names)
    with pytest.raises(ValueError, match=r"OnlineMaxNormMD has no parameter\(s\) "
                       r"\['basis_sweeps', 'column_norm_bound'\]; it lacks the parameter\(s\) "
                       r"\['column_bound', 'dict_passes'\].*fit anew"):
        load(old)


def _flipped(raw: bytes, position: int, bits: int) -> bytes:
    data = bytearray(raw)
    data[position] ^= bits
    return bytes(data)


def test_corrupt_headers_and_zip_flags_are_refused_as_corrupt(tmp_path):
    """Corruptions that numpy's header parser or zipfile report with their own errors
    (tokenize's TokenError, "encrypted" RuntimeError, NotImplementedError for a zip version)
    are refused with the ValueError of any corrupt file."""
    from tensorstream import OnlineNMF

    X = np.random.default_rng(0).random((20, 8))
    raw = OnlineNMF(2, random_state=0).partial_fit(X).save(tmp_path / "run").read_bytes()
    directory = raw.index(b"PK\x01\x02")  # the zip's central directory
    for k, data in enumerate([raw.replace(b"'shape': (), }", b"'shape': ((, }", 1),
                              _flipped(raw, directory + 8, 1),  # the "encrypted" flag
                              _flipped(raw, directory + 6, 64)]):  # the version needed
        assert data != raw
        path = tmp_path / f"bad{k}.npz"
        path.write_bytes(data)
        with pytest.raises(ValueError, match="corrupt or not a tensorstream checkpoint"):
            load(path)


@pytest.mark.parametrize("form", ["array", "list"])
def test_batch_robust_nmf_checkpoints_its_init(tmp_path, form):
    """A batch fit starts from ``init``: an array or list ``init`` is saved whole (an array
    raised TypeError, a list came back as "random"), so the loaded learner refits alike."""
    from tensorstream import RobustNMF

    rng = np.random.default_rng(0)
    X, W = rng.random((20, 12)), rng.random((3, 12))
    init = W if form == "array" else [W.T]
    model = RobustNMF(3, init=init, max_iter=5, random_state=0).fit(X)
    loaded = load(model.save(tmp_path / "run"))
    if form == "array":
        np.testing.assert_array_equal(loaded.init, W)
    else:
        assert isinstance(loaded.init, list) and len(loaded.init) == 1
        np.testing.assert_array_equal(loaded.init[0], W.T)
    np.testing.assert_array_equal(loaded.fit(X).components_, model.fit(X).components_)


@pytest.mark.parametrize("change, field", [
    ({"idle_steps": [-100] * 4}, "health.idle_steps"),
    ({"idle_samples": [2.7] * 4}, "health.idle_samples"),
    ({"block_means": [float("nan")] * 3}, "health.block_means"),
    ({"block": [-1e9, -5, -3]}, "health.block"),
    ({"futile_reinits": [-1] * 4}, "health.futile_reinits"),
    ({"futile_reinits": [1.5] * 4}, "health.futile_reinits"),
    ({"futile_reinits": [0] * 3}, "health.futile_reinits"),
    ({"futile_reinits": 2}, "health.futile_reinits"),
])
def test_tampered_health_counters_are_refused_naming_the_field(tmp_path, change, field):
    """Negative counts loaded (delaying the dead-atom check), 2.7 was cut to 2, NaN means
    switched the rising-objective check off; futile re-initialisations of the wrong atoms
    would give up atoms, or re-initialise them for ever."""
    from tensorstream.engine.checkpoint import read_checkpoint, write_checkpoint

    D = np.random.default_rng(0).random((300, 20))
    model = OnlineCPDL(n_components=4, random_state=0)
    for i in range(6):
        model.partial_fit(D[i * 50:(i + 1) * 50])
    model.save(tmp_path / "ck")
    meta, arrays = read_checkpoint(tmp_path / "ck.npz")
    meta["health"].update(change)
    write_checkpoint(tmp_path / "bad.npz", "OnlineCPDL", meta, arrays)
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        load(tmp_path / "bad.npz")
    load(tmp_path / "ck.npz")


def test_a_dict_parameter_with_other_than_string_keys_is_named():
    from tensorstream.engine.checkpoint import encode_param

    with pytest.raises(TypeError, match="cannot checkpoint parameter loss_params.*only string"):
        encode_param("loss_params", {1: 2})
