"""Finite data sets: the matrix-factorization formulations of the variance-reduction paper and
the full-gradient machinery that :class:`~tensorstream.VarianceReducedMF` runs on them.

- :mod:`.formulations`: the formulations (ODL, ONMF, OR-PCA, OMRMD, ...): losses, codes, gradients.
- :mod:`.variance_reduction`: full gradients (chunked), variance-reduced directions, step sizes.
- :mod:`.state`: :class:`~.state.FiniteState`, what the learner knows after some epochs.
"""
