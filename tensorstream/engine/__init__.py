"""The online engine: the state of a learner and the one step every online learner takes.

A learner is a configuration of this engine: an :class:`~.loop.Algorithm` that says how a batch
is coded against the dictionary, how its statistics are folded in, and how the dictionary
moves. :func:`~.loop.online_step` runs those three parts in order on an
:class:`~.state.OnlineState` and returns the next state; it never touches an estimator.
"""

from .loop import (
    Algorithm,
    LearningWarning,
    add_sums,
    finish_step,
    online_step,
    surrogate_statistics,
)
from .state import Codes, Health, OnlineState

__all__ = ["Algorithm", "Codes", "Health", "LearningWarning", "OnlineState", "add_sums",
           "finish_step", "online_step", "surrogate_statistics"]
