"""Coders: the codes (and outliers) of a batch against a fixed dictionary.

- :mod:`.lasso`: exact (nonnegative) elastic-net codes by block principal pivoting.
- :mod:`.robust`: codes plus sparse bounded outliers (PGD or ADMM), for robust NMF.
- :mod:`.maxnorm`: unit-ball or ridge coefficients plus sparse corruption (max-norm, OR-PCA).
- :mod:`.divergence`: codes under a general divergence by projected gradient.
"""
