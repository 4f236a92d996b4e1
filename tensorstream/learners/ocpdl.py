"""OnlineCPDL: online (nonnegative) CP-dictionary learning, Lyu, Strohmeier & Needell.

The bounded-memory form of the algorithm (Algorithm 2, Appendix C). Per mini-batch ``X_t``:

1. code the batch against the current dictionary (nonnegative LASSO, solved exactly by an
   active-set method, :mod:`tensorstream.coders.lasso`, or with ``batch_size >= 256`` by ADMM
   in the code space to a tolerance: ``coder``);
2. fold the batch into the running statistics with weight ``w_t``::

       A_t = (1 - w_t) A_{t-1} + w_t H_t^T H_t / b            (R x R)
       B_t = (1 - w_t) B_{t-1} + w_t sum_j X_j o H_t[j] / b   (I_1 x ... x I_n x R)
       c_t = (1 - w_t) c_{t-1} + w_t mean_j(||X_j||^2 + 2 alpha ||h_j||_1 + ridge ||h_j||^2)

3. one block-coordinate pass over the loadings on the surrogate ``tr(A G) - 2 <B, W> + c``,
   each loading moving at most ``rho_t`` (the search radius) (:mod:`tensorstream.steps.surrogate`).

Losses are per-sample means, so batches of different sizes weigh correctly and the surrogate is
on the same scale as :meth:`OnlineCPDL.score`. They are written as the paper writes them, without
the 1/2: twice ``1/2 ||x - W h||^2 + alpha ||h||_1 + ridge/2 ||h||^2``, the objective that the
user's ``alpha`` and ``ridge`` weigh against (the convention of every learner). Memory is
``O(R prod(I_k))`` whatever the number of samples seen.

The learner is a thin shell: :class:`~tensorstream.algorithms.surrogate_cp.SurrogateCP` is the
algorithm above as a configuration of the engine (:func:`tensorstream.engine.online_step` runs
it). The squared loss only: CP dictionaries under another divergence (KL for counts, IS, beta,
Huber, ...) are :class:`~tensorstream.learners.divergence_nmf.OnlineDivergenceNMF`'s, which takes
tensor samples as well as matrices.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..algorithms.surrogate_cp import SurrogateCP, SurrogateOptions
from ..core.backend import using
from ..core.validation import (
    BOOLEAN,
    CALLABLE,
    NONE,
    SEQUENCE,
    Instance,
    Interval,
    Options,
    refuse_set_by_hand,
)
from ..schedules import make_radius, make_weights
from ..steps.surrogate import surrogate_value
from ._base import OnlineLearner
from ._params import SHARED_CONSTRAINTS

DICT_STEPS = ("auto", "columns", "fista")
"""The values of ``dict_step`` (``"auto"``: ``"columns"``)."""


class OnlineCPDL(OnlineLearner):
    """Online CP-dictionary learning from a stream of tensor-valued samples.

    Learns loadings ``U^(k)`` of shape ``(I_k, R)`` so that every sample ``X_j`` (shape
    ``(I_1, ..., I_n)``) is close to ``sum_r h_jr U^(1)[:, r] o ... o U^(n)[:, r]`` with sparse
    (and, by default, nonnegative) codes ``h_j``. With one data mode (``X`` of shape
    ``(n_samples, n_features)``) this is online NMF / dictionary learning.

    Parameters
    ----------
    n_components : int
        Number of rank-one atoms ``R``.
    alpha : float, default 0.0
        l1 penalty on the codes, weighed against half the squared error, as in scikit-learn
        and every other learner: each code minimises ``1/2 ||x - W h||^2 + alpha ||h||_1 +
        ridge/2 ||h||^2`` (the paper's eq. (9) has no 1/2: its ``lambda`` is ``2 * alpha``;
        the paper's image/video values are scikit-learn alphas, ``alpha = prod(I) *
        sklearn_alpha``).
    ridge : float, default 0.0
        Squared l2 penalty on the codes; > 0 makes codes unique (the theory's assumption A4).
    weights : "balanced", float or callable, default 0.5
        Schedule ``w_t``: ``"balanced"`` is ``1/t`` (the paper's choice), a float ``beta`` is
        ``t^-beta``, a callable maps ``t = 1, 2, ...`` to ``w_t`` in (0, 1] (see
        :mod:`tensorstream.schedules` for ``PowerLog`` and ``Forgetting``). The default
        ``t^-0.5`` won a measurement (``benchmarks/bench_cp.py``, ``docs/ocpdl.md``): under
        ``1/t`` the first, poor dictionaries weigh as much as the latest ones, so the error
        creeps down over many passes (a planted 20000 x 30 x 30 rank-5 tensor: 1.4x TensorLy
        HALS's error after 10 passes; with ``t^-0.5``, within 3% of it in under a pass). Of
        ``1/t``, ``t^-0.75``, ``t^-0.6`` and ``t^-0.5`` it was the best on every tensor
        measured. It is outside the paper's assumption A3, which ``"balanced"`` and
        ``PowerLog`` satisfy.
    search_radius : None, float or callable, default None
        ``None``: unrestricted loading updates. A float ``c'``: each loading moves by at most
        ``c' w_t`` per step (the paper's restriction that the convergence proof needs). A callable
        maps ``t`` to the radius (e.g. ``schedules.ReferenceRadius``).
    radius_mode : {"frobenius", "column"}, default "frobenius"
        Bound the Frobenius norm of each loading's step (paper), or of each column's step
        (the reference code's variant; a loading then moves by at most ``sqrt(R)`` radii).
        Without a ``search_radius`` another value than the default is refused.
    nonnegative : bool, default True
        Nonnegative loadings and codes (requires nonnegative data).
    column_bound : float or None, default 1.0
        Bound on the Euclidean norm of every loading column (keeps the dictionary in a compact
        set; codes carry the scale). ``None`` leaves columns unbounded.
    missing : {None, "nan"}, default None
        ``"nan"``: NaN entries of the data are missing. Missing entries (these, and those a
        ``mask`` marks) never influence anything: codes and statistics use the observed
        entries only (the statistic ``A`` then becomes entrywise, ``(I_1..I_n, R, R)``).
    batch_size : int, default 32
        Samples per mini-batch when ``fit`` is given an array.
    max_iter : int or "auto", default "auto"
        Passes over an array given to ``fit``; ``"auto"``: 10, or more on a small array so
        that ``fit`` takes at least 200 mini-batches (at most 200 passes; see
        :func:`~tensorstream.learners._fitting.fit_passes`).
    init : "random" or list of arrays, default "random"
        Initial loadings: i.i.d. uniform [0, 1) entries projected on the constraint set, or
        the given ``(I_k, R)`` matrices.
    dict_step : {"auto", "columns", "fista"}, default "auto"
        The dictionary step. ``"columns"`` (``"auto"``): passes of exact column minimisation
        per mode, a Gauss-Seidel sweep whose backend calls grow with the rank. ``"fista"``:
        accelerated projected gradient on each loading, all columns at once (a few matrix
        products per iteration, as many calls at any rank). Measured on numpy
        (``benchmarks/bench_cp.py``, ``docs/ocpdl.md``) the column sweep reached the same errors
        sooner, so it stays the default.
    dict_passes : int or None, default None
        Passes of the dictionary step per mode and step, at most: column passes
        (``"columns"``, and with missing data whatever ``dict_step``) or FISTA iterations.
        ``None``: 1 column pass (the reference code's) or 20 FISTA iterations.
    dict_tol : float or None, default None
        Stops a mode's passes once one moves the loading by less than ``dict_tol`` times its
        norm (0: every pass runs). ``None``: 0 for the column passes, ``1e-3`` for FISTA.
    code_max_iter : int, default 300
        Iteration cap of the coder, for each sample: pivoting rounds (exact codes take a few;
        the cap only matters on degenerate problems) or ADMM iterations.
    code_tol : float or None, default None
        Tolerance of the coder, per sample. Pivoting: its optimality test, relative (see
        :func:`tensorstream.coders.lasso.sparse_code`); ADMM: the move of its iterate relative
        to the code (:func:`tensorstream.coders.robust.nonnegative_code_admm`). ``None``:
        ``1e-5`` for pivoting, ``1e-2`` for ADMM. ``transform`` and ``score`` code exactly
        (by pivoting) at ``code_tol`` unless ``coder="admm"``.
    coder : {"auto", "pivoting", "admm"}, default "auto"
        The coder. ``"pivoting"``: the exact lasso solver, block principal
        pivoting (:func:`tensorstream.coders.lasso.sparse_code`).
        ``"admm"``: ADMM in the code space, vectorised over the batch
        (:func:`tensorstream.coders.robust.nonnegative_code_admm`, :class:`OnlineNMF`'s coder:
        a few ``R x R`` products per iteration, each sample to its tolerance ``code_tol``, at
        most ``code_max_iter`` iterations); nonnegative codes only. ``"auto"``: ADMM in
        training steps when the codes are nonnegative and ``batch_size >= 256``
        (:data:`~tensorstream.algorithms.surrogate_cp.ADMM_BATCH`), pivoting otherwise and in
        ``transform`` and ``score``. Pivoting solves each sample's system in turn, at a cost
        growing as ``R^3``; ADMM's products grow with the batch. On 20 x 20 x 3 image patches at
        rank 24 ADMM took 0.55x pivoting's time at batches of 256 and 0.47x at 512 for the same
        held-out error; at ranks 5 and 10 they tie (0.97-1.03x), and below 256 pivoting is as fast
        or faster there (at rank 24 ADMM already pays from 64: 0.72-0.87x; docs/ocpdl.md, "The
        coder"). Masked batches are always coded by pivoting (each sample has its own Gram).
    random_state : int, Generator or None
        Seed of the initialisation and of the shuffling in ``fit``.
    backend : {"numpy", "pytorch", None}, default None
        TensorLy backend; ``None`` takes it from the first batch (a torch tensor runs on
        pytorch, on its device and dtype). Numpy input is converted to the learner's backend.
    verbose : bool, default False
        Show a progress bar in ``fit``.
    callback : callable, optional
        ``callback(learner, info)`` after every step; returning True stops ``fit``.
    reinit_dead_atoms : bool, default True
        Re-initialise dead atoms (no active code for many steps, or a zero loading column)
        from the batch's worst-explained samples, with a ``LearningWarning``, but give up an
        atom that dies again after two re-initialisations with no active code in between
        (warned once); False only warns (see the user guide's "Out of the box" page).
    device : str, torch.device or None, default None
        Where to compute: ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a ``torch.device`` runs on
        the pytorch backend there (every batch, of any kind, moved there as it is validated;
        the state kept there); ``None``: where the data are (see ``docs/devices.md``).
    n_threads : int or None, default 1
        BLAS/OpenMP and PyTorch threads inside the public methods
        (:func:`tensorstream.core.backend.limit_threads`; ``None``: the libraries' own).

    Attributes
    ----------
    loadings_ : list of tensors of shape (I_k, n_components)
    statistics_ : dict with ``A`` (R, R), ``B`` (I_1, ..., I_n, R) and ``c`` (float)
    n_steps_ : int
    n_samples_seen_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from tensorstream import OnlineCPDL
    >>> X = np.random.default_rng(0).random((100, 6, 5, 4))
    >>> model = OnlineCPDL(3, batch_size=10, max_iter=2, random_state=0).fit(X)
    >>> [U.shape for U in model.loadings_]
    [(6, 3), (5, 3), (4, 3)]
    >>> model.transform(X[:2]).shape
    (2, 3)
    """

    def __init__(self, n_components: int, *, alpha: float = 0.0, ridge: float = 0.0,
                 weights=0.5, search_radius=None, radius_mode: str = "frobenius",
                 nonnegative: bool = True, column_bound: float | None = 1.0,
                 missing: str | None = None,
                 batch_size: int = 32, max_iter: int | str = "auto", init="random",
                 dict_step: str = "auto", dict_passes: int | None = None,
                 dict_tol: float | None = None, code_max_iter: int = 300,
                 code_tol: float | None = None,
                 coder: str = "auto", random_state=None,
                 backend: str | None = None, device: Any = None,
                 verbose: bool = False, callback=None,
                 reinit_dead_atoms: bool = True, n_threads: int | None = 1):
        super().__init__(n_components, batch_size=batch_size, max_iter=max_iter, init=init,
                         code_max_iter=code_max_iter, code_tol=code_tol, random_state=random_state,
                         backend=backend, device=device, verbose=verbose, callback=callback,
                         reinit_dead_atoms=reinit_dead_atoms, n_threads=n_threads)
        self.alpha = alpha
        self.ridge = ridge
        self.weights = weights
        self.search_radius = search_radius
        self.radius_mode = radius_mode
        self.nonnegative = nonnegative
        self.column_bound = column_bound
        self.missing = missing
        self.dict_step = dict_step
        self.dict_passes = dict_passes
        self.dict_tol = dict_tol
        self.coder = coder

    # -- configuration -------------------------------------------------------------------------

    def _algorithm(self) -> SurrogateCP:
        """The algorithm's options from the parameters: the one place they pass from the
        estimator to :class:`~tensorstream.algorithms.surrogate_cp.SurrogateCP`."""
        return SurrogateCP(SurrogateOptions(
            n_components=self.n_components, init=self.init, alpha=self.alpha,
            ridge=self.ridge, weights=self.weights, search_radius=self.search_radius,
            radius_mode=self.radius_mode, nonnegative=self.nonnegative,
            column_bound=self.column_bound,
            batch_size=self._batch_size(),
            coder=self.coder, code_max_iter=self.code_max_iter, code_tol=self.code_tol,
            dict_step=self.dict_step, dict_passes=self.dict_passes,
            dict_tol=self.dict_tol))

    _parameter_constraints = {
        **SHARED_CONSTRAINTS,
        "alpha": [Interval("real", 0, None)],
        "ridge": [Interval("real", 0, None)],
        "weights": [Instance("a schedule name", str), Interval("real", 0, 1, closed="right"),
                    CALLABLE],
        "search_radius": [NONE, Interval("real", 0, None, closed="neither"), CALLABLE],
        "radius_mode": [Options("frobenius", "column")],
        "nonnegative": [BOOLEAN],
        "column_bound": [Interval("real", 0, None, closed="neither"), NONE],
        "init": [Options("random"), SEQUENCE],
        "dict_step": [Options(*DICT_STEPS)],
        "dict_passes": [Interval("int", 1, None), NONE],
        "dict_tol": [Interval("real", 0, None), NONE],
        "code_tol": [Interval("real", 0, None), NONE],
        "coder": [Options("auto", "pivoting", "admm")],
    }

    def _check_rules(self) -> None:
        if self.coder == "admm" and not self.nonnegative:
            raise ValueError("coder='admm' codes nonnegative codes only; with nonnegative=False "
                             "use coder='pivoting' (or 'auto')")
        check_radius(self.search_radius, self.weights, self._set_by_hand("radius_mode"))

    def _nonnegative_data(self) -> bool:
        """Nonnegative data for a nonnegative model."""
        return bool(self.nonnegative)

    # -- results -------------------------------------------------------------------------------

    def _coding_algorithm(self) -> SurrogateCP:
        """The coding step of ``transform`` and ``score``: the exact coder at ``code_tol``
        (ADMM only when ``coder="admm"`` was asked for: there the codes are the result)."""
        algorithm = self._algorithm()
        if algorithm.options.coder != "auto":
            return algorithm
        return SurrogateCP(dataclasses.replace(algorithm.options, coder="pivoting"))

    def surrogate_value(self) -> float:
        """The surrogate ``f_t`` (per-sample scale) at the current dictionary."""
        stats = self.statistics_
        with using(self.backend_):
            return surrogate_value(stats["A"], stats["B"], stats["c"], self.loadings_)


def check_radius(search_radius: Any, weights: Any, set_by_hand: dict) -> None:
    """The search radius's parameters, checked: the schedule it is built from, and no
    ``radius_mode`` set by hand (``set_by_hand``) without a radius to measure (refused naming
    both)."""
    if search_radius is None:
        refuse_set_by_hand(set_by_hand, "says how the search radius is measured, which "
                           "search_radius=None (unrestricted steps) does not have",
                           "give a search_radius", "search_radius=None")
    make_radius(search_radius, make_weights(weights))
