"""Choose the grouping of modes and the number of components from the data, online.

:func:`select` fits every candidate (a grouping of the sample's axes times a rank) from the
same mini-batches as they are read: one read of the data per pass serves all candidates. Each
candidate is ``n_splits`` (3) learners, each fitted on its own disjoint share of every batch,
and scored on samples held out from training:

* **held-out error**: the relative squared error of the held-out samples coded from all their
  entries (``sum ||x - x_hat||^2 / sum ||x||^2`` over the held-out samples, a ratio of
  totals, with its standard error);
* **imputation error**: the same, on a fixed random share of each held-out sample's entries
  hidden from the coder (``mask``) and predicted from the others: unlike the held-out error, it
  rises again when a model fits noise, so it is the score the rule uses;
* **replicability**: for each pair of learners, their factors matched one to one (Hungarian
  assignment on the factor match score, the product over modes of the columns' absolute
  cosines), the scores sorted from best to worst; per component, the mean over the pairs
  (with three learners and three pairs, one unlucky fit moves it less than with two);
* time spent fitting, and the bytes of the fitted state.

Every candidate still in the running after ``n_passes`` goes on, pass by pass, until its
imputation error stops improving (by ``CONVERGED``, 2% of itself per pass) or ``max_passes``:
the rule compares candidates fitted to the same convergence (the right rank converges more
slowly than a larger one, which spends its spare components on the gap).

Candidates the rule will not choose are dropped early (successive halving, steered by the
rule), at scorings after ``first_rung`` of the first pass, twice that, ... then after each
pass: the best candidate goes on; a candidate no larger (in parameters) than the rule's
current choice goes on while its error is within the rule's bar or still falling fast
enough to reach it (``REACH_PASSES`` more passes at its last rate); a larger one only while
it is falling fast enough to beat the choice by the rule's margin. While the only candidates
at ranks the data hold (see the rule) have been dropped, none is dropped: a rank still
converging may replicate again at a later scoring.

**The rule** (:attr:`Selection.chosen`): the replicability decides how many components the
data hold, the imputation error and the size which candidate. A rank *replicates* when its
candidates' replicability (their factor match scores summarized by ``replicability``),
averaged over the groupings, reaches ``min_replicability``; the ranks the data hold are the
ranks that replicate below the first one that does not after a whole pass. Among the
finalists (the candidates not dropped) at those ranks, take the best imputation error and
its standard error over held-out samples; of the candidates within one standard error (or
``tolerance`` times) of it, choose the one with the fewest parameters (``rank * sum of mode
sizes``): the smallest rank, and of equal ranks the finest grouping. When no finalist is
at such a rank, the rule chooses among the candidates at those ranks that halving dropped
(as scored when dropped), and when there are none, among all finalists;
``Selection.table.attrs["rule"]`` says which.

Examples
--------
>>> import numpy as np
>>> from tensorstream import OnlineCPDL
>>> from tensorstream.model_selection import select
>>> rng = np.random.default_rng(0)
>>> A, B, C = rng.random((6, 2)), rng.random((5, 2)), rng.random((3, 2))
>>> X = np.einsum("nr,ir,jr,kr->nijk", rng.random((400, 2)), A, B, C)
>>> result = select(OnlineCPDL(2, batch_size=50, random_state=0), X,
...                 modes=["0;1;2", "0,1;2"], n_components=[1, 2, 3], n_passes=2)
>>> result.table["imputation_error"].dims
('grouping', 'rank')
>>> sorted(result.chosen)
['grouping', 'modes', 'n_components']
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import xarray as xr

from .core.backend import take_rows, to_numpy
from .modes import as_modes, format_groups

__all__ = ["Grouped", "Selection", "factor_match", "select"]

#: the fewest mini-batches before candidates are first scored and dropped
MIN_RUNG_STEPS = 20
#: a candidate whose imputation error fell by less than this share of itself over its last
#: pass has converged (it trains no more)
CONVERGED = 0.02
#: a candidate still improving is kept while its error, falling for this many more passes
#: at its last rate, could reach the rule's bar
REACH_PASSES = 2.0

#: how the per-component factor match scores of a candidate are summarized
_SUMMARIES = {"worst": np.min, "median": np.median}


def factor_match(first: Sequence[Any], second: Sequence[Any]) -> np.ndarray:
    """Per-component factor match scores of two CP fits, components matched one to one.

    Parameters
    ----------
    first, second : list of arrays of shape (I_k, R)
        The loadings of two fits of the same modes and rank.

    Returns
    -------
    ndarray of shape (R,)
        For each component of ``first``, the product over modes of the absolute cosine with
        its match in ``second`` (Hungarian assignment maximizing the total), in ``[0, 1]``;
        sorted from best to worst.
    """
    from scipy.optimize import linear_sum_assignment

    similarity = np.ones((first[0].shape[1], second[0].shape[1]))
    for U, V in zip(first, second, strict=True):
        U, V = _unit_columns(to_numpy(U)), _unit_columns(to_numpy(V))
        similarity *= np.abs(U.T @ V)
    rows, cols = linear_sum_assignment(similarity, maximize=True)
    return np.sort(similarity[rows, cols])[::-1]


def _unit_columns(U: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(U, axis=0)
    return U / np.where(norms > 0, norms, 1.0)  # a dead (zero) column matches nothing


@dataclasses.dataclass
class _Candidate:
    """One grouping at one rank: the learners of the disjoint shares and what they cost."""

    grouping: str
    modes: Any
    rank: int
    learners: list
    seconds: float = 0.0
    passes: float = 0.0
    alive: bool = True
    converged: bool = False
    scores: dict = dataclasses.field(default_factory=dict)
    history: list = dataclasses.field(default_factory=list)  # (passes, imputation error)


class Selection:
    """What :func:`select` found.

    Attributes
    ----------
    table : xarray.Dataset
        Dims ``grouping`` x ``rank`` (and ``component`` for the per-component
        replicability): ``imputation_error``, ``imputation_se``, ``heldout_error``,
        ``heldout_se``, ``replicability`` (the worst matched component), ``replicable``,
        ``replicability_per_component``, ``fit_seconds``, ``state_bytes``, ``n_parameters``,
        ``rank_replicability`` and ``rank_replicable`` (dim ``rank``: the candidates'
        replicability averaged over the groupings, which the rule compares with
        ``min_replicability``),
        ``passes`` (how many passes the candidate ran: until dropped, converged or
        ``max_passes``) and ``finalist`` (not dropped: the rule's pool). ``attrs["rule"]``
        says how ``chosen`` was found, ``attrs["n_splits"]`` how many learners each
        candidate had.
    chosen : dict
        ``{"grouping": text, "modes": as given, "n_components": int}`` by the rule of
        :mod:`tensorstream.model_selection`.
    """

    def __init__(self, table: xr.Dataset, chosen: dict):
        self.table = table
        self.chosen = chosen

    def __repr__(self) -> str:
        return (f"Selection(chosen={self.chosen}, groupings={list(self.table.grouping.values)}, "
                f"ranks={list(self.table.rank.values)})")

    def plot(self, axes: Any = None) -> Any:
        """Imputation error and replicability against rank, one line per grouping; the chosen
        candidate circled. Returns the matplotlib axes (two)."""
        if axes is None:  # a Figure of its own: no pyplot state left behind
            from matplotlib.figure import Figure

            axes = Figure(figsize=(9, 3.5), layout="constrained").subplots(1, 2)
        ranks = self.table["rank"].values
        for g in self.table["grouping"].values:
            row = self.table.sel(grouping=g)
            axes[0].errorbar(ranks, row["imputation_error"], row["imputation_se"], marker="o",
                             capsize=3, label=g)
            axes[1].plot(ranks, row["replicability"], marker="o", label=g)
        axes[1].plot(ranks, self.table["rank_replicability"], "k--",
                     label="mean over groupings")  # what the rule compares
        chosen = self.table.sel(grouping=self.chosen["grouping"],
                                rank=self.chosen["n_components"])
        axes[0].plot(self.chosen["n_components"], chosen["imputation_error"], "o", ms=14,
                     mfc="none", mec="k", label="chosen")
        axes[0].set(xlabel="rank", ylabel="imputation error (relative)")
        axes[1].axhline(self.table.attrs["min_replicability"], color="gray", ls=":")
        axes[1].set(xlabel="rank", ylabel="replicability (worst component)", ylim=(0, 1.05))
        axes[0].legend(title="grouping", fontsize="small")
        from matplotlib.ticker import MaxNLocator

        for ax in axes:  # ranks are whole numbers
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        return axes


def select(learner: Any, data: Any, *, modes: Sequence[Any], n_components: Sequence[int],
           sample_dim: str | None = None, var: str | None = None, n_passes: int = 3,
           max_passes: int | None = None, batch_size: int | None = None,
           holdout: float = 0.1, max_holdout: int = 1000, hidden: float = 0.2,
           prune: bool = True, first_rung: float = 0.1, min_replicability: float = 0.8,
           replicability: str = "worst", tolerance: float = 0.1, n_splits: int = 3,
           client: Any = None,
           random_state: int = 0, verbose: bool = False) -> Selection:
    """Score every grouping x rank online and choose one by the documented rule.

    Parameters
    ----------
    learner : OnlineLearner
        A configured learner (e.g. ``OnlineCPDL(..., alpha=0.1)``); its ``n_components`` is
        replaced by each rank, and it is cloned, never fitted itself.
    data : array, xarray.DataArray, path or list of batches
        Samples along the first axis (arrays, tensors, dask arrays), along ``sample_dim``
        (DataArrays, and netCDF/zarr/npy files opened lazily by
        :func:`tensorstream.open_dataarray` with ``var``), or a re-iterable list of batches
        (its first batch is held out).
    modes : list
        The candidate groupings, each as ``fit`` takes ``modes`` (``[(0, 1), 2]``,
        ``"y,x;channel"``, ...).
    n_components : list of int
        The candidate ranks.
    sample_dim, var : str, optional
        For labelled data and files.
    n_passes : int, default 3
        Passes over the training samples every candidate still in the running makes.
    max_passes : int, optional
        The most passes: a candidate still in the running after ``n_passes`` whose
        imputation error fell by more than ``CONVERGED`` (2%) of itself over its last pass
        goes on, pass by pass, up to ``max_passes`` (default ``3 * n_passes``), so that the
        rule compares candidates fitted to the same convergence (a model of exactly the
        right rank converges more slowly than a larger one). ``max_passes=n_passes`` stops
        every candidate after ``n_passes``.
    batch_size : int, optional
        Samples per mini-batch (each learner gets its ``1 / n_splits`` share of it);
        default the learner's.
    holdout : float, default 0.1
        Share of the samples held out for scoring, at most ``max_holdout`` samples.
    hidden : float, default 0.2
        Share of each held-out sample's entries hidden for the imputation error.
    prune : bool, default True
        Drop, at each scoring, the candidates the rule will not choose (see above); False
        runs every candidate until it has converged.
    first_rung : float, default 0.1
        The share of the first pass after which candidates are first scored (and after
        ``MIN_RUNG_STEPS`` (20) batches at the least); then at twice that share, and so on,
        to the end of the first pass, then after each pass. 1 scores after whole passes
        only.
    min_replicability : float, default 0.8
        The replicability a rank reaches, averaged over the groupings, to count as held by
        the data (a candidate's own ``replicable`` compares its replicability alone).
    replicability : {"worst", "median"}, default "worst"
        How the per-component factor match scores are summarized into the candidate's
        ``replicability``: the worst component's, or the median component's (softer: one
        atom that does not replicate is tolerated).
    tolerance : float, default 0.1
        Errors within ``tolerance`` times the best also count as tied with it (besides those
        within one standard error).
    n_splits : int, default 3
        Learners per candidate, each fitted on its own share of every batch (every
        ``n_splits``-th sample): the errors are their mean, the replicability the mean over
        their pairs. Three learners (three pairs) make the replicability, and so the chosen
        rank, vary less from one draw of the data to another than two (one pair), at about
        ``n_splits / 2`` times the cost of two.
    client : dask.distributed.Client, optional
        Run the candidates in parallel on the cluster's workers (each reads the same batches,
        so the answer is the sequential one).
    random_state : int, default 0
        Seeds the held-out split, the hidden entries and the batches' order.
    verbose : bool, default False
        A progress bar over the mini-batches.

    Returns
    -------
    Selection
        The table (an ``xarray.Dataset``), the chosen candidate and a plot.
    """
    max_passes = 3 * n_passes if max_passes is None else max_passes
    _check_choices(modes, n_components, n_passes, holdout, hidden, min_replicability,
                   tolerance, first_rung, max_passes, replicability, n_splits)
    source = _Source.of(data, sample_dim, var, random_state)
    batch_size = batch_size or _learner_batch(learner)
    if source.array and batch_size < n_splits:  # every learner takes a share of each batch
        raise ValueError(f"batch_size ({batch_size}) must be at least n_splits ({n_splits}): "
                         f"each of a candidate's learners learns from its share of a batch")
    source.check_groupings(modes, learner)  # a bad grouping is named before any fit
    held = _HeldOut(*source.held_out(holdout, max_holdout, hidden, n_splits), source)
    candidates = [_Candidate(_grouping_text(m), m, int(r), [_clone(learner, int(r), share)
                                                             for share in range(n_splits)])
                  for m in modes for r in n_components]
    # a rung of a few steps would score candidates that have barely started
    first_rung = min(1.0, max(first_rung, MIN_RUNG_STEPS / source.n_batches(batch_size)))
    summary = _SUMMARIES[replicability]
    # the data go to every worker once, not with every task of every rung (a task's
    # arguments are pickled task by task); the future lives as long as this call
    shared = None if client is None else client.scatter(source, broadcast=True, hash=False)
    for rung in _rungs(n_passes, max_passes, first_rung):
        training = [c for c in candidates if c.alive and not c.converged]
        if not training:
            break  # every candidate in the running has converged
        if client is None:
            _train_pass(training, source.pass_batches(batch_size, *rung, n_splits=n_splits), source,
                        verbose)
        else:
            _train_on_cluster(client, training, shared, rung, batch_size)
        if not _trained(training):  # a list's batches so far too small to share
            if rung[2] < 1.0:
                continue  # the rest of the pass may hold larger ones
            raise ValueError(f"no batch of the data holds n_splits ({n_splits}) samples: each "
                             f"of a candidate's learners needs one of every batch; give "
                             f"larger batches or a smaller n_splits")
        for c in training:
            c.passes = rung[0] + rung[2]
            c.scores = _scores(c, held, summary)
            c.history.append((c.passes, c.scores["imputation"]))
            c.converged = c.passes >= n_passes and _improvement(c) <= CONVERGED
        if prune:
            _prune(candidates, tolerance, min_replicability)
    result = _result(candidates, list(modes), sorted({int(r) for r in n_components}),
                     min_replicability, tolerance, replicability)
    result.table.attrs["n_splits"] = n_splits
    return result


def _trained(training: list) -> bool:
    """Whether every learner of the candidates has learned: batches (of a list or stream)
    smaller than ``n_splits`` are skipped, as each learner needs a sample of every batch."""
    return all(learner._fitted for c in training for learner in c.learners)


def _check_choices(modes, n_components, n_passes, holdout, hidden, minimum,
                   tolerance, first_rung, max_passes, replicability, n_splits) -> None:
    if isinstance(modes, str) or not isinstance(modes, Sequence) or not modes:
        raise ValueError(f"modes: give a list of candidate groupings, e.g. ['0,1;2', '0;1;2'], "
                         f"got {modes!r}")
    texts = [_grouping_text(m) for m in modes]
    if len(set(texts)) < len(texts):
        raise ValueError(f"modes: a grouping is listed twice in {texts}")
    ranks = list(n_components) if isinstance(n_components, Iterable) else None
    if not ranks or any(isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1
                        for r in ranks):
        raise ValueError(f"n_components: give a list of positive integers (the ranks to "
                         f"try), got {n_components!r}")
    if len(set(map(int, ranks))) < len(ranks):  # a repeat would be trained twice, kept once
        raise ValueError(f"n_components: a rank is listed twice in {ranks}")
    if not 0 < first_rung <= 1:
        raise ValueError(f"first_rung must be in (0, 1], got {first_rung!r}")
    if not isinstance(n_passes, int) or n_passes < 1:
        raise ValueError(f"n_passes must be a positive integer, got {n_passes!r}")
    if not isinstance(max_passes, int) or max_passes < n_passes:
        raise ValueError(f"max_passes must be an integer of at least n_passes ({n_passes}), "
                         f"got {max_passes!r}")
    if isinstance(n_splits, bool) or not isinstance(n_splits, (int, np.integer)) \
            or n_splits < 2:  # replicability compares two learners at least
        raise ValueError(f"n_splits must be an integer of at least 2, got {n_splits!r}")
    if replicability not in _SUMMARIES:
        raise ValueError(f"replicability must be one of {sorted(_SUMMARIES)}, got "
                         f"{replicability!r}")
    for name, value, low, high in (("holdout", holdout, 0, 0.5), ("hidden", hidden, 0, 0.9)):
        if not low < value <= high:
            raise ValueError(f"{name} must be in ({low}, {high}], got {value!r}")
    if not 0 <= minimum <= 1:
        raise ValueError(f"min_replicability must be in [0, 1], got {minimum!r}")
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance!r}")


def _grouping_text(modes: Any) -> str:
    """A candidate's label: the command line's text for its grouping."""
    if isinstance(modes, str):
        return modes.replace(" ", "")
    if isinstance(modes, dict):
        return ";".join(f"{k}=" + ",".join(v if isinstance(v, tuple) else (v,))
                        for k, v in modes.items())
    groups = [g if isinstance(g, (tuple, list)) else (g,) for g in modes]
    return format_groups(groups)


def _clone(learner: Any, rank: int, share: int) -> Any:
    params = learner.get_params()
    params["n_components"] = rank
    if "random_state" in params and params["random_state"] is None:
        params["random_state"] = share  # deterministic: the shares' own seeds
    return type(learner)(**params)



def _learner_batch(learner: Any) -> int:
    """The batch the candidates learn from: the learner's ``batch_size``, ``"auto"`` as an
    unfitted learner resolves it (its class's default: a device's rule would differ between
    the candidates' states); 256 for a learner without one."""
    if not hasattr(learner, "_batch_size") or getattr(learner, "batch_size", None) is None:
        return 256
    return int(learner._batch_size())

class _Source:
    """Where the batches come from: an array (any backend, labelled or not) or a list."""

    def __init__(self, data: Any, sample_dim: str | None, random_state: int):
        self.data, self.sample_dim = data, sample_dim
        self.labelled = isinstance(data, xr.DataArray)
        self.seed = random_state
        self.rng = np.random.default_rng(random_state)
        self.array = hasattr(data, "shape") and hasattr(data, "ndim")
        self.train = None

    @classmethod
    def of(cls, data: Any, sample_dim: str | None, var: str | None,
           random_state: int) -> _Source:
        if isinstance(data, (str, os.PathLike)):
            from .io import open_dataarray

            data = open_dataarray(data, var, sample_dim=sample_dim)
            sample_dim = sample_dim or "sample"
        if isinstance(data, xr.DataArray) and sample_dim is None:
            raise ValueError(f"sample_dim is required for labelled data (dims {data.dims})")
        if not (hasattr(data, "shape") or isinstance(data, Sequence)):
            raise TypeError(f"data must be an array, a DataArray, a file or a list of batches "
                            f"(read once per pass), got {type(data).__name__}")
        if not hasattr(data, "shape") and len(data) < 2:
            raise ValueError("data: a list of batches needs two at least (the first is held "
                             "out)")
        return cls(data, sample_dim, random_state)

    def check_groupings(self, modes: Sequence[Any], learner: Any) -> None:
        """Each candidate grouping parsed against the data's axes (or dims), and one mode
        only for a learner of matrices."""
        from .learners._modes import _is_matrix_learner

        first = self.data if self.array else self.data[0]
        for m in modes:
            try:
                if self.labelled:
                    from .labels import ModeLayout

                    n_modes = len(ModeLayout.from_dataarray(
                        first.isel({self.sample_dim: slice(0, 1)}), self.sample_dim,
                        as_modes(m, first.dims)).modes)
                else:
                    n_modes = len(as_modes(m, len(first.shape) - 1))
            except (TypeError, ValueError) as error:
                raise type(error)(f"modes: candidate {m!r}: {error}") from None
            if n_modes > 1 and _is_matrix_learner(learner):
                raise ValueError(f"modes: candidate {m!r} makes {n_modes} modes, but "
                                 f"{type(learner).__name__} factorizes matrices (one feature "
                                 f"mode): group every axis into one, or use OnlineCPDL")

    def n_batches(self, batch_size: int) -> int:
        """Batches in a pass (after ``held_out``)."""
        if not self.array:
            return len(self.data) - 1
        return -(-len(self.train) // batch_size)

    def n_samples(self) -> int:
        if self.labelled:
            return int(self.data.sizes[self.sample_dim])
        return int(self.data.shape[0])

    def take(self, rows: np.ndarray) -> Any:
        rows = np.sort(rows)  # a lazily read array reads its chunks once
        if self.labelled:
            return self.data.isel({self.sample_dim: rows})
        return take_rows(self.data, rows)

    def held_out(self, share: float, most: int, hidden: float,
                 n_splits: int) -> tuple[Any, Any]:
        """The held-out samples (loaded) and the mask of their observed entries."""
        if not self.array:
            held = self.data[0]
        else:
            n = self.n_samples()
            order = self.rng.permutation(n)
            n_held = max(1, min(most, int(round(share * n))))
            if n - n_held < n_splits:
                raise ValueError(f"data: {n} samples are too few to hold {n_held} out and "
                                 f"fit {n_splits} learners on disjoint shares")
            self.train = order[n_held:]
            held = self.take(order[:n_held])
        held = held.load() if self.labelled else held
        shape = tuple(held.shape)
        observed = self.rng.random(shape) >= hidden
        if self.labelled:
            observed = xr.DataArray(observed, dims=held.dims, coords=held.coords)
        return held, observed

    def pass_batches(self, batch_size: int, p: int, lo: float = 0.0, hi: float = 1.0, *,
                     n_splits: int) -> Iterable:
        """The batches of pass ``p`` from share ``lo`` to ``hi`` of it, each dealt into
        ``n_splits`` disjoint shares (every ``n_splits``-th sample)."""
        if not self.array:
            batches = self.data[1:]
            for batch in batches[round(lo * len(batches)):round(hi * len(batches))]:
                if len(batch) >= n_splits:  # every learner gets a sample at least
                    yield tuple(batch[i::n_splits] for i in range(n_splits))
            return
        # each pass's order from the seed and the pass alone: a worker that runs a pass
        # (client=) draws the order the sequential run draws
        order = np.random.default_rng([self.seed, p]).permutation(self.train)
        starts = range(0, len(order), batch_size)
        for start in starts[round(lo * len(starts)):round(hi * len(starts))]:
            rows = order[start:start + batch_size]
            if len(rows) >= n_splits:
                yield tuple(self.take(rows[i::n_splits]) for i in range(n_splits))

    def fit_kwargs(self, modes: Any) -> dict:
        if self.labelled:
            return {"sample_dim": self.sample_dim, "modes": modes}
        return {"modes": modes}


def _train_pass(alive: list, batches: Iterable, source: _Source, verbose: bool) -> None:
    """Every live candidate learns from each batch as it is read (one read for all)."""
    progress = None
    if verbose:
        from tqdm.auto import tqdm

        progress = tqdm(desc=f"select ({len(alive)} candidates)", unit="batch")
    for shares in batches:
        for c in alive:
            _step(c, shares, source)
        if progress is not None:
            progress.update(1)
    if progress is not None:
        progress.close()


def _step(c: _Candidate, shares: tuple, source: _Source) -> None:
    start = time.perf_counter()
    for learner, batch in zip(c.learners, shares, strict=True):
        kwargs = {} if learner._fitted else source.fit_kwargs(c.modes)
        learner.partial_fit(batch, **kwargs)
    c.seconds += time.perf_counter() - start


def _rungs(n_passes: int, max_passes: int,
           first_rung: float) -> list[tuple[int, float, float]]:
    """``(pass, from, to)`` shares of the passes between two scorings: ``first_rung``,
    twice that, ... to the end of the first pass, then whole passes up to ``max_passes``."""
    edges = [0.0]
    while first_rung * 2 ** (len(edges) - 1) < 1:
        edges.append(first_rung * 2 ** (len(edges) - 1))
    edges.append(1.0)
    first = [(0, lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]
    return first + [(p, 0.0, 1.0) for p in range(1, max_passes)]


def _train_on_cluster(client: Any, alive: list, source: Any, rung: tuple,
                      batch_size: int) -> None:
    """The candidates of one rung as tasks: each worker reads the rung's batches itself, in
    the same order, so every candidate learns what it learns in one process. ``source``: the
    future of the :class:`_Source` scattered to every worker."""
    futures = client.map(_train_alone, alive, [source] * len(alive), [rung] * len(alive),
                         [batch_size] * len(alive), pure=False)
    for c, trained in zip(alive, client.gather(futures)):
        c.learners, c.seconds = trained.learners, trained.seconds


def _train_alone(c: _Candidate, source: _Source, rung: tuple,
                 batch_size: int) -> _Candidate:
    for shares in source.pass_batches(batch_size, *rung, n_splits=len(c.learners)):
        _step(c, shares, source)
    return c


class _HeldOut:
    """The held-out samples and what every candidate's scoring shares, computed once per
    data split: the entries as numbers in the data's axis order, the hidden entries, and
    the squared norms of all entries and of the hidden ones per sample."""

    def __init__(self, data: Any, observed: Any, source: _Source):
        self.data, self.observed, self.labelled = data, observed, source.labelled
        if self.labelled:
            self.dims = data.dims
            x, hidden = data.values, ~observed.values
            sample_axis = data.dims.index(source.sample_dim)
        else:
            x, hidden, sample_axis = to_numpy(data), ~observed, 0
        self.x, self.hidden = x, hidden
        self.axes = tuple(a for a in range(x.ndim) if a != sample_axis)
        squares = x ** 2
        self.norm_all = np.sum(squares, axis=self.axes)
        self.norm_hidden = np.sum(np.where(hidden, squares, 0.0), axis=self.axes)
        if not (np.sum(self.norm_all) > 0 and np.sum(self.norm_hidden) > 0):
            raise ValueError("data: the held-out samples (or their hidden entries) are all "
                             "zero: nothing to score; hold out more (holdout=, hidden=)")

    def squared_errors(self, model: Any, masked: bool) -> np.ndarray:
        """Per sample: the squared error of all entries coded from all of them
        (``masked=False``), or of the hidden entries predicted from the others."""
        estimate = model.reconstruct(self.data, mask=self.observed if masked else None)
        if self.labelled:
            estimate = estimate.transpose(*self.dims).values
        squares = (self.x - to_numpy(estimate)) ** 2
        if masked:
            squares = np.where(self.hidden, squares, 0.0)
        return np.sum(squares, axis=self.axes)

    def relative(self, errors: np.ndarray, masked: bool) -> tuple[float, float]:
        """The relative error of the held-out samples, ``sum(errors) / sum(norms)`` (a
        ratio of totals: a dark image patch, of almost no norm, would dominate a mean of
        per-sample ratios), and its standard error (delta method)."""
        norms = self.norm_hidden if masked else self.norm_all
        ratio = float(np.sum(errors) / np.sum(norms))
        m = len(norms)
        if m < 2:
            return ratio, 0.0
        residuals = errors - ratio * norms
        return ratio, float(np.sqrt(np.sum(residuals ** 2) / (m * (m - 1))) / np.mean(norms))


def _scores(c: _Candidate, held: _HeldOut, summary: Any) -> dict:
    """Held-out and imputation errors and their standard errors (of the learners' mean
    squared errors per sample), replicability per component and summarized, the state's
    bytes (of one learner)."""
    scores = {}
    for name, masked in (("heldout", False), ("imputation", True)):
        errors = np.mean([held.squared_errors(m, masked) for m in c.learners], axis=0)
        scores[name], scores[f"{name}_se"] = held.relative(errors, masked)
    components = _pairwise_match(c.learners)
    return {**scores, "components": components,
            "replicability": float(summary(components)),
            "bytes": sum(_nbytes(m) for m in c.learners) // len(c.learners),
            "parameters": c.rank * sum(int(U.shape[0]) for U in c.learners[0].loadings_)}


def _pairwise_match(learners: list) -> np.ndarray:
    """The factor match scores of every pair of learners (each sorted from best to worst
    component), averaged over the pairs: the ``i``-th best match of a pair, on average. With
    more than two learners, one unlucky pair moves the score less."""
    pairs = [factor_match(a.loadings_, b.loadings_)
             for i, a in enumerate(learners) for b in learners[i + 1:]]
    return np.mean(pairs, axis=0)


def _nbytes(model: Any) -> int:
    leaves = list(model.loadings_) + list((model.statistics_ or {}).values())
    return int(sum(to_numpy(x).nbytes for x in leaves if hasattr(x, "shape")))


def _improvement(c: _Candidate) -> float:
    """How much of itself the imputation error fell per pass between the last two
    scorings (inf before the second)."""
    if len(c.history) < 2:
        return np.inf
    (p0, e0), (p1, e1) = c.history[-2:]
    return max(e0 - e1, 0.0) / (p1 - p0) / max(e1, np.finfo(float).tiny)


def _reach(c: _Candidate) -> float:
    """The error the candidate would reach improving ``REACH_PASSES`` more passes at its
    last rate: -inf before its second scoring (nothing says yet that it has stopped)."""
    if len(c.history) < 2:
        return -np.inf
    error = c.history[-1][1]
    return error - REACH_PASSES * _improvement(c) * error


def _rank_replicability(candidates: list, tolerance: float) -> dict[int, tuple[float, bool]]:
    """Per rank: the replicability of its candidates averaged over the groupings that fit
    best at that rank (imputation error within one standard error, or ``tolerance`` times,
    of the rank's best: a grouping that fits worse, too constrained or stalled, says
    nothing of the data's rank), of those scored after a whole pass when there are any; and
    whether one was."""
    per_rank: dict[int, list] = {}
    for c in candidates:
        if c.scores:
            per_rank.setdefault(c.rank, []).append(c)
    out = {}
    for rank, scored in per_rank.items():
        settled = [c for c in scored if c.passes >= 1]
        pool = settled or scored
        best = min(pool, key=lambda c: c.scores["imputation"])
        bar = best.scores["imputation"] + max(best.scores["imputation_se"],
                                             tolerance * best.scores["imputation"])
        fitting = [c.scores["replicability"] for c in pool if c.scores["imputation"] <= bar]
        out[rank] = (float(np.mean(fitting)), bool(settled))
    return out


def _held_ranks(ranks: Any, replicable: Any, settled: Any) -> np.ndarray:
    """Per rank (in any order): whether the data hold it, i.e. it replicates and no smaller
    rank failed to (a rank that does not replicate after a whole pass, ``settled``, ends the
    ranks the data hold: a larger one that happens to replicate is chance). The one rule of
    the halving (:func:`_eligible`) and of the choice (:func:`_choose`)."""
    ranks, replicable = np.asarray(ranks), np.asarray(replicable, bool)
    failed = ranks[np.asarray(settled, bool) & ~replicable]
    return replicable & (ranks < (failed.min() if failed.size else np.inf))


def _eligible(candidates: list, minimum: float, tolerance: float) -> dict[int, bool]:
    """Per candidate (by ``id``): whether its rank is one the data hold (:func:`_held_ranks`,
    from :func:`_rank_replicability`)."""
    by_rank = _rank_replicability(candidates, tolerance)
    ranks = list(by_rank)
    held = _held_ranks(ranks, [by_rank[r][0] >= minimum for r in ranks],
                       [by_rank[r][1] for r in ranks])
    held_by_rank = dict(zip(ranks, held))
    return {id(c): bool(held_by_rank.get(c.rank, False)) for c in candidates}


def _prune(candidates: list, tolerance: float, minimum: float) -> None:
    """Keep the best candidate; the smaller ones (in parameters) than the rule's current
    choice that are within the rule's bar, or still improving fast enough to reach it; and
    the larger ones still improving fast enough to beat the choice by the rule's margin.
    Steered by the rule: among the eligible candidates when there are any; when only
    candidates already dropped are eligible, nothing is dropped."""
    alive = [c for c in candidates if c.alive]
    if len(alive) < 2:
        return
    eligible = _eligible(candidates, minimum, tolerance)
    means = np.array([c.scores["imputation"] for c in alive])
    sizes = np.array([c.scores["parameters"] for c in alive])
    replicable = np.array([eligible[id(c)] for c in alive])
    if not replicable.any() and any(eligible.values()):
        # the ranks the data hold were all dropped while a larger rank led, and that rank
        # no longer replicates: its candidates may still be converging (their replicability
        # rises over the passes), so none is dropped until the rule has a choice in the
        # running again
        return
    pool = np.where(replicable, means, np.inf) if replicable.any() else means
    best = int(np.argmin(pool))
    se = alive[best].scores["imputation_se"]
    bar = means[best] + max(se, tolerance * means[best])
    tied = np.flatnonzero(pool <= bar)
    choice = tied[np.lexsort((means[tied], sizes[tied]))[0]]
    for i, c in enumerate(alive):
        if sizes[i] <= sizes[choice]:  # what the rule prefers, if it gets there
            c.alive = i == best or _reach(c) <= bar
        else:  # a larger one, before its second scoring, as far as it has got
            reach = means[i] if len(c.history) < 2 else _reach(c)
            c.alive = i == best or reach * (1 + tolerance) + se < means[choice]


def _result(candidates: list, modes: list, ranks: list, minimum: float,
            tolerance: float, summary: str) -> Selection:
    groupings = [_grouping_text(m) for m in modes]
    n_comp = max(ranks)
    shape = (len(groupings), len(ranks))
    table = {name: np.full(shape, np.nan) for name in (
        "imputation_error", "imputation_se", "heldout_error", "heldout_se", "replicability",
        "fit_seconds", "state_bytes", "n_parameters", "passes")}
    finalist = np.zeros(shape, bool)
    per_component = np.full((*shape, n_comp), np.nan)
    for c in candidates:
        i, j = groupings.index(c.grouping), ranks.index(c.rank)
        s = c.scores
        values = {"imputation_error": s["imputation"], "imputation_se": s["imputation_se"],
                  "heldout_error": s["heldout"], "heldout_se": s["heldout_se"],
                  "replicability": s["replicability"],
                  "fit_seconds": c.seconds, "state_bytes": s["bytes"],
                  "n_parameters": s["parameters"], "passes": c.passes}
        for name, value in values.items():
            table[name][i, j] = value
        per_component[i, j, :c.rank] = s["components"]
        finalist[i, j] = c.alive
    coords = {"grouping": groupings, "rank": ranks}
    ds = xr.Dataset({name: (("grouping", "rank"), v) for name, v in table.items()},
                    coords=coords)
    ds["replicability_per_component"] = (("grouping", "rank", "component"), per_component)
    ds["replicable"] = ds["replicability"] >= minimum
    by_rank = _rank_replicability(candidates, tolerance)
    ds["rank_replicability"] = ("rank", [by_rank[r][0] for r in ranks])
    ds["rank_replicable"] = ds["rank_replicability"] >= minimum
    ds["finalist"] = (("grouping", "rank"), finalist)
    ds.attrs.update(min_replicability=minimum, tolerance=tolerance, replicability=summary)
    chosen, rule = _choose(ds, tolerance)
    ds.attrs["rule"] = rule
    ds.attrs["chosen_grouping"], ds.attrs["chosen_rank"] = chosen
    return Selection(ds, {"grouping": chosen[0], "modes": modes[groupings.index(chosen[0])],
                          "n_components": int(chosen[1])})


def _choose(ds: xr.Dataset, tolerance: float) -> tuple[tuple[str, int], str]:
    """The rule: fewest parameters within one SE (or ``tolerance`` times) of the best
    imputation error, among the finalists (the candidates not dropped) at the ranks the data
    hold (see :func:`_eligible`); when no finalist is at one, among the candidates at those
    ranks that halving dropped."""
    # a rank replicates when its best-fitting groupings do on average; the first rank that
    # does not (after a whole pass) ends the ranks the data hold
    settled = (ds["passes"] >= 1).any("grouping")
    eligible = ds["rank_replicable"].copy(data=_held_ranks(
        ds["rank"].values, ds["rank_replicable"].values, settled.values))
    pool = ds["finalist"] & eligible
    rule = (f"fewest parameters within one SE (or {tolerance:g} times) of the best "
            f"imputation error, among replicable ranks")
    if not bool(pool.any()) and bool(eligible.any()):
        # halving dropped them while a larger candidate, replicable then, led; it stopped
        # replicating later: a rank the data hold beats the finalists past it
        pool, rule = eligible, rule.replace("among replicable ranks", "no finalist at a "
                                            "replicable rank: among the ones dropped, as "
                                            "scored when dropped")
    elif not bool(pool.any()):
        pool, rule = ds["finalist"], rule.replace("among replicable ranks", "none replicable: "
                                                  "among all")
    error = ds["imputation_error"].where(pool)
    best = error.argmin(dim=("grouping", "rank"))
    lowest = float(error.isel(best))
    bar = lowest + max(float(ds["imputation_se"].isel(best)), tolerance * lowest)
    within = pool & (ds["imputation_error"] <= bar)
    stacked = ds[["n_parameters", "imputation_error"]].where(within).stack(c=("grouping",
                                                                            "rank"))
    stacked = stacked.dropna("c", subset=["n_parameters"])
    order = np.lexsort((stacked["imputation_error"].values, stacked["n_parameters"].values))
    pick = stacked.isel(c=int(order[0]))
    return (str(pick["grouping"].values), int(pick["rank"].values)), rule


class Grouped:
    """A learner that regroups its input by ``modes``: scikit-learn's model selection
    (``GridSearchCV``, ``cross_val_score``, pipelines) can then search the grouping like any
    other parameter.

    Parameters
    ----------
    learner : OnlineLearner
        The learner to fit (cloned by ``fit``; its parameters are searched as
        ``learner__n_components`` and so on).
    modes : list or str, optional
        The grouping ``fit`` gives the learner (see :mod:`tensorstream.modes`); None keeps
        every axis a mode.

    Attributes
    ----------
    learner_ : OnlineLearner
        The fitted clone.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.model_selection import GridSearchCV
    >>> from tensorstream import OnlineCPDL
    >>> X = np.random.default_rng(0).random((60, 4, 3, 2))
    >>> search = GridSearchCV(Grouped(OnlineCPDL(2, max_iter=1, random_state=0)),
    ...                       {"modes": ["0;1;2", "0,1;2"], "learner__n_components": [1, 2]},
    ...                       cv=2).fit(X)
    >>> sorted(search.best_params_)
    ['learner__n_components', 'modes']
    """

    def __init__(self, learner: Any, modes: Any = None):
        self.learner = learner
        self.modes = modes

    def get_params(self, deep: bool = True) -> dict:
        """``learner`` and ``modes``, and with ``deep`` the learner's as ``learner__name``."""
        params = {"learner": self.learner, "modes": self.modes}
        if deep and hasattr(self.learner, "get_params"):
            params.update({f"learner__{k}": v for k, v in self.learner.get_params().items()})
        return params

    def set_params(self, **params: Any) -> Grouped:
        """Set ``learner``, ``modes`` or the learner's ``learner__name``."""
        unknown = [n for n in params if n not in ("learner", "modes")
                   and not n.startswith("learner__")]
        if unknown:  # refused before anything is set: nothing half-changed
            raise ValueError(f"invalid parameter {unknown[0]!r} for Grouped; valid parameters "
                             f"are 'learner', 'modes' and the learner's as 'learner__name'")
        nested = {k.split("__", 1)[1]: v for k, v in params.items() if k.startswith("learner__")}
        for name in ("learner", "modes"):
            if name in params:
                setattr(self, name, params[name])
        if nested:
            self.learner.set_params(**nested)
        return self

    def __repr__(self) -> str:
        return f"Grouped({self.learner!r}, modes={self.modes!r})"

    def __sklearn_is_fitted__(self) -> bool:
        return "learner_" in self.__dict__

    def __sklearn_tags__(self) -> Any:
        return self.learner.__sklearn_tags__()  # what the learner takes, it takes

    def _fitted(self) -> Any:
        if "learner_" not in self.__dict__:
            from .learners._params import NotFittedError

            raise NotFittedError("this Grouped learner is not fitted yet; call fit first")
        return self.learner_

    def fit(self, X: Any, y: Any = None, **fit_params: Any) -> Grouped:
        """Fit a clone of the learner on ``X`` regrouped by ``modes``."""
        learner = type(self.learner)(**self.learner.get_params())
        learner.fit(X, **({} if self.modes is None else {"modes": self.modes}), **fit_params)
        self.learner_ = learner
        return self

    def partial_fit(self, X: Any, y: Any = None, **fit_params: Any) -> Grouped:
        """Learn from one batch (the first one clones the learner)."""
        learner = self.__dict__.get("learner_") or type(self.learner)(
            **self.learner.get_params())
        first = "learner_" not in self.__dict__
        grouping = {"modes": self.modes} if first and self.modes is not None else {}
        learner.partial_fit(X, **grouping, **fit_params)
        self.learner_ = learner
        return self

    def transform(self, X: Any, **kwargs: Any) -> Any:
        """The fitted learner's codes of ``X``."""
        return self._fitted().transform(X, **kwargs)

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """``fit(X)`` then ``transform(X)``."""
        return self.fit(X, **fit_params).transform(X)

    def inverse_transform(self, codes: Any) -> Any:
        """Samples from codes, in the axes ``X`` was given in."""
        return self._fitted().inverse_transform(codes)

    def score(self, X: Any, y: Any = None, **kwargs: Any) -> float:
        """The fitted learner's score (minus the mean coding objective)."""
        return self._fitted().score(X, **kwargs)
