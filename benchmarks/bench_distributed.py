"""Fitting on a Dask cluster: 1 vs 2 workers against one process, on a zarr store on disk.

    python benchmarks/bench_distributed.py                  # a 4 GB store (generated once)
    python benchmarks/bench_distributed.py --gigabytes 0.5  # quicker
    python benchmarks/bench_distributed.py --sampling rows  # batches of random rows

The store holds float32 samples of a planted low-rank model (chunked along the samples, written
chunk by chunk: the generator never holds the store in memory). OnlineCPDL (image-like 64 x 64
samples) and OnlineNMF (the same samples as 4096-vectors) learn from the same batches three ways:
in this process (the batch read here), and on a LocalCluster of 1 and 2 worker processes (each
worker reads its shard of the batch from the store; only the loadings and the statistics cross
the network). Printed per run: samples/s, the speed-up over one process, the driver's peak
memory (flat in the store's size: the driver never holds more than one batch, and on a cluster
not even that after the first), the bytes the workers ship per step (Dask's count of what they
send: the statistics back to the driver, and any data moved between workers) next to the
statistics' size, and the bytes of the shards' task graphs sent to the workers per step.

Batches: ``--sampling chunks`` (default) draws ``batch / chunk`` whole chunks of the store at
random, so a step reads ``batch`` samples; ``--sampling rows`` draws random rows, which on a
store chunked along the samples reads (and decompresses) nearly every chunk per step: the
throughput then falls with the store's size.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SIDE = 64  # samples are SIDE x SIDE images (OnlineCPDL) or SIDE^2-vectors (OnlineNMF)
RANK = 8


def make_store(path: Path, gigabytes: float, chunk: int = 2048, seed: int = 0) -> Path:
    """A zarr store of ``gigabytes`` of float32 ``(n, SIDE, SIDE)`` samples (written once)."""
    import dask.array as da
    import xarray as xr

    n = int(gigabytes * 2**30 / (SIDE * SIDE * 4)) // chunk * chunk
    if path.exists():
        with xr.open_zarr(path) as existing:
            if existing["frames"].shape[0] == n:
                return path
        import shutil

        shutil.rmtree(path)
    rng = np.random.default_rng(seed)
    U, V = rng.random((SIDE, RANK)), rng.random((SIDE, RANK))

    def block(block_id):
        local = np.random.default_rng((seed, block_id[0]))
        codes = local.random((chunk, RANK))
        frames = np.einsum("jr,ir,kr->jik", codes, U, V) + 0.05 * local.random(
            (chunk, SIDE, SIDE))
        return frames.astype(np.float32)

    frames = da.map_blocks(lambda block_id=None: block(block_id), dtype=np.float32,
                           chunks=((chunk,) * (n // chunk), (SIDE,), (SIDE,)))
    xr.Dataset({"frames": (("time", "y", "x"), frames)}).to_zarr(path, mode="w")
    return path


def batches(n: int, batch: int, chunk: int, sampling: str, n_batches: int) -> list:
    """Sorted sample positions of ``n_batches`` batches: random whole chunks, or random rows."""
    rng = np.random.default_rng(0)
    unit, per_batch = (1, batch) if sampling == "rows" else (chunk, max(1, batch // chunk))
    units = n // unit
    if per_batch > units:
        raise ValueError(f"a batch of {batch} needs {per_batch} of the store's {units} "
                         f"{'rows' if unit == 1 else 'chunks'}: make the store bigger")
    epochs = -(-n_batches * per_batch // units)  # as many shuffled passes as the steps need
    order = np.concatenate([rng.permutation(units)[:units // per_batch * per_batch]
                            for _ in range(epochs)])
    return [np.sort((order[k * per_batch:(k + 1) * per_batch, None] * unit
                     + np.arange(unit)).ravel()) for k in range(n_batches)]


def run(learner_kind: str, path: Path, n_workers: int, n_steps: int, batch: int,
        sampling: str = "chunks") -> dict:
    """Fit ``n_steps`` batches; returns samples/s, driver peak RSS and bytes per step."""
    import cloudpickle
    import xarray as xr

    from tensorstream import OnlineCPDL, OnlineNMF

    frames = xr.open_zarr(path)["frames"]
    if learner_kind == "nmf":
        frames = frames.stack(pixel=("y", "x"))
        make = lambda: OnlineNMF(RANK, batch_size=batch, max_iter=1, random_state=0)  # noqa: E731
        modes = [("pixel",)]
    else:
        make = lambda: OnlineCPDL(RANK, batch_size=batch, max_iter=1, random_state=0)  # noqa: E731
        modes = ["y", "x"]
    model = make()
    client = None
    if n_workers:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    chunk = frames.chunks[0][0]
    plan = batches(frames.sizes["time"], batch, chunk, sampling, n_steps + 1)
    sent_before = _bytes_sent(client)
    start, graph_bytes = None, 0.0
    for step in range(n_steps + 1):
        data = frames.isel(time=plan[step])
        if client is None:
            data = data.compute()
        elif step > 0:  # what the shards' reads cost to send: their task graphs
            graph_bytes += len(cloudpickle.dumps(data.data))
        labels = {"sample_dim": "time", "modes": modes} if step == 0 else {}
        model.partial_fit(data, client=client, **labels)
        if step == 0:  # the first step initialises the model: not timed
            start = time.perf_counter()
            sent_before = _bytes_sent(client)
    seconds = time.perf_counter() - start
    shipped = (_bytes_sent(client) - sent_before) / n_steps if client is not None else 0
    stats = model.statistics_
    statistic_bytes = np.asarray(stats["A"]).nbytes + np.asarray(stats["B"]).nbytes
    round_trip = _round_trip(client, statistic_bytes) if client is not None else 0.0
    if client is not None:
        client.close()
        cluster.close()
    model_bytes = sum(np.asarray(U).nbytes for U in model.loadings_)
    return {"samples_per_s": n_steps * batch / seconds, "seconds": seconds,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "shipped_per_step": shipped, "graph_per_step": graph_bytes / n_steps,
            "model_bytes": model_bytes, "round_trip_s": round_trip,
            "statistic_bytes": statistic_bytes, "loss": model._last_info["batch_loss"]}


def _round_trip(client, size: int, repeats: int = 10) -> float:
    """Seconds of one task round trip that returns ``size`` bytes from each worker at once
    (the per-step overhead of the cost model, without the coding)."""
    workers = sorted(client.scheduler_info()["workers"])
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        client.gather([client.submit(np.zeros, size // 4, dtype=np.float32, pure=False,
                                     workers=[w]) for w in workers])
        times.append(time.perf_counter() - begin)
    return float(np.median(times))


def _bytes_sent(client) -> float:
    """Bytes the scheduler and workers report having sent (0 without a cluster)."""
    if client is None:
        return 0.0
    totals = client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total)
    return float(sum(totals.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gigabytes", type=float, default=4.0)
    parser.add_argument("--store", default="bench-distributed.zarr")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--learners", nargs="+", default=["cpdl", "nmf"])
    parser.add_argument("--sampling", choices=("chunks", "rows"), default="chunks")
    parser.add_argument("--keep", action="store_true", help="keep the store afterwards")
    parser.add_argument("--one", nargs=2, metavar=("LEARNER", "WORKERS"),
                        help=argparse.SUPPRESS)  # one run in a fresh process (its own peak RSS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run(args.one[0], Path(args.store), int(args.one[1]), args.steps,
                             args.batch, args.sampling)))
        return
    begin = time.perf_counter()
    path = make_store(Path(args.store), args.gigabytes)
    print(f"store {path} ({args.gigabytes:g} GB), ready in {time.perf_counter() - begin:.0f} s; "
          f"batch {args.batch} ({args.sampling}), {args.steps} timed steps")
    print("| learner | workers | samples/s | speed-up vs 1 process | driver peak RSS MiB | "
          "bytes shipped per step | statistics bytes | graph bytes per step | round trip ms | "
          "batch loss |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in args.learners:
        base = None
        for n_workers in (0, 1, 2):
            output = subprocess.run(
                [sys.executable, __file__, "--store", str(path), "--steps", str(args.steps),
                 "--batch", str(args.batch), "--sampling", args.sampling, "--one", kind,
                 str(n_workers)],
                capture_output=True, text=True, check=True).stdout
            result = json.loads(output.strip().splitlines()[-1])
            base = base or result["samples_per_s"]
            print(f"| {kind} | {n_workers or 'none (1 process)'} | "
                  f"{result['samples_per_s']:.0f} | {result['samples_per_s'] / base:.2f} | "
                  f"{result['peak_rss_mb']:.0f} | {result['shipped_per_step']:.3g} | "
                  f"{result['statistic_bytes']:.3g} | {result['graph_per_step']:.3g} | "
                  f"{1e3 * result['round_trip_s']:.1f} | {result['loss']:.5g} |", flush=True)
    if not args.keep:
        import shutil

        shutil.rmtree(path)


if __name__ == "__main__":
    main()
