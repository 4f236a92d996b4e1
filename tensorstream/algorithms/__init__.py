"""The algorithms: each learner's mathematics, apart from its estimator.

An online algorithm is a small configuration with explicit, typed options (its coder, its
dictionary step, their tolerances) and the three parts of a step as pure functions, run by the
engine (:func:`tensorstream.engine.online_step`); a batch algorithm is a function of the data.
The estimators in :mod:`tensorstream.learners` build them from their parameters in one visible
place and keep only the scikit-learn surface: parameters, validation, outputs.
"""
