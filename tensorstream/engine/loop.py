"""The one loop: code the batch, fold it into the statistics, move the dictionary.

Every online learner runs :func:`online_step`; what differs between learners is the
:class:`Algorithm` they configure (which coder, which statistics, which dictionary step,
which constraint set). The step is a pure function of the state and the batch.

A step is split where the work can be split: coding a batch gives **additive** batch sums
(:meth:`Algorithm.batch_sums`: code products, data-code products, losses, gradients), whose sum
over any partition of the batch is the sum over the batch; :func:`finish_step` folds them into
the statistics and moves the dictionary. :func:`online_step` does both on one batch;
:mod:`tensorstream.engine.distributed` computes the sums of the shards of a batch on workers and
calls the same :func:`finish_step`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorly as tl

from ..core.backend import linalg_errors
from ..core.compiled import from_step
from ..core.dictionary import outer_statistic, pairs
from ..core.validation import check_not_too_small, largest_entry, overflows, underflows
from .state import Codes, Health, OnlineState


class Algorithm:
    """One online algorithm: the three parts of a step, as pure functions.

    Subclasses implement :meth:`encode` and :meth:`update`; the defaults keep the surrogate
    statistics of Mairal et al. with the weights of :meth:`weight`.
    """

    #: False for algorithms that keep no statistics (their state is the loadings and the scale)
    keeps_statistics = True
    #: what to try when the algorithm diverges (part of the error message)
    divergence_hint = ""
    #: names of the positive scalars the algorithm keeps in its statistics besides ``A``,
    #: ``B`` and ``c`` (the robust learner's residual scale); checkpoints store them
    scalar_statistics: tuple = ()
    #: names of the per-feature tensors (shaped like a sample) it keeps in its statistics (the
    #: robust matrix learners' offset); checkpoints store them
    array_statistics: tuple = ()

    def initial_loadings(self, X: Any, context: dict, rng: Any, mask: Any = None) -> list:
        """The dictionary before the first step, for samples shaped like the batch ``X``
        (observed where ``mask`` is True: what is missing must not shape it either)."""
        raise NotImplementedError

    def at_state(self, state: OnlineState) -> Algorithm:
        """The algorithm as it codes at ``state``: itself, unless its coding depends on
        something it learns besides the dictionary and the data scale (the robust learner's
        residual scale, kept in the statistics), which a copy then carries. Every coding step
        (a step, a shard's, ``transform``) runs the algorithm at the state it codes for."""
        return self

    def initial_statistics(self, sample_shape: tuple, R: int, context: dict) -> dict | None:
        """Zero surrogate statistics (None for algorithms that keep none)."""
        return {"A": tl.zeros((R, R), **context), "B": tl.zeros((*sample_shape, R), **context),
                "c": 0.0}

    def data_scale(self, X: Any, state: OnlineState, mask: Any = None) -> float:
        """The scale step ``t = state.n_steps + 1`` codes at: the first batch's (the ratio of
        its :meth:`scale_sums`, or :meth:`declared_scale`), kept for every later step."""
        if state.n_steps > 0:
            return state.scale
        return self.first_scale(self.scale_sums(X, mask), like=X)

    def first_scale(self, sums: tuple[float, float] | None, like: Any = None) -> float:
        """The data scale of a first batch whose :meth:`scale_sums` (added up over its shards,
        on a cluster) are ``sums``; ``like``: the batch, or a tensor of its dtype (a float32
        scale underflows where a float64 one does not, :func:`usable_scale`)."""
        if sums is None:
            return self.declared_scale()
        # no sample counted: 0
        return usable_scale(sums[0] / sums[1] if sums[1] else 0.0, like=like)

    def scale_sums(self, X: Any, mask: Any = None) -> tuple[float, float] | None:
        """``(sum, count)`` of a first batch's observed entries (``mask``, None: all) that its
        data scale is the ratio of, so that shards can add them up; None when the scale does
        not depend on the data."""
        return None

    def declared_scale(self) -> float:
        """The data scale when :meth:`scale_sums` is None (declared, or 1.0)."""
        return 1.0

    def project_loading(self, U: Any, scale: float) -> Any:
        """``U`` on the loadings' constraint set at the data scale ``scale``, where
        re-initialised atoms are put: the algorithm's ``project`` where it has one."""
        project = getattr(self, "project", None)
        return U if project is None else project(U)

    def reinit_norm(self, scale: float) -> float:
        """The first loading's column norm of a re-initialised atom when no atom is alive to
        take it from: 1 (dictionaries of unit columns, codes in the data's units)."""
        return 1.0

    def encode(self, X: Any, loadings: list, scale: float, mask: Any = None) -> Codes:
        """Codes of the validated batch against ``loadings``."""
        raise NotImplementedError

    def weight(self, t: int) -> float | None:
        """The weight ``w_t`` of step ``t``'s batch in the statistics."""
        return None

    def code_box(self, scale: float) -> tuple[float, float | None]:
        """``(lower, upper)``: a code whose magnitude is at most ``lower`` is inactive (0 for
        coders whose codes reach zero), one at least ``upper`` (None: no bound) is at the
        coder's upper bound; the health checks (:func:`check_health`) count them."""
        return 0.0, None

    def batch_sums(self, X: Any, coded: Codes, mask: Any, loadings: list,
                   scale: float) -> dict:
        """What the statistics and the dictionary step need from a coded batch, as sums over
        its samples (so that sums over shards add up): by default the surrogate's increments
        ``HH = sum_j h_j h_j^T`` (entrywise with a mask), ``XH = sum_j explained_j o h_j``,
        ``constant`` and the sample count ``n``."""
        H = coded.codes
        n = int(H.shape[0])
        if mask is None:
            HH = tl.dot(tl.transpose(H), H)
        else:
            R = H.shape[1]
            HH = tl.reshape(outer_statistic(mask, pairs(H)), (*tuple(mask.shape[1:]), R, R))
        return {"n": n, "loss": float(tl.sum(coded.losses)), "constant": coded.constant * n,
                "HH": HH, "XH": outer_statistic(coded.explained, H)}

    def alternate(self, sums: dict, loadings: list, recode: Callable[[list], dict]) -> dict:
        """The batch's sums after any further alternating rounds on it; by default none (the
        dictionary moves once, from the batch's first codes). An algorithm that makes rounds
        moves the batch's own dictionary and then its codes, ``recode(at)`` (which calls
        :meth:`recode`: here, or on a cluster on the workers that hold the shards, and
        returns the sums at the moved codes); :meth:`update` then reads the sums of the last
        round."""
        return sums

    def recode(self, X: Any, coded: Codes, loadings: list, scale: float) -> tuple[Codes, dict]:
        """The batch's codes moved towards ``loadings`` from ``coded``, and the sums at them
        that the next round and :meth:`update` read (they replace the batch's sums of the
        same names; its loss, sample count and code activity stay those of its first codes)."""
        raise NotImplementedError

    def accumulate(self, statistics: dict | None, sums: dict, w: float | None) -> dict | None:
        """The statistics after step ``t``: the weighted running means of the surrogate."""
        return surrogate_statistics(statistics, sums, w)

    def update(self, sums: dict, statistics: dict | None, loadings: list, t: int,
               scale: float) -> list:
        """The dictionary after step ``t`` (``scale``: the data scale the batch was coded at)."""
        raise NotImplementedError

    def info(self, t: int, w: float | None, n: int) -> dict:
        """What a progress bar or callback learns about step ``t`` on a batch of ``n`` samples
        (besides the batch loss)."""
        return {}


_TOO_LARGE = ("X: the batch's values are too large for this model's arithmetic (its losses or "
              "statistics overflow to inf); rescale the data. The learner's state was left "
              "unchanged")


def online_step(algorithm: Algorithm, X: Any, state: OnlineState, mask: Any = None,
                reinit_dead_atoms: bool = True) -> tuple[OnlineState, Codes, dict]:
    """One step of ``algorithm`` on the validated batch ``X``: ``(new state, codes, info)``.

    ``info["warnings"]`` lists what the health checks found (:func:`check_health`); dead atoms
    are re-initialised from the batch's worst-explained samples unless ``reinit_dead_atoms``
    is False (or the atom was given up after ``MAX_FUTILE_REINITS`` futile ones).

    Raises (and changes nothing: the state is immutable) ``ValueError`` when the batch's
    values overflow the arithmetic, ``FloatingPointError`` when the model diverges.
    """
    check_not_too_small(X)  # learned as zeros otherwise, by the learners that keep no scale
    scale = algorithm.data_scale(X, state, mask)
    # the compiled kernels from a fixed step on (core/compiled.py): short fits never load them
    with from_step(state.n_steps):
        algorithm = algorithm.at_state(state)
        try:
            coded = algorithm.encode(X, state.loadings, scale, mask)
            sums = {**algorithm.batch_sums(X, coded, mask, state.loadings, scale),
                    **code_activity(algorithm, coded.codes, scale)}
            if not np.isfinite(sums["loss"]) and overflows(X):
                # finite data whose squares overflow (e.g. entries near 1e160)
                raise ValueError(_TOO_LARGE)
            sums = algorithm.alternate(sums, state.loadings, _recoder(algorithm, X, coded, scale))
            new, info = finish_step(algorithm, state, sums, scale,
                                    candidates=lambda k: worst_explained(coded, k),
                                    reinit_dead_atoms=reinit_dead_atoms)
        except arithmetic_errors() as error:
            raise step_error(error, overflows(X), largest_entry(X)) from None
    return new, coded, info


def step_error(error: Exception, overflowed: bool, largest: float) -> Exception:
    """The error a failed step surfaces, from the batch's :func:`overflows` and its largest
    absolute entry (a cluster step knows these from its shards, not the batch): "too large"
    where the data's squares overflow, a named ``ValueError`` for a failed decomposition or
    solve (numpy's and torch's ``LinAlgError`` say nothing of the data), the divergence itself
    otherwise."""
    if overflowed:  # the statistics, not the loss, overflowed: the data's fault
        return ValueError(_TOO_LARGE)
    if isinstance(error, linalg_errors()):
        return ValueError(f"X: the step's linear algebra failed on this batch ({error}; "
                          f"largest absolute entry {largest:.3g}): its values are "
                          f"too large or too ill-conditioned for this model; rescale the data "
                          f"or check it for extreme entries. The learner's state was left "
                          f"unchanged")
    return error


def _recoder(algorithm: Algorithm, X: Any, coded: Codes, scale: float) -> Callable:
    """:meth:`Algorithm.alternate`'s ``recode`` for a batch in this process (its codes kept between
    rounds)."""
    current = coded

    def recode(at: list) -> dict:
        nonlocal current
        current, fresh = algorithm.recode(X, current, at, scale)
        return fresh
    return recode


def finish_step(algorithm: Algorithm, state: OnlineState, sums: dict, scale: float,
                candidates: Callable | None = None,
                reinit_dead_atoms: bool = True) -> tuple[OnlineState, dict]:
    """Fold a batch's sums into the statistics and move the dictionary: ``(new state, info)``.

    ``candidates(k)``, where given, returns ``k`` samples of the batch (worst explained first)
    that dead atoms are re-initialised from; without it, dead atoms are only reported. The
    code checks run when ``sums`` holds :func:`code_activity`'s counts.

    Raises ``FloatingPointError`` when the losses, statistics or loadings are not finite (the
    state is immutable: nothing changes).
    """
    t = state.n_steps + 1
    w = algorithm.weight(t)
    statistics = algorithm.accumulate(state.statistics, sums, w)
    if not (np.isfinite(sums["loss"]) and (statistics is None or
                                           _finite_statistics(statistics))):
        raise FloatingPointError(f"the model diverged at step {t} (its losses or statistics "
                                 f"overflow); the learner's state was left unchanged. "
                                 f"{algorithm.divergence_hint}")
    loadings = algorithm.update(sums, statistics, state.loadings, t, scale)
    if not all(_finite(U) for U in loadings):
        raise FloatingPointError(f"the dictionary update produced non-finite loadings at step "
                                 f"{t}; the learner's state was left unchanged. "
                                 f"{algorithm.divergence_hint}")
    n = sums["n"]
    health, loadings, messages = check_health(algorithm, state, sums, loadings,
                                              candidates if reinit_dead_atoms else None, scale)
    new = OnlineState(loadings=loadings, statistics=statistics, scale=scale, n_steps=t,
                      n_samples_seen=state.n_samples_seen + n, health=health)
    info = {"step": t, **algorithm.info(t, w, n), "batch_loss": sums["loss"] / n,
            "n_samples": n}
    if messages:
        info["warnings"] = messages
    return new, info


def usable_scale(scale: float, like: Any = None) -> float:
    """A data scale, or 1.0 for all-zero (or degenerate) data.

    Raises ``ValueError`` for a scale that :func:`~tensorstream.core.validation.underflows`
    the float dtype of ``like`` (the data; float64 when None): the statistics and losses are
    kept in squared data units, where such data vanish.
    """
    scale = scale if scale > 0 and np.isfinite(scale) else 1.0
    if underflows(scale, np.float64(0.0) if like is None else like):
        raise ValueError(f"X: the values are too small for this model's arithmetic (data scale "
                         f"{scale:.3g}, whose square loses its digits); rescale the data. "
                         f"The learner's state was left unchanged")
    return scale


def add_sums(parts: list[dict]) -> dict:
    """The sums of a batch from the sums of its shards."""
    total = dict(parts[0])
    for part in parts[1:]:
        for key, value in part.items():
            total[key] = total[key] + value
    return total


def arithmetic_errors() -> tuple:
    """The errors of failed arithmetic: divergence, and singular systems on either backend."""
    return (FloatingPointError,) + linalg_errors()


def _finite(tensor: Any) -> bool:
    return bool(tl.all(tl.abs(tensor) < float("inf")))


def _finite_statistics(statistics: dict) -> bool:
    return _finite(statistics["A"]) and _finite(statistics["B"]) and \
        abs(float(statistics["c"])) < float("inf")


def surrogate_statistics(statistics: dict, sums: dict, w: float) -> dict:
    """``A``, ``B``, ``c`` after folding in a batch's sums with weight ``w``::

        A_t = (1 - w) A_{t-1} + w mean_j h_j h_j^T      (entrywise with a mask)
        B_t = (1 - w) B_{t-1} + w mean_j explained_j o h_j
        c_t = (1 - w) c_{t-1} + w mean_j constant_j
    """
    n = sums["n"]
    return {
        "A": _averaged_code_products(statistics["A"], sums["HH"], n, w),
        "B": (1 - w) * statistics["B"] + (w / n) * sums["XH"],
        "c": (1 - w) * statistics["c"] + w * (sums["constant"] / n),
    }


def _averaged_code_products(A: Any, HH: Any, n: int, w: float) -> Any:
    """``(1 - w) A + (w / n) HH``, where an entrywise ``HH`` (``(I_1..I_n, R, R)``, a batch with
    missing entries) turns ``A`` entrywise: until then every entry had the same ``A``, so
    broadcasting it is exact."""
    if tl.ndim(HH) > tl.ndim(A):
        A = tl.reshape(A, (1,) * (tl.ndim(HH) - 2) + tuple(tl.shape(A)))
    elif tl.ndim(A) > tl.ndim(HH):
        HH = tl.reshape(HH, (1,) * (tl.ndim(A) - 2) + tuple(tl.shape(HH)))
    return (1 - w) * A + (w / n) * HH


# -- a learner that cannot learn says so --------------------------------------------------------

#: an atom is dead when none of its codes was active for this many consecutive steps ...
DEAD_ATOM_STEPS = 10
#: ... holding at least this many samples (so that one-sample steps do not call an atom dead
#: after ten samples), or when one of its loading columns is zero
DEAD_ATOM_SAMPLES = 500
#: a dead atom re-initialised this many times in a row, none of its codes active in between,
#: is given up (warned about once, no longer re-initialised): when the codes' penalty or box
#: leaves it no activity on the data's scale, every new atom dies again, and re-initialising
#: it every ``DEAD_ATOM_STEPS`` steps for ever is futile work that moves the dictionary and
#: warns each time. Two, so that one unlucky pick (a batch's worst-explained samples may be
#: outliers) does not give an atom up
MAX_FUTILE_REINITS = 2
#: the losses are averaged over blocks of at least this many steps and samples (so that the
#: noise of small batches averages out) ...
BLOCK_STEPS = 10
BLOCK_SAMPLES = 500
#: ... and the objective rises when the means of the last ``RISE_BLOCKS`` blocks increase, the
#: last one ``RISE_FACTOR`` times the first
RISE_BLOCKS = 4
RISE_FACTOR = 2.0


class LearningWarning(UserWarning):
    """A learner cannot learn: its codes are all at a bound, atoms died (and were
    re-initialised, or given up after futile re-initialisations), or its objective rises."""


def code_activity(algorithm: Algorithm, codes: Any, scale: float) -> dict:
    """Additive counts of a batch's codes for :func:`check_health`: per atom, how many codes
    are active (``active_codes``, shape ``(R,)``), and how many codes of the batch sit at a
    bound of the coder (``codes_at_bound``)."""
    lower, upper = algorithm.code_box(scale)
    magnitude = tl.abs(codes)
    inactive = magnitude <= lower
    # counted as a product of ones with the 0/1 codes: a boolean sum down the columns costs
    # ~3x as much (20 against 7 us on 1024 x 16 codes); exact, as counts are far below 2^53
    context = tl.context(codes)
    ones = tl.ones((int(tl.shape(codes)[0]),), **context)
    active = np.rint(tl.to_numpy(tl.dot(ones, tl.tensor(~inactive, **context)))).astype(np.int64)
    if upper is None:  # at a bound means inactive
        at_bound = int(tl.shape(codes)[0]) * int(tl.shape(codes)[1]) - int(active.sum())
    else:
        at_bound = int(tl.to_numpy(tl.sum(inactive | (magnitude >= upper))))
    return {"active_codes": active, "codes_at_bound": at_bound}


def worst_explained(coded: Codes, k: int) -> Any:
    """The ``k`` samples of a coded batch its losses are largest on (largest first), as a
    dense tensor of what the dictionary must explain."""
    order = np.argsort(-np.asarray(tl.to_numpy(coded.losses)), kind="stable")[:k]
    samples = coded.explained
    if hasattr(samples, "tocsr"):  # scipy.sparse rows: densified, only these few
        return tl.tensor(samples.tocsr()[order].toarray())
    return tl.stack([samples[int(j)] for j in order])


def check_health(algorithm: Algorithm, state: OnlineState, sums: dict, loadings: list,
                 candidates: Callable | None, scale: float = 1.0) -> tuple[Health, list, list]:
    """The counters after this step, the loadings (dead atoms re-initialised from
    ``candidates`` where given) and the warnings to give: ``(health, loadings, messages)``.

    Warns, each time the condition begins, when (a) every code of the batch is at a bound
    while the batch is not explained (positive loss), (b) atoms die: no active code for
    ``DEAD_ATOM_STEPS`` steps and ``DEAD_ATOM_SAMPLES`` samples, or a zero loading column
    (an atom that dies again after ``MAX_FUTILE_REINITS`` re-initialisations with no active
    code in between is given up: warned about once, and no longer re-initialised until one
    of its codes is active again), (c) the objective rises over blocks of steps
    (``BLOCK_STEPS``, ``RISE_BLOCKS``). Pure: nothing but the returned values changes.
    """
    R = int(tl.shape(loadings[0])[1])
    before = state.health if state.health is not None and len(
        state.health.idle_steps) == R else Health.start(R)
    n, loss = sums["n"], sums["loss"] / sums["n"]
    messages = []
    idle_steps, idle_samples = np.array(before.idle_steps), np.array(before.idle_samples)
    futile = _futile_reinits(before, R)
    bound_steps = before.bound_steps
    if "active_codes" in sums:
        idle = np.asarray(sums["active_codes"]) == 0
        idle_steps = np.where(idle, idle_steps + 1, 0)
        idle_samples = np.where(idle, idle_samples + n, 0)
        futile = np.where(idle, futile, 0)  # active again: its re-initialisations helped
        all_at_bound = sums["codes_at_bound"] == n * R and loss > 0
        bound_steps = bound_steps + 1 if all_at_bound else 0
        if bound_steps == 1:
            messages.append(f"every code of the batch at step {state.n_steps + 1} is at a "
                            f"bound (zero, or an end of the coder's box): the model cannot fit it. "
                            f"The codes' penalty or box may not suit the data's scale")
    else:  # without code counts no re-initialisation is known to be futile
        futile = np.zeros(R, dtype=np.int64)
    dead = (_zero_columns(loadings) | ((idle_steps >= DEAD_ATOM_STEPS) &
                                       (idle_samples >= DEAD_ATOM_SAMPLES)))
    if dead.any():
        loadings, renewed, found = _handle_dead(algorithm, loadings, dead, futile, candidates,
                                                _was_dead(before, state.loadings), scale)
        idle_steps = np.where(renewed, 0, idle_steps)
        idle_samples = np.where(renewed, 0, idle_samples)
        futile = futile + renewed
        messages.extend(found)
    block, means = _blocks(before, sums["loss"], n)
    if _rising(means) and not _rising(before.block_means):
        messages.append(f"the objective rose over the last {RISE_BLOCKS} blocks of "
                        f"{BLOCK_STEPS}+ steps (mean loss per sample "
                        f"{' -> '.join(f'{m:.4g}' for m in means)}): the steps may be too "
                        f"large, or the stream drifted")
    health = Health(idle_steps=_plain(idle_steps), idle_samples=_plain(idle_samples),
                    bound_steps=bound_steps, block=block, block_means=means,
                    futile_reinits=_plain(futile))
    return health, loadings, messages


def _plain(counts: Any) -> tuple:
    """Per-atom counts as a tuple of plain ints (JSON in checkpoints), in one call, not one
    per atom (this runs at every step)."""
    return tuple(np.asarray(counts, dtype=np.int64).tolist())


def _futile_reinits(health: Health, R: int) -> np.ndarray:
    """The futile re-initialisations of the ``R`` atoms: zero where the counters predate
    them (a state or checkpoint written before they were kept)."""
    if len(health.futile_reinits) != R:
        return np.zeros(R, dtype=np.int64)
    return np.array(health.futile_reinits, dtype=np.int64)


def _blocks(before: Health, loss_sum: float, n: int) -> tuple[tuple, tuple]:
    """The open block ``(loss sum, samples, steps)`` and the last completed blocks' means,
    after a step whose losses add up to ``loss_sum`` over ``n`` samples."""
    total, samples, steps = before.block
    total, samples, steps = total + float(loss_sum), samples + int(n), steps + 1
    if steps >= BLOCK_STEPS and samples >= BLOCK_SAMPLES:
        return (0.0, 0, 0), (*before.block_means, total / samples)[-RISE_BLOCKS:]
    return (total, samples, steps), before.block_means


def _zero_columns(loadings: list) -> np.ndarray:
    """Atoms with a zero column in some loading."""
    norms = [np.asarray(tl.to_numpy(tl.sum(tl.abs(U), axis=0))) for U in loadings]
    return np.any(np.stack(norms) == 0, axis=0)


def _was_dead(health: Health, loadings: list) -> np.ndarray:
    idle = (np.array(health.idle_steps) >= DEAD_ATOM_STEPS) & (
        np.array(health.idle_samples) >= DEAD_ATOM_SAMPLES)
    return idle | _zero_columns(loadings)


def _rising(means: tuple) -> bool:
    if len(means) < RISE_BLOCKS:
        return False
    increasing = all(a < b for a, b in zip(means[:-1], means[1:]))
    return bool(increasing and means[0] > 0 and means[-1] > RISE_FACTOR * means[0])


def _handle_dead(algorithm: Algorithm, loadings: list, dead: np.ndarray, futile: np.ndarray,
                 candidates: Callable | None, was_dead: np.ndarray,
                 scale: float) -> tuple[list, np.ndarray, list]:
    """Re-initialise the dead atoms (where ``candidates`` is given) but those given up after
    ``MAX_FUTILE_REINITS`` futile re-initialisations, or report them once:
    ``(loadings, the atoms re-initialised, messages)``."""
    why = (f"their codes were zero for {DEAD_ATOM_STEPS} steps and {DEAD_ATOM_SAMPLES} "
           f"samples, or a loading column is zero")
    if candidates is None:
        if not (dead & ~was_dead).any():
            return loadings, np.zeros_like(dead), []
        return loadings, np.zeros_like(dead), [
            f"atom(s) {_atoms(dead)} are dead ({why}): the dictionary collapsed; "
            f"reinit_dead_atoms=True re-initialises them from the data"]
    given_up = dead & (futile >= MAX_FUTILE_REINITS)
    renewed, messages = dead & ~given_up, []
    if renewed.any():  # the batch is coded again for its samples on a cluster: only if needed
        atoms = _atoms(renewed)
        loadings = reinitialised(algorithm, loadings, atoms, candidates(len(atoms)), scale)
        messages.append(f"re-initialised dead atom(s) {atoms} from the batch's worst-explained "
                        f"samples ({why}); reinit_dead_atoms=False turns this off")
    if (given_up & ~was_dead).any():  # a given-up atom stays dead: said once
        messages.append(f"atom(s) {_atoms(given_up & ~was_dead)} died again after being "
                        f"re-initialised {MAX_FUTILE_REINITS} times, none of their codes "
                        f"active in between: the codes' penalty or box may leave them no "
                        f"activity on this data's scale. They are no longer re-initialised")
    return loadings, renewed, messages


def _atoms(mask: np.ndarray) -> list:
    """The atoms a per-atom mask holds, as plain ints (for messages and indexing)."""
    return [int(r) for r in np.flatnonzero(mask)]


def reinitialised(algorithm: Algorithm, loadings: list, atoms: list, samples: Any,
                  scale: float = 1.0) -> list:
    """``loadings`` with the atoms ``atoms`` replaced by rank-one approximations of
    ``samples`` (one sample per atom, cycling when there are fewer samples), each loading
    column of unit norm but the first mode's, which takes the living atoms' mean norm
    (``algorithm.reinit_norm(scale)`` when none lives); then projected on the algorithm's
    constraint set at the data scale ``scale`` (``algorithm.project_loading``)."""
    nonnegative = bool(getattr(algorithm, "nonnegative", False))
    first_norms = np.asarray(tl.to_numpy(tl.norm(loadings[0], axis=0)))
    alive = np.setdiff1d(np.arange(len(first_norms)), atoms)
    size = float(np.mean(first_norms[alive])) if len(alive) else algorithm.reinit_norm(scale)
    vectors = {r: _rank_one(samples[i % int(tl.shape(samples)[0])], nonnegative)
               for i, r in enumerate(atoms)}
    out = []
    for k, U in enumerate(loadings):
        columns = [vectors[r][k] * (size if k == 0 else 1.0) if r in vectors else U[:, r]
                   for r in range(int(tl.shape(U)[1]))]
        U = tl.stack(columns, axis=1)
        out.append(algorithm.project_loading(U, scale))
    return out


def _rank_one(sample: Any, nonnegative: bool, n_iter: int = 5) -> list:
    """Unit vectors ``u_1, ..., u_n`` of a rank-one approximation of ``sample`` by a few
    higher-order power iterations, started from the fibers' norms (nonnegative, so a
    nonnegative sample keeps a nonnegative approximation)."""
    n = tl.ndim(sample)
    if n == 1:  # a vector is its own rank-one approximation
        vectors = [_unit(sample)]
    else:
        vectors = [_unit(tl.sqrt(tl.sum(tl.unfold(sample, k) ** 2, axis=1))) for k in range(n)]
        for _ in range(n_iter):
            for k in range(n):
                vectors[k] = _unit(tl.tenalg.multi_mode_dot(sample, vectors, skip=k))
    if nonnegative:
        vectors = [_unit(tl.clip(v, 0, None)) if float(tl.max(v)) > 0 else _unit(tl.abs(v))
                   for v in vectors]
    return vectors


def _unit(v: Any) -> Any:
    """``v`` scaled to unit norm (a constant unit vector for a zero ``v``), in ``v``'s dtype:
    Python floats only, since a numpy float64 divisor would promote float32 state to float64
    and make its checkpoint unloadable."""
    largest = float(tl.max(tl.abs(v))) if tl.shape(v)[0] else 0.0
    if largest > 0 and np.isfinite(largest):
        v = v / largest  # first to O(1): the norm of a tiny (or huge) v under- or overflows
        return v / float(tl.norm(v))
    return tl.ones(tl.shape(v), **tl.context(v)) / math.sqrt(float(tl.shape(v)[0]))
