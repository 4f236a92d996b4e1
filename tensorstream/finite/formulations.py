"""The stochastic matrix-factorization formulations of Zhao, Haskell & Feng (2017, P1-P8).

Every formulation is the per-sample problem

    l(x, W) = min_{h in H, r in R}  1/2 ||x - W h - r||^2 + phi(h) + varphi(r)

plus a dictionary term ``psi(W) + delta_C(W)``, and is given by three proximal maps
(in closed form): ``prox_h(Z, L)`` (of ``phi/L + delta_H``), ``prox_r(Z)`` (of ``varphi + delta_R``;
zero for the non-robust ones, R = {0}) and ``prox_w(W, eta, n)`` (of ``eta psi + delta_C``; the
``1/n`` of ``psi`` for P5-P7 is applied here, docs/svrmf.md). They are the library's shared
operators (:mod:`tensorstream.core.constraints`, :func:`tensorstream.coders.maxnorm.group_shrink`),
not new ones; the P4 dictionary prox (no closed form) is a projected-gradient solve.

Layout: samples first. ``X`` is ``(b, d)``, the dictionary ``W`` is ``(d, k)`` (the learners'
``components_`` is its transpose), codes ``H`` are ``(b, k)`` and outliers ``R`` are ``(b, d)``.

:func:`solve_codes` computes the codes of a batch by FISTA (or ISTA, the paper's BSUM) on the
*reduced* problem ``min_h M_varphi(x - W h) + phi(h)`` (paper's eqs. 5-6): ``M`` is the Moreau
envelope, so the r-block is minimised exactly at every step and one ISTA step is one BSUM sweep
(eqs. 5-6). It starts cold from ``h = 0`` and stops sample by sample (a stopped sample is frozen),
so a sample's codes depend on that sample and ``W`` only, never on the rest of the batch: the
snapshot codes recomputed for a mini-batch equal those of the full pass (lines 4 and 8).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorly as tl

from ..coders.maxnorm import group_shrink
from ..core.constraints import (
    project_columns,
    project_simplex_columns,
    prox_l1_box,
    prox_max_row_norm,
    soft_threshold,
)
from ..core.dictionary import spectral_norm_psd
from ..core.products import narrow_dot
from ..core.validation import (
    ARRAY,
    BOOLEAN,
    NONE,
    Instance,
    Interval,
    check_nonnegative_number,
    check_positive_number,
    refuse_unknown_keys,
    validate_params,
)

Tensor = Any
_TINY = 1e-300

__all__ = [
    "FORMULATIONS", "FORMULATION_PARAMS", "FiniteCodes", "Formulation", "LRR", "MaxNormMD",
    "NMF", "RobustNMF", "RobustPCA", "SmoothSparseDL", "SparseDL", "StructuredSparseDL",
    "check_formulation_params", "make_formulation", "sample_losses", "solve_codes",
]


@dataclass(frozen=True)
class Formulation:
    """Base of the formulations: plain least squares (``H = R^k``, ``C = R^{d x k}``).

    Subclasses override the proximal maps and penalty values they change. ``nu`` adds the ridge
    ``nu/2 ||h||^2`` that makes the codes unique (assumption A4, which fails without it for
    P1, P2, P6 and P8); 0 by default.
    """

    nu: float = 0.0

    name = "ls"
    robust = False  #: has an outlier block r
    nonnegative = False  #: W >= 0 and h >= 0 (data should be nonnegative)

    @property
    def refuses_negative_data(self) -> bool:
        """Whether negative data are refused: a nonnegative formulation's, unless it was made
        with ``allow_negative``."""
        return self.nonnegative and not getattr(self, "allow_negative", False)

    # -- codes ---------------------------------------------------------------------------------
    def prox_h(self, Z: Tensor, L: float) -> Tensor:
        """Proximal map of ``(phi + nu/2 ||.||^2) / L + delta_H`` for every row of ``Z``."""
        return self._ridge(Z, L)

    def _ridge(self, Z: Tensor, L: float, extra: float = 0.0) -> Tensor:
        scale = 1.0 + (self.nu + extra) / L
        return Z / scale if scale != 1.0 else Z

    def prox_r(self, Z: Tensor) -> Tensor:
        """Proximal map of ``varphi + delta_R`` for every row (non-robust: ``R = {0}``)."""
        return tl.zeros(tl.shape(Z), **tl.context(Z))

    def phi(self, H: Tensor) -> Tensor:
        """Per-sample ``phi(h) + nu/2 ||h||^2``, shape ``(b,)``."""
        return 0.5 * self.nu * tl.sum(H * H, axis=1)

    def varphi(self, R: Tensor) -> Tensor:
        """Per-sample ``varphi(r)``, shape ``(b,)``."""
        return tl.sum(R * 0, axis=1)

    # -- dictionary ----------------------------------------------------------------------------
    def prox_w(self, W: Tensor, eta: float, n: int) -> Tensor:
        """Proximal map of ``eta psi + delta_C`` (``psi`` with its ``1/n``); ``eta = 0`` is the
        projection onto ``C`` (used for the initial dictionary)."""
        return W

    def psi(self, W: Tensor, n: int) -> float:
        """The dictionary term ``psi(W)`` (with its ``1/n``)."""
        return 0.0

    def in_constraint_set(self, W: Tensor, atol: float = 1e-10) -> bool:
        """Whether ``W`` lies in ``C`` (to ``atol``)."""
        return bool(tl.max(tl.abs(self.prox_w(W, 0.0, 1) - W)) <= atol)

    def prepare(self, scatter: Tensor, n: int) -> Formulation:
        """Formulation with its data-dependent parts filled in (P7 needs ``X^T X``)."""
        return self

    needs_scatter = False  #: whether :meth:`prepare` needs ``X^T X``


def _check_lam(value: Any, name: str, positive: bool = True) -> float:
    return check_positive_number(value, name) if positive else \
        check_nonnegative_number(value, name)


@dataclass(frozen=True)
class SparseDL(Formulation):
    """P1, ODL (Mairal et al.): ``phi = lam ||h||_1``, columns in the unit l2 ball."""

    lam: float = 0.1
    name = "odl"

    def prox_h(self, Z, L):
        return self._ridge(soft_threshold(Z, self.lam / L), L)

    def phi(self, H):
        return self.lam * tl.sum(tl.abs(H), axis=1) + super().phi(H)

    def prox_w(self, W, eta, n):
        return project_columns(W, nonnegative=False, column_bound=1.0)


@dataclass(frozen=True)
class StructuredSparseDL(Formulation):
    """P2, OSSL (Sprechmann et al.): ``phi = sum_j lam_j ||h_{G_j}||_2`` over disjoint groups,
    ``C = R^{d x k}``, ``psi = 0``."""

    groups: tuple = ()  #: tuple of tuples of code indices (disjoint)
    lams: tuple = ()  #: one weight per group
    name = "ossl"

    def prox_h(self, Z, L):
        blocks = [None] * tl.shape(Z)[1]
        out = Z
        for members, lam in zip(self.groups, self.lams):
            members = list(members)
            shrunk = group_shrink(Z[:, members], lam / L)
            for column, index in enumerate(members):
                blocks[index] = shrunk[:, column]
        if any(b is not None for b in blocks):
            columns = [Z[:, j] if b is None else b for j, b in enumerate(blocks)]
            out = tl.stack(columns, axis=1)
        return self._ridge(out, L)

    def phi(self, H):
        total = super().phi(H)
        for members, lam in zip(self.groups, self.lams):
            total = total + lam * tl.norm(H[:, list(members)], axis=1)
        return total


@dataclass(frozen=True)
class NMF(Formulation):
    """P3, ONMF (Guan et al.): ``h >= 0``, ``phi = lam/2 ||h||^2``, columns on the simplex."""

    lam: float = 0.1
    allow_negative: bool = False  #: accept negative data (h and W stay nonnegative)
    name = "onmf"
    nonnegative = True

    def prox_h(self, Z, L):
        return self._ridge(tl.clip(Z, 0, None), L, self.lam)

    def phi(self, H):
        return 0.5 * (self.lam + self.nu) * tl.sum(H * H, axis=1)

    def prox_w(self, W, eta, n):
        return project_simplex_columns(W)


@dataclass(frozen=True)
class SmoothSparseDL(NMF):
    """P4, SSODL (Dohmatob et al.): P3 with ``psi = lam1/2 tr(W^T Lap W)`` (``lam`` is the
    paper's ``lam2``). The prox has no closed form: projected gradient (FISTA) on every column,
    ``min_{w in simplex} 1/2 ||w - x||^2 + eta lam1/2 w^T Lap w`` (the prox of P4's psi)."""

    lam1: float = 0.1
    laplacian: Any = None  #: (d, d) symmetric PSD matrix
    prox_iter: int = 200
    prox_tol: float = 1e-12
    name = "ssodl"

    def prox_w(self, W, eta, n):
        c = eta * self.lam1
        if c == 0 or self.laplacian is None:
            return project_simplex_columns(W)
        Lap = tl.tensor(self.laplacian, **tl.context(W))
        step = 1.0 / (1.0 + c * spectral_norm_psd(Lap))
        V = project_simplex_columns(W)
        Y, t = V, 1.0
        for _ in range(self.prox_iter):
            gradient = (Y - W) + c * tl.dot(Lap, Y)
            V_new = project_simplex_columns(Y - step * gradient)
            t_new = (1 + math.sqrt(1 + 4 * t * t)) / 2
            Y = V_new + ((t - 1) / t_new) * (V_new - V)
            moved = float(tl.norm(V_new - V))
            V, t = V_new, t_new
            if moved <= self.prox_tol:
                break
        return V

    def psi(self, W, n):
        if self.laplacian is None:
            return 0.0
        Lap = tl.tensor(self.laplacian, **tl.context(W))
        return 0.5 * self.lam1 * float(tl.sum(W * tl.dot(Lap, W)))


@dataclass(frozen=True)
class _Robust(Formulation):
    """Outliers with ``varphi = lam2 ||r||_1`` (no box)."""

    lam2: float = 0.1
    robust = True

    def prox_r(self, Z):
        return soft_threshold(Z, self.lam2)

    def varphi(self, R):
        return self.lam2 * tl.sum(tl.abs(R), axis=1)


@dataclass(frozen=True)
class RobustPCA(_Robust):
    """P5, ORPCA (Feng, Xu & Yan): ``phi = lam1/2 ||h||^2``, ``psi = lam1/(2n) ||W||_F^2``."""

    lam1: float = 0.1
    name = "orpca"

    def prox_h(self, Z, L):
        return self._ridge(Z, L, self.lam1)

    def phi(self, H):
        return 0.5 * (self.lam1 + self.nu) * tl.sum(H * H, axis=1)

    def prox_w(self, W, eta, n):
        return W / (1.0 + eta * self.lam1 / n)  # the prox uses the step (Algorithm 1, line 11)

    def psi(self, W, n):
        return 0.5 * self.lam1 / n * float(tl.sum(W * W))


@dataclass(frozen=True)
class MaxNormMD(_Robust):
    """P6, OMRMD (Shen et al.): ``||h||_2 <= 1``, ``psi = lam1/(2n) ||W||_{2,inf}^2`` (largest
    row norm), prox by :func:`tensorstream.core.constraints.prox_max_row_norm`."""

    lam1: float = 0.1
    name = "omrmd"

    def prox_h(self, Z, L):
        Z = self._ridge(Z, L)
        norms = tl.norm(Z, axis=1)
        return Z / tl.reshape(tl.clip(norms, 1.0, None), (-1, 1))

    def prox_w(self, W, eta, n):
        return prox_max_row_norm(W, eta * self.lam1 / n) if eta else W

    def psi(self, W, n):
        return 0.5 * self.lam1 / n * float(tl.max(tl.sum(W * W, axis=1)))


@dataclass(frozen=True)
class LRR(RobustPCA):
    """P7, OLRR (Shen et al.): ``phi = lam1/2 ||h||^2`` and
    ``psi = (||W^T A Y||_F^2 + lam3 ||B W||_F^2) / (2 n^2)`` with ``Y`` the data (paper layout).

    ``psi`` needs the scatter ``Y Y^T`` (``X^T X`` samples-first), filled in by :meth:`prepare`
    from one pass over the data; the prox is the linear solve
    ``(I + eta Q) W = V``, ``Q = (A Y Y^T A^T + lam3 B^T B) / n^2`` (the prox of P7's psi)."""

    lam3: float = 1.0
    A: Any = None  #: (d, d); None is the identity
    B: Any = None  #: (d, d); None is the identity
    Q: Any = field(default=None, repr=False)  #: filled in by prepare
    name = "olrr"
    needs_scatter = True

    def prepare(self, scatter, n):
        d = tl.shape(scatter)[0]
        eye = np.eye(d)
        A = eye if self.A is None else np.asarray(self.A, dtype=float)
        B = eye if self.B is None else np.asarray(self.B, dtype=float)
        S = np.asarray(tl.to_numpy(scatter), dtype=float)
        Q = (A @ S @ A.T + self.lam3 * B.T @ B) / float(n) ** 2
        return dataclasses.replace(self, Q=Q)

    def prox_w(self, W, eta, n):
        if not eta or self.Q is None:
            return W
        Q = tl.tensor(self.Q, **tl.context(W))
        return tl.solve(tl.eye(tl.shape(Q)[0], **tl.context(W)) + eta * Q, W)

    def psi(self, W, n):
        if self.Q is None:
            return 0.0
        Q = tl.tensor(self.Q, **tl.context(W))
        return 0.5 * float(tl.sum(W * tl.dot(Q, W)))


@dataclass(frozen=True)
class RobustNMF(Formulation):
    """P8, ORNMF (Zhao & Tan): ``h in [0, M]^k``, ``r in [-M', M']^d``, ``varphi = lam ||r||_1``,
    ``W >= 0`` with columns in the unit ball (exact: clip, then shrink)."""

    lam: float = 0.1
    M: float = 1e3
    M_prime: float = 1e3
    allow_negative: bool = False  #: accept negative data (h and W stay nonnegative)
    name = "ornmf"
    robust = True
    nonnegative = True

    def prox_h(self, Z, L):
        return tl.clip(self._ridge(Z, L), 0, self.M)

    def prox_r(self, Z):
        return prox_l1_box(Z, self.lam, self.M_prime)

    def varphi(self, R):
        return self.lam * tl.sum(tl.abs(R), axis=1)

    def prox_w(self, W, eta, n):
        return project_columns(W, nonnegative=True, column_bound=1.0)


FORMULATIONS = {"odl": SparseDL, "ossl": StructuredSparseDL, "onmf": NMF,
                "ssodl": SmoothSparseDL, "orpca": RobustPCA, "omrmd": MaxNormMD, "olrr": LRR,
                "ornmf": RobustNMF}

#: The parameters each formulation takes (:func:`make_formulation`'s keywords, the learner's
#: ``formulation_params`` keys): its weights and data; ``nu`` (the codes' ridge) for all of
#: them, ``allow_negative`` (accept negative data) for the nonnegative ones.
FORMULATION_PARAMS = {
    "odl": ("lam", "nu"),
    "ossl": ("lam", "groups", "nu"),
    "onmf": ("lam", "nu", "allow_negative"),
    "ssodl": ("lam", "lam1", "laplacian", "nu", "allow_negative"),
    "orpca": ("lam1", "lam2", "nu"),
    "omrmd": ("lam1", "lam2", "nu"),
    "olrr": ("lam1", "lam2", "lam3", "lrr_A", "lrr_B", "nu"),
    "ornmf": ("lam", "M", "M_prime", "nu", "allow_negative"),
}


def check_formulation_params(name: str, params: Mapping | None) -> dict:
    """``params`` as a dict, every key one that formulation ``name`` takes
    (:data:`FORMULATION_PARAMS`): a weight of another formulation is refused by name rather
    than ignored.

    Examples
    --------
    >>> check_formulation_params("orpca", {"lam1": 0.1})
    {'lam1': 0.1}
    >>> check_formulation_params("odl", {"lam2": 0.1})
    Traceback (most recent call last):
    ...
    ValueError: 'lam2' does not apply to formulation 'odl': its parameters are ['lam', 'nu']
    """
    if name not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {list(FORMULATIONS)}, got {name!r}")
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(f"the parameters of formulation {name!r} must be a dict, got "
                        f"{params!r}")
    refuse_unknown_keys(params, FORMULATION_PARAMS[name], f"formulation {name!r}",
                        "parameters")
    validate_params(dict(params), {key: _VALUES[key] for key in params}, f"formulation {name!r}")
    if name == "ossl" and params.get("lam") is not None and _all_weighted(params.get("groups")):
        raise ValueError("lam does not apply to formulation 'ossl' when every group carries "
                         "its own weight (groups of (indices, weight) pairs): drop one of them")
    return dict(params)


_POSITIVE = [Interval("real", 0, None, closed="neither")]
_WEIGHT = [*_POSITIVE, NONE]  # None: 1/sqrt(d)
_SQUARE = [ARRAY, Instance("a nested list", list, tuple), NONE]
#: what each formulation parameter may be (its shape and the groups' indices are checked as
#: the formulation is built, where the data's width is known)
_VALUES = {"lam": _WEIGHT, "lam1": _WEIGHT, "lam2": _WEIGHT,
           "lam3": [Interval("real", 0, None)], "M": _POSITIVE, "M_prime": _POSITIVE,
           "nu": [Interval("real", 0, None)], "allow_negative": [BOOLEAN],
           "groups": [Instance("a list of index lists or (indices, weight) pairs", list, tuple),
                      NONE],
           "laplacian": _SQUARE, "lrr_A": _SQUARE, "lrr_B": _SQUARE}


def _all_weighted(groups: Any) -> bool:
    """Whether every group of ``ossl`` is an ``(indices, weight)`` pair (``lam`` then weighs
    none of them)."""
    return bool(groups) and all(_weighted(group) for group in groups)


def _weighted(group: Any) -> bool:
    return isinstance(group, (tuple, list)) and len(group) == 2 and not np.isscalar(group[0])


def make_formulation(name: str, n_features: int, *, n_components: int | None = None,
                     **params: Any) -> Formulation:
    """The formulation ``name`` with its parameters (:data:`FORMULATION_PARAMS` lists each
    one's: ``lam``, ``lam1``, ``lam2`` weights, None or absent ``1/sqrt(d)``, the paper's
    setting, section 5.2; ``lam3`` 1, ``M`` and ``M_prime`` 1e3, ``nu`` 0, ``groups`` one per
    code, ``allow_negative`` False; ``laplacian`` required by ``ssodl``, ``lrr_A`` and
    ``lrr_B`` the identity). A parameter the formulation does not take is refused by name.

    Examples
    --------
    >>> make_formulation("orpca", 100).lam2
    0.1
    >>> make_formulation("pca", 4)
    Traceback (most recent call last):
    ...
    ValueError: formulation must be one of ['odl', 'ossl', ..., 'ornmf'], got 'pca'
    """
    params = check_formulation_params(name, params)
    default = 1.0 / math.sqrt(n_features)

    def weight(key: str) -> float:
        value = params.get(key)
        return default if value is None else float(value)

    # the values were checked against _VALUES by check_formulation_params
    nu = float(params.get("nu", 0.0))
    allow = bool(params.get("allow_negative", False))  # checked: True or False
    if name == "odl":
        return SparseDL(nu=nu, lam=weight("lam"))
    if name == "onmf":
        return NMF(nu=nu, lam=weight("lam"), allow_negative=allow)
    if name == "ssodl":
        lap = _check_square(params.get("laplacian"), "laplacian", n_features, required=True)
        return SmoothSparseDL(nu=nu, lam=weight("lam"), lam1=weight("lam1"), laplacian=lap,
                              allow_negative=allow)
    if name == "orpca":
        return RobustPCA(nu=nu, lam1=weight("lam1"), lam2=weight("lam2"))
    if name == "omrmd":
        return MaxNormMD(nu=nu, lam1=weight("lam1"), lam2=weight("lam2"))
    if name == "olrr":
        return LRR(nu=nu, lam1=weight("lam1"), lam2=weight("lam2"),
                   lam3=float(params.get("lam3", 1.0)),
                   A=_check_square(params.get("lrr_A"), "lrr_A", n_features),
                   B=_check_square(params.get("lrr_B"), "lrr_B", n_features))
    if name == "ornmf":
        return RobustNMF(nu=nu, lam=weight("lam"), M=float(params.get("M", 1e3)),
                         M_prime=float(params.get("M_prime", 1e3)),
                         allow_negative=allow)
    groups_, lams = _check_groups(params.get("groups"), n_components, weight("lam"))
    return StructuredSparseDL(nu=nu, groups=groups_, lams=lams)


def _check_square(value: Any, name: str, d: int, required: bool = False) -> Any:
    if value is None:
        if required:
            raise ValueError(f"{name} is required for this formulation (a ({d}, {d}) matrix)")
        return None
    matrix = np.asarray(value, dtype=float)
    if matrix.shape != (d, d) or not np.all(np.isfinite(matrix)):
        raise ValueError(f"{name} must be a finite ({d}, {d}) matrix, got shape {matrix.shape}")
    return matrix


def _check_groups(groups: Any, k: int | None, lam: float) -> tuple[tuple, tuple]:
    """Disjoint groups of code indices and their weights: ``groups`` is a list of index lists
    (weight ``lam`` each) or of ``(indices, weight)`` pairs; None is one group per code."""
    if groups is None:
        if k is None:
            raise ValueError("groups (or n_components) is required for formulation 'ossl'")
        groups = [[j] for j in range(k)]
    members, lams = [], []
    for group in groups:
        if _weighted(group):
            indices, weight = group
        else:
            indices, weight = group, lam
        members.append(tuple(int(i) for i in indices))
        lams.append(_check_lam(weight, "group weight", positive=False))
    flat = [i for g in members for i in g]
    if len(flat) != len(set(flat)) or (k is not None and any(not 0 <= i < k for i in flat)):
        raise ValueError(f"groups must be disjoint lists of code indices in [0, {k}), got "
                         f"{groups!r} (overlapping groups have no closed-form prox)")
    return tuple(members), tuple(lams)


# -- the code solver (FISTA on the reduced problem of eqs. 5-6) ------------------------------------


@dataclass(frozen=True)
class FiniteCodes:
    """Codes of a batch under a finite-data formulation: ``H`` (b, k), ``outliers`` (b, d)
    (zeros if not robust; the paper's ``r``), and the solver's per-sample iteration counts
    and final prox-gradient residuals. (The online engine's result of a coding step is
    :class:`tensorstream.engine.Codes`.)"""

    H: Tensor
    outliers: Tensor  #: (b, d) the paper's ``r``
    n_iter: np.ndarray  #: (b,) iterations per sample
    residual: Tensor  #: (b,) ``L ||h+ - z||`` at the last iteration (the stopping measure)


def lipschitz(gram: Tensor) -> float:
    """``L' = ||W||_2^2``, the spectral norm of ``W^T W`` (Frobenius would be loose), guarded
    against ``W = 0``."""
    return max(spectral_norm_psd(gram), 1e-12)


def solve_codes(form: Formulation, X: Tensor, W: Tensor, *, coder: str = "fista",
                tol: float = 1e-6, max_iter: int = 100) -> FiniteCodes:
    """Codes ``(H, R)`` of every row of ``X`` against ``W`` (eqs. 5-6 of the paper).

    Proximal gradient on ``F(h) = M_varphi(x - W h) + phi(h)`` with step ``1/L'``,
    ``L' = ||W||_2^2``; ``grad = -W^T (z - prox_r(z))``, ``z = x - W h`` (for R = {0}:
    ``W^T W h - W^T x``). ``coder="fista"`` adds Nesterov momentum; ``"bsum"`` is plain ISTA,
    i.e. the paper's BSUM sweeps (5)-(6). Cold start ``h = 0``; a sample stops (and is frozen)
    once its prox-gradient residual ``L' ||h+ - z||`` at the point ``z`` the step was taken from
    is at most ``tol`` (``tol = 0``: always ``max_iter`` iterations).

    Parameters
    ----------
    form : Formulation
    X : tensor of shape (b, d)
    W : tensor of shape (d, k)
    coder : {"fista", "bsum"}
    tol : float
        Absolute tolerance on the prox-gradient residual, per sample.
    max_iter : int

    Returns
    -------
    FiniteCodes

    Examples
    --------
    >>> import numpy as np
    >>> form = RobustPCA(lam1=0.1, lam2=0.5)
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    >>> codes = solve_codes(form, np.array([[1.0, 0.5, 2.0]]), W, tol=1e-12, max_iter=500)
    >>> np.round(codes.H, 6), np.round(codes.outliers, 6)
    (array([[0.909091, 0.454545]]), array([[0. , 0. , 1.5]]))
    """
    if coder not in ("fista", "bsum"):
        raise ValueError(f"coder must be 'fista' or 'bsum', got {coder!r}")
    context = tl.context(X)
    b, k = tl.shape(X)[0], tl.shape(W)[1]
    G = tl.dot(tl.transpose(W), W)
    L = lipschitz(G)
    P = narrow_dot(X, W)
    H = tl.zeros((b, k), **context)
    Zc, t = H, 1.0
    active = np.ones(b, dtype=bool)
    n_iter = np.zeros(b, dtype=np.int64)
    residual = tl.zeros((b,), **context)
    for _ in range(max_iter):
        if form.robust:
            Z = X - tl.dot(Zc, tl.transpose(W))
            gradient = -narrow_dot(Z - form.prox_r(Z), W)
        else:
            gradient = tl.dot(Zc, G) - P
        H_new = form.prox_h(Zc - gradient / L, L)
        res = L * tl.norm(H_new - Zc, axis=1)
        if coder == "fista":
            t_new = (1 + math.sqrt(1 + 4 * t * t)) / 2
            Z_next = H_new + ((t - 1) / t_new) * (H_new - H)
            t = t_new
        else:
            Z_next = H_new
        n_iter += active
        if active.all():
            H, Zc, residual = H_new, Z_next, res
        else:
            keep = _mask(active, context)
            H = tl.where(keep[:, None], H_new, H)
            Zc = tl.where(keep[:, None], Z_next, Zc)
            residual = tl.where(keep, res, residual)
        done = _to_bool(res <= tol)
        active = active & ~done
        if not active.any():
            break
    R = form.prox_r(X - tl.dot(H, tl.transpose(W))) if form.robust else \
        tl.zeros(tl.shape(X), **context)
    return FiniteCodes(H, R, n_iter, residual)


def _mask(active: np.ndarray, context: dict) -> Tensor:
    """Host boolean mask as a backend boolean tensor on the data's device."""
    return tl.tensor(active.astype(float), **context) > 0


def _to_bool(x: Tensor) -> np.ndarray:
    return np.asarray(tl.to_numpy(x), dtype=bool)


def sample_losses(form: Formulation, X: Tensor, W: Tensor, codes: FiniteCodes) -> Tensor:
    """Per-sample ``1/2 ||x - W h - r||^2 + phi(h) + varphi(r)``, shape ``(b,)``."""
    E = X - tl.dot(codes.H, tl.transpose(W)) - codes.outliers
    return 0.5 * tl.sum(E * E, axis=1) + form.phi(codes.H) + form.varphi(codes.outliers)
