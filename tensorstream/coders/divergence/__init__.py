"""Coding step for general divergences: projected (sub)gradient descent on the codes of a batch.

This is Algorithm 2 of Zhao, Tan & Xu (section V-C) run on a whole batch at once. For a batch
``V`` of shape ``(b, *sample_shape)`` and a fixed dictionary it solves, for every sample ``j``,

    min_{lower <= h <= upper}  d(v_j || (W h)_j) + (ridge / 2) ||h||²

with codes ``H`` of shape ``(b, R)`` (samples on the first axis). The dictionary enters only
through two operators, so matrices, CP dictionaries of tensors and (later) sparse data share the
code: ``forward(H)`` returns the model ``Y`` (shape of ``V``) and ``adjoint(G)`` maps a gradient
in the model back to the codes (shape ``(b, R)``); the code gradient is ``adjoint(∂d/∂y)``.

Step rules (its V-C): :class:`ConstantStep` (``1/L``, an MM step; needs a curvature bound and the
``R x R`` Gram ``W^T W``), :class:`ArmijoStep` (per-sample backtracking on the projected arc) and
:class:`PolyakStep` (modified Polyak for nonsmooth losses; returns the best iterate). Our
addition: :class:`MultiplicativeStep`, the β-divergences' multiplicative update (the default for
KL, IS and any β: matrix products only, no line search, a stopping test on the codes' change). Every
sample has its own step, convergence test and mask; converged samples are frozen.

The box is the paper's ``H = {eps' <= h <= U}`` with ``eps' = 1e-8`` and ``U = 1e8`` (Remark 2);
``lower=0`` gives plain nonnegativity, ``None`` removes a bound.

The modules: :mod:`.steps` (the box and the step rules), :mod:`.solver` (the problem and the
iterations), :mod:`.sparse` (KL on the support of sparse data). The public names are importable
from here.
"""

from .solver import (
    code_divergence,
    code_divergence_matrix,
)
from .sparse import (
    SPARSE_LOSSES,
    SparseKL,
    code_divergence_sparse,
    solve_sparse_kl,
    supports_sparse,
)
from .steps import (
    CODE_LOWER,
    CODE_UPPER,
    ArmijoStep,
    ConstantStep,
    MultiplicativeStep,
    PolyakStep,
    StepRule,
    project_box,
)

__all__ = [
    "ArmijoStep",
    "CODE_LOWER",
    "CODE_UPPER",
    "ConstantStep",
    "MultiplicativeStep",
    "PolyakStep",
    "SPARSE_LOSSES",
    "SparseKL",
    "StepRule",
    "code_divergence",
    "code_divergence_matrix",
    "code_divergence_sparse",
    "project_box",
    "solve_sparse_kl",
    "supports_sparse",
]
