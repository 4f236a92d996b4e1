"""The learners by name: one registry for the command line, checkpoints and the accessor.

Every learner of the package is one :class:`Entry`: its registry name (the ``--model`` of
``tensorstream fit``), where its class lives, a one-line summary and how the command line treats
it. Classes are imported only when asked for (:func:`learner_class`), so this module imports no
learner module and can be imported from anywhere, ``tensorstream.io`` included, without forming
an import circle; a learner whose module is missing breaks nothing until it is asked for.

Examples
--------
>>> from tensorstream.learners.registry import entry, learner_class, registered
>>> learner_class("ocpdl").__name__
'OnlineCPDL'
>>> learner_class("OnlineNMF") is learner_class("nmf")
True
>>> entry("robust-pca").class_name
'OnlineRobustPCA'
>>> [e.name for e in registered("batch")]
['robust-nmf-batch', 'robust-pca-batch']
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Mapping

__all__ = ["KINDS", "Entry", "entry", "learner_class", "register", "registered"]

#: How a learner consumes data. ``"online"``: mini-batch by mini-batch through ``partial_fit``
#: (``tensorstream fit`` streams a file into it); ``"finite"``: stochastic steps over a finite
#: data set held whole; ``"batch"``: full-data iterations. Only online learners are offered by
#: ``tensorstream fit``; all of them can be looked up (e.g. to restore a checkpoint).
KINDS = ("online", "finite", "batch")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One registered learner.

    Parameters
    ----------
    name : str
        Registry name, e.g. ``"ocpdl"``: the ``--model`` of ``tensorstream fit``.
    module, class_name : str
        Where the class lives (imported on use, by :meth:`load`).
    summary : str
        One line for ``--help`` and the documentation.
    matrix : bool, default False
        The learner factorizes matrices: without ``--modes``, all feature dims form one mode.
    kind : {"online", "finite", "batch"}, default "online"
        How it consumes data (see :data:`KINDS`); only online learners can be streamed.
    aliases : mapping, optional
        Command-line option to the learner's parameter, where the names differ (e.g. ``alpha``
        is ``alpha_W`` for the scikit-learn compatible NMF).
    """

    name: str
    module: str
    class_name: str
    summary: str
    matrix: bool = False
    kind: str = "online"
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def streamable(self) -> bool:
        """Whether ``tensorstream fit`` can stream a file into it (an online learner)."""
        return self.kind == "online"

    @property
    def installed(self) -> bool:
        """Whether the module can be found (without importing it)."""
        try:
            return importlib.util.find_spec(self.module) is not None
        except ModuleNotFoundError:
            return False

    def load(self) -> type:
        """The learner class, imported now.

        Raises
        ------
        ValueError
            The learner's module is not installed.
        """
        if not self.installed:
            raise ValueError(f"model {self.name!r} is not available in this installation "
                             f"({self.module} is missing)")
        return getattr(importlib.import_module(self.module), self.class_name)


_ENTRIES: dict[str, Entry] = {}


def register(new: Entry) -> Entry:
    """Add a learner to the registry and return its entry.

    Parameters
    ----------
    new : Entry
        The learner's names, where its class lives and its one-line summary.

    Returns
    -------
    Entry
        ``new`` itself, so that a module can register and keep its entry in one line.

    Raises
    ------
    ValueError
        Its name or class name is taken already.

    Notes
    -----
    A learner of another package is one call, made before the command line is built::

        register(Entry("my-model", "mypackage.learners", "MyLearner", "what it does"))
    """
    taken = {key for e in _ENTRIES.values() for key in (e.name, e.class_name)}
    clash = {new.name, new.class_name} & taken
    if clash:
        raise ValueError(f"already registered: {sorted(clash)}")
    _ENTRIES[new.name] = new
    return new


for _entry in (
    Entry("ocpdl", "tensorstream.learners.ocpdl", "OnlineCPDL",
          "online CP-dictionary learning, sparse nonnegative codes (Lyu, Strohmeier & Needell)"),
    Entry("nmf", "tensorstream.learners.nmf", "OnlineNMF",
          "online NMF with scikit-learn MiniBatchNMF's penalties (alpha_W, alpha_H, l1_ratio)",
          matrix=True,
          aliases={"alpha": "alpha_W"}),
    Entry("robust-nmf", "tensorstream.learners.robust_nmf", "RobustOnlineNMF",
          "online NMF with sparse outliers (Zhao & Tan)"),
    Entry("maxnorm", "tensorstream.learners.maxnorm", "OnlineMaxNormMD",
          "online max-norm matrix decomposition, sparse corruption (Shen, Xu & Li)",
          matrix=True),
    Entry("robust-pca", "tensorstream.learners.robust_pca", "OnlineRobustPCA",
          "online robust PCA (Feng, Xu & Yan)", matrix=True),
    Entry("divergence-nmf", "tensorstream.learners.divergence_nmf", "OnlineDivergenceNMF",
          "online NMF/CP with general divergences (Zhao, Tan & Xu)"),
    Entry("vr-mf", "tensorstream.learners.variance_reduced", "VarianceReducedMF",
          "variance-reduced stochastic matrix factorization (Zhao, Haskell & Feng)",
          matrix=True, kind="finite"),
    Entry("robust-nmf-batch", "tensorstream.learners.robust_nmf_batch", "RobustNMF",
          "batch robust NMF with outliers, BPGD or BADMM (Zhao & Tan)", matrix=True,
          kind="batch"),
    Entry("robust-pca-batch", "tensorstream.learners.robust_pca", "RobustPCA",
          "principal component pursuit by the inexact augmented Lagrangian method "
          "(Lin, Chen & Ma)", matrix=True, kind="batch"),
):
    register(_entry)
del _entry


def registered(kind: str | None = None) -> tuple[Entry, ...]:
    """The registered learners, in registration order.

    Parameters
    ----------
    kind : {"online", "finite", "batch"}, optional
        Only those of this kind (default: all).

    Returns
    -------
    tuple of Entry

    Examples
    --------
    >>> [e.name for e in registered("online")][:3]
    ['ocpdl', 'nmf', 'robust-nmf']
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return tuple(e for e in _ENTRIES.values() if kind is None or e.kind == kind)


def entry(name: str) -> Entry:
    """The entry of a learner, by registry name or class name.

    Parameters
    ----------
    name : str
        A registry name (``"nmf"``) or a class name (``"OnlineNMF"``).

    Returns
    -------
    Entry
        The registered entry of that name (its class is imported only by ``Entry.load``).

    Raises
    ------
    ValueError
        Unknown name; the message lists the names there are.

    Examples
    --------
    >>> entry("OnlineNMF").name
    'nmf'
    """
    for e in _ENTRIES.values():
        if name in (e.name, e.class_name):
            return e
    raise ValueError(f"unknown model {name!r}; choose from {sorted(_ENTRIES)} or the class "
                     f"names {sorted(e.class_name for e in _ENTRIES.values())}")


def learner_class(model: str | type) -> type:
    """The learner class of a registry name or class name, imported now.

    Parameters
    ----------
    model : str or type
        A registry name (``"ocpdl"``), a class name (``"OnlineCPDL"``), or a learner class,
        returned as it is (registered or not).

    Returns
    -------
    type

    Raises
    ------
    ValueError
        Unknown name (the message lists the names), or a learner that is not installed.
    TypeError
        ``model`` is neither a string nor a class.

    Examples
    --------
    >>> learner_class("divergence-nmf").__name__
    'OnlineDivergenceNMF'
    """
    if isinstance(model, type):
        return model
    if not isinstance(model, str):
        raise TypeError(f"model must be a model name or a learner class, got {model!r}")
    return entry(model).load()
