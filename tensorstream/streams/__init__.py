"""Sample streams: i.i.d., Markov-chain and MCMC sources of mini-batches for the online learners.

A *stream* is an iterable of mini-batches with the samples on the first axis, shape
``(b, I_1, ..., I_n)``; every learner's ``fit`` consumes it batch by batch. The convergence
theory of online CP-dictionary learning (Lyu, Strohmeier & Needell, assumption A1) holds for
samples ``X_t = phi(Y_t)`` read along an irreducible, aperiodic Markov chain ``Y_t`` on a finite
state space with stationary distribution ``pi``; the learned dictionary then minimises the
*expected* loss ``f(D) = sum_y pi(y) loss(phi(y), D)``. The streams here make such chains
first-class.

One concept per module:

- :mod:`.base`: the stream protocol, streams over a data array, shared checks;
- :mod:`.arrays`: i.i.d. slices, shuffled epochs, random patches;
- :mod:`.chains`: Markov chains on a graph of samples, thinning, restarts, sliding windows;
- :mod:`.mcmc`: Metropolis and the Ising model;
- :mod:`.graphs`: the graphs behind the random walks;
- :mod:`.motifs`: the motif sampler of networks;
- :mod:`.diagnostics`: distances, autocorrelation times, the expected loss.

Conventions shared by every stream
----------------------------------
* **Re-iterable, continuing.** Each ``iter(stream)`` continues from the stream's current random
  generator and chain state and yields at most ``n_steps`` batches (forever when ``None``), so
  ``learner.fit(stream)`` twice sees fresh batches. :meth:`Stream.reset` rewinds to the state
  right after construction; :meth:`Stream.get_state` / :meth:`Stream.set_state` checkpoint and
  resume exactly.
* **States, then samples.** :meth:`Stream.next_states` draws what is behind the next batch
  (the sample indices of a stream over a data array, homomorphisms for the motif sampler, spin
  configurations for :class:`Ising`) without building it; :meth:`Stream.to_samples` builds the
  batch; :meth:`Stream.next_batch` does both.
* **Data arrays of any kind.** Streams over a data array ``X`` index it with an integer index
  array along the sample axis: numpy arrays, torch tensors (batches stay on their device),
  ``xarray.DataArray`` (``.isel``; ``axis`` may be a dimension name) and dask arrays (indexed
  lazily, only the touched chunks are computed, per batch).
* **Known stationary distributions.** Finite streams return ``pi`` from
  :meth:`Stream.stationary_distribution`, a 1-D numpy array summing to one over the stream's
  sample space :meth:`Stream.sample_space` (for streams over a data array: the indices of its
  sample axis), so the expected loss is exact: :func:`expected_loss`.
* **Markov chains.** :class:`MarkovStream` subclasses expose ``state`` (the current chain state),
  :meth:`MarkovStream.transition_matrix` and :meth:`MarkovStream.state_distribution` (``pi P =
  pi`` over chain states). The samples of a chain are ``Y_0, Y_1, Y_2, ...``: the first batch
  starts with the start state ``Y_0``.
"""

from .arrays import Epochs, IIDSlices, RandomPatches
from .base import Stream, check_random_state
from .chains import LazyRandomWalk, MarkovStream, Restarted, SlidingWindow, Thinned
from .diagnostics import (
    empirical_distribution,
    expected_loss,
    integrated_autocorrelation_time,
    total_variation,
)
from .mcmc import Ising, Metropolis
from .motifs import MotifSampler

__all__ = [
    "Epochs", "IIDSlices", "Ising", "LazyRandomWalk", "MarkovStream", "Metropolis", "MotifSampler",
    "RandomPatches", "Restarted", "SlidingWindow", "Stream", "Thinned", "check_random_state",
    "empirical_distribution", "expected_loss", "integrated_autocorrelation_time", "total_variation",
]
