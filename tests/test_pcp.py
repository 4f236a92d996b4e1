"""Batch PCP's numerics (``tensorstream.algorithms.pcp``): the cheaper pieces equal what they
replace."""

from __future__ import annotations

import numpy as np
import pytest
import tensorly as tl
from hypothesis import given
from hypothesis import strategies as st

from tensorstream.algorithms.pcp import spectral_norm


def _low_rank(n, p, rank, seed, scale=1.0):
    """An ``n x p`` matrix of rank ``rank`` (0: the zero matrix), entries of size ``scale``."""
    rng = np.random.default_rng(seed)
    return scale * rng.standard_normal((n, rank)) @ rng.standard_normal((rank, p))


@given(n=st.integers(1, 40), p=st.integers(1, 40), rank=st.integers(0, 40),
       seed=st.integers(0, 2**16), exponent=st.integers(-100, 100))
def test_spectral_norm_equals_the_svds_largest_singular_value(n, p, rank, seed, exponent):
    """Tall, wide, square, rank-deficient (down to zero) and far from unit scale: the top
    eigenvalue of the short side's Gram matrix gives ``s_1`` to 1e-10."""
    M = _low_rank(n, p, min(rank, n, p), seed, scale=2.0 ** exponent)
    expected = np.linalg.svd(M, compute_uv=False)[0]
    assert spectral_norm(tl.tensor(M)) == pytest.approx(expected, rel=1e-10, abs=0)


@pytest.mark.parametrize("shape, rank", [((30, 7), 7), ((7, 30), 3), ((20, 20), 1), ((5, 9), 0)])
def test_spectral_norm_on_every_backend(backend, shape, rank):
    M = _low_rank(*shape, rank, seed=1)
    expected = np.linalg.svd(M, compute_uv=False)[0]
    assert spectral_norm(tl.tensor(M)) == pytest.approx(expected, rel=1e-10, abs=0)
