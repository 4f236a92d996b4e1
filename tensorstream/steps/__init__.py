"""Dictionary steps: how the loadings move after a batch has been coded.

- :mod:`.surrogate`: steps on the surrogate's statistics (block-coordinate column steps,
  projected gradient and ADMM on the constraint set, max-norm proximal steps).
- :mod:`.gradient`: projected stochastic-gradient steps from the batch's gradient (the paper's
  step and its multiplicative-update preconditioned variant).
"""
