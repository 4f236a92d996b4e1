"""One description of every argument the learners' public methods share.

``fit(X, mask=..., sample_dim=..., modes=..., client=...)`` has the same arguments in nine
learners, ``transform(X, mask)`` in seven: written out in each docstring they would drift
apart, and left out (``**fit_params``, "see OnlineEstimator.fit") they are invisible in
``help()`` and on the API pages. :func:`complete_parameters` fills the numpydoc ``Parameters``
section of a method from :data:`PARAMETERS`, for every argument of its real signature that the
method does not describe itself; every learner's public methods get it when the class is made
(``CheckedParameters.__init_subclass__``), so a new method or argument without a description
is an error at import, not a gap on a page.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

_X_SAMPLES = """X : array of shape (n_samples, I_1, ..., I_n), DataFrame or xarray.DataArray
    Samples on the first axis, of the fitted shape (a DataArray is laid out as the learner
    was fitted: the same ``sample_dim`` and ``modes``)."""

_LABELS = """For DataArray input: the dim along which samples lie."""

#: ``name`` or ``(method, name)`` -> its numpydoc entry (the first line ``name : type``)
PARAMETERS: dict[str | tuple[str, str], str] = {
    ("fit", "X"): """X : array of shape (n_samples, ...), xarray.DataArray, or iterable of batches
    An array is streamed as ``max_iter`` shuffled passes of ``batch_size`` samples, a
    DataArray along ``sample_dim`` (a dask-backed one is read batch by batch);
    ``max_iter="auto"`` is 10 passes, or more on small arrays (:func:`fit_passes`). Sparse
    matrices (scipy.sparse, 2-D ``sparse.COO``) are streamed as CSR row batches. Any other
    iterable (a stream from :mod:`tensorstream.streams`, a generator, a list of arrays) is
    consumed batch by batch.""",
    ("partial_fit", "X"): """X : array of shape (b, I_1, ..., I_n) or xarray.DataArray
    The batch; a DataArray is laid out by ``sample_dim`` and ``modes`` (see ``fit``), given
    with the first batch and kept for the next ones.""",
    "X": _X_SAMPLES,
    "y": """y : None
    Ignored: there for scikit-learn's API (pipelines pass it).""",
    ("fit", "mask"): """mask : boolean array of X's shape, optional
    True where an entry is observed (array input); a stream may yield ``(X, mask)`` pairs
    instead. Missing entries never influence the result.""",
    "mask": """mask : boolean array of X's shape, optional
    True where an entry is observed; missing entries (also NaN with ``missing="nan"``) never
    influence the result.""",
    "n_steps": """n_steps : int, optional
    Stop after this many mini-batches (needed for infinite streams; a stream without a length
    is read for at most 10,000 with a warning).""",
    "sample_dim": f"""sample_dim : str, optional
    {_LABELS}""",
    "modes": """modes : list or str, optional
    One entry per CP mode, stacked into one mode where it holds several (their joint
    features are learned). Arrays and streams: axis groups of a sample, e.g. ``[(0, 1), 2]``
    (the sample axis excluded, negative axes allowed; the learner's ``array_layout_`` keeps
    the grouping and :func:`tensorstream.unstack_loadings` gives each loading its group's
    shape). DataArrays: dim names, e.g. ``[("y", "x"), "channel"]``. Both take the text
    ``"0,1;2"`` / ``"y,x;channel"``. None makes every axis (dim) a mode; in ``partial_fit``
    it is given with the first batch (later ones are regrouped alike). See
    :mod:`tensorstream.modes`.""",
    "client": """client : dask.distributed.Client, str or None, optional
    Run on a Dask cluster: every step's batch (or full pass) is split across the workers,
    which return additive sums; the result equals the single-process one. A client, a
    scheduler address, or ``"local"`` (a local cluster of one worker process per core, closed
    afterwards). See :mod:`tensorstream.engine.distributed`.""",
    "sample_weight": """sample_weight : array of shape (n_samples,), optional
    Weights of the samples in the mean (default: equal).""",
    "codes": """codes : array of shape (n_samples, n_components) or xarray.DataArray
    Codes as :meth:`transform` returns them (a DataArray from labelled data gives the samples
    back labelled).""",
    "H": """H : array of shape (n_samples, n_components)
    Codes as :meth:`transform` returns them.""",
    "deep": """deep : bool, default True
    Ignored (a learner holds no nested estimators): there for scikit-learn's API.""",
    "params": """**params : dict
    Parameters by name, as ``__init__`` takes them; they are validated when the learner next
    learns.""",
    "path": """path : str or path-like
    The ``.npz`` file (written atomically, no pickle); :func:`tensorstream.load` resumes it.""",
}


def description(method: str, name: str, owner: str) -> str:
    """The shared entry of argument ``name`` of ``method``; a ``TypeError`` names the method
    when there is none (a new argument must be documented somewhere)."""
    for key in ((method, name), name):
        if key in PARAMETERS:
            return PARAMETERS[key]
    raise TypeError(f"{owner}.{method}: argument {name!r} has no description in its docstring "
                    f"nor in tensorstream.learners._docs.PARAMETERS")


_HEADER = re.compile(r"^(\w[\w ]*)\n-{3,}\n", re.M)


def documented(doc: str) -> set[str]:
    """The names a numpydoc docstring (cleaned) describes in its Parameters sections."""
    names = set()
    for match in _HEADER.finditer(doc):
        if match.group(1) not in ("Parameters", "Other Parameters"):
            continue
        for line in _section_body(doc, match.end()).splitlines():
            if line and not line[0].isspace():
                names.update(n.strip().lstrip("*") for n in line.split(":")[0].split(","))
    return names


def _section_body(doc: str, start: int) -> str:
    following = _HEADER.search(doc, start)
    return doc[start:following.start() if following else len(doc)].rstrip("\n")


def complete_parameters(function: Callable, owner: str) -> None:
    """Add to ``function``'s docstring the shared entries of the arguments it leaves out."""
    doc = inspect.cleandoc(function.__doc__ or "")
    arguments = [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]
    missing = [name for name in arguments if name not in documented(doc)]
    if not missing:
        return
    entries = "\n".join(description(function.__name__, name, owner) for name in missing)
    function.__doc__ = _insert_parameters(doc, entries)


def _insert_parameters(doc: str, entries: str) -> str:
    """``doc`` with ``entries`` at the end of its Parameters section (made, before the first
    other section, where there is none)."""
    sections = list(_HEADER.finditer(doc))
    for match in sections:
        if match.group(1) == "Parameters":
            end = match.end() + len(_section_body(doc, match.end()))
            return f"{doc[:end]}\n{entries}{doc[end:]}"
    if sections:
        start = sections[0].start()
        return f"{doc[:start]}Parameters\n----------\n{entries}\n\n{doc[start:]}"
    return f"{doc}\n\nParameters\n----------\n{entries}\n"
