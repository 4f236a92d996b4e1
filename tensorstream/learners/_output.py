"""scikit-learn's output API: the names of a learner's output features, and the container that
``transform`` and ``fit_transform`` return (``set_output``).

A learner's output features are its codes, one per atom, named as scikit-learn names the
components of its decompositions: the class name in lower case and the atom's number
(``onlinenmf0``, ``onlinenmf1``, ...). A learner whose ``fit_transform`` returns the data's
own features (``RobustPCA``'s low-rank part) names them after the input features instead.

``set_output(transform="pandas")`` (or ``"polars"``) makes ``transform`` and ``fit_transform``
return a DataFrame with those names as columns (and, for a pandas DataFrame given, its index),
so that a learner fits into a scikit-learn ``Pipeline`` or ``ColumnTransformer`` configured
with ``set_output``; a learner without its own choice follows scikit-learn's global
``sklearn.set_config(transform_output=...)``, as scikit-learn's transformers do. The setting
lives where scikit-learn keeps it, ``_sklearn_output_config``, so that ``sklearn.base.clone``
and pickling keep it; checkpoints keep it too. Labelled input keeps giving labelled output
(a ``DataArray`` already names its dims and coords), and the default container is the
backend's tensor, as before.

scikit-learn itself is not needed: these are plain methods with its names and rules.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import sys
from typing import Any

import numpy as np
import tensorly as tl
import xarray as xr

from ..core.backend import to_numpy
from ..core.caller import warn
from ..core.validation import feature_names, is_data_frame

#: the methods whose output ``set_output`` configures
OUTPUT_METHODS = ("transform", "fit_transform")
#: the containers ``set_output(transform=...)`` accepts (scikit-learn's names)
CONTAINERS = ("default", "pandas", "polars")


def check_container(container: Any) -> str:
    """``container`` if it is one of :data:`CONTAINERS` whose library can be imported, else a
    ``ValueError`` (or ``ImportError``) naming the argument."""
    if not isinstance(container, str) or container not in CONTAINERS:
        raise ValueError(f"transform must be one of {list(CONTAINERS)} or None, got "
                         f"{container!r}")
    if container != "default":
        try:
            importlib.import_module(container)
        except ImportError:
            raise ImportError(f"set_output(transform={container!r}) needs {container}; "
                              f"install it (pip install {container})") from None
    return container


def input_feature_names(learner: Any, input_features: Any) -> np.ndarray:
    """The input features' names by scikit-learn's rule: ``feature_names_in_`` (or ``x0``,
    ``x1``, ...) when ``input_features`` is None; else ``input_features``, checked against
    them."""
    fitted = learner.__dict__.get("feature_names_in_")
    n_features = int(learner.n_features_in_)
    if input_features is None:
        if fitted is not None:
            return np.asarray(fitted, dtype=object)
        return np.asarray([f"x{i}" for i in range(n_features)], dtype=object)
    names = np.asarray(input_features, dtype=object)
    if names.ndim != 1:
        raise ValueError(f"input_features must be a 1-D list of names, got shape {names.shape}")
    if fitted is not None and (len(names) != len(fitted) or np.any(names != fitted)):
        raise ValueError(f"input_features is not equal to feature_names_in_: "
                         f"{list(names)} against {list(fitted)}")
    if len(names) != n_features:
        raise ValueError(f"input_features should have length equal to the number of features "
                         f"({n_features}), got {len(names)}")
    return names


def component_names(learner: Any, n_components: int) -> np.ndarray:
    """``<class name in lower case><k>`` for the ``n_components`` atoms (scikit-learn's rule
    for the components of a decomposition)."""
    prefix = type(learner).__name__.lower()
    return np.asarray([f"{prefix}{k}" for k in range(n_components)], dtype=object)


#: set while the library calls ``transform`` for its own use (``to_cp_tensor``,
#: ``reconstruct``): the codes stay the backend's tensors whatever ``set_output`` chose
_PLAIN = contextvars.ContextVar("tensorstream_plain_output", default=False)


@contextlib.contextmanager
def plain_output():
    """``transform`` and ``fit_transform`` give the backend's tensors inside the block (the
    library's own calls: a DataFrame of codes is for the user, not for the next step)."""
    token = _PLAIN.set(True)
    try:
        yield
    finally:
        _PLAIN.reset(token)


def configured(method: Any) -> Any:
    """``method`` (a ``transform`` or ``fit_transform``) returning the container the learner's
    ``set_output`` chose; its first argument ``X`` gives the pandas index."""

    @functools.wraps(method)
    def in_configured_container(self: Any, X: Any, *args: Any, **kwargs: Any) -> Any:
        result = method(self, X, *args, **kwargs)
        container = "default" if _PLAIN.get() else chosen_container(self)
        if container == "default" or is_data_frame(result) or isinstance(result, xr.DataArray):
            return result  # a DataFrame made by an inner transform, or labelled output
        return _frame(container, to_numpy(result), self.get_feature_names_out(),
                      getattr(X, "index", None) if is_data_frame(X) else None)

    in_configured_container._output_configured = True
    return in_configured_container


def chosen_container(learner: Any) -> str:
    """The learner's ``set_output`` choice; without one, scikit-learn's global
    ``set_config(transform_output=...)`` where scikit-learn is in use (imported), as its own
    transformers follow it; else the default."""
    container = getattr(learner, "_sklearn_output_config", {}).get("transform")
    if container is not None:
        return container
    sklearn = sys.modules.get("sklearn")
    if sklearn is None:  # not imported: nobody set its global configuration
        return "default"
    return sklearn.get_config().get("transform_output", "default")


def _frame(container: str, data: np.ndarray, columns: np.ndarray, index: Any) -> Any:
    """``data`` (a matrix) as a pandas or polars DataFrame with these columns."""
    columns = [str(name) for name in columns]
    if container == "pandas":
        import pandas as pd

        return pd.DataFrame(data, columns=columns, index=index)
    import polars as pl

    return pl.DataFrame(data, schema=columns, orient="row")


def replace_flagged(X: Any, low_rank: Any, outliers: Any, mask: Any = None) -> Any:
    """``X`` with the entries flagged as outliers (``outliers != 0``) or missing (``mask``
    0) replaced by ``low_rank``: what every robust learner's ``denoise`` returns (tensors
    of the active backend, ``mask`` 0/1 in ``X``'s dtype)."""
    cleaned = tl.where(outliers == 0, X, low_rank)
    if mask is None:
        return cleaned
    return cleaned * mask + low_rank * (1 - mask)


class OutputAPI:
    """scikit-learn's output API on a learner: the names of its output features, the container
    ``set_output`` chose, the input's feature names (``feature_names_in_``) checked on every
    call, and what a checkpoint keeps of them."""

    #: ``fit_transform`` returns the input's own features (not codes): the output features
    #: are named after the input's
    _output_follows_input = False

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the output features of ``transform``: ``<class name><k>`` for the
        ``k``-th atom's codes (``onlinenmf0``, ``onlinenmf1``, ...), as scikit-learn names a
        decomposition's; the input's names where the output is the input's own features.

        Parameters
        ----------
        input_features : list of str, optional
            The input features' names, checked against ``feature_names_in_`` (when fitted on
            a DataFrame) and ``n_features_in_``.

        Returns
        -------
        ndarray of str objects
        """
        self._check_fitted()
        names = input_feature_names(self, input_features)
        if self._output_follows_input:
            return names
        n_components = getattr(self, "n_components_", None)  # the batch learners have none
        return component_names(self, int(self.components_.shape[0]) if n_components is None
                               else int(n_components))

    def set_output(self, *, transform: str | None = None) -> Any:
        """Choose the container ``transform`` and ``fit_transform`` return: ``"pandas"`` or
        ``"polars"`` (a DataFrame whose columns are :meth:`get_feature_names_out`, with the
        index of a pandas DataFrame given), ``"default"`` (the backend's tensor), or None (no
        change). Labelled input keeps giving a ``DataArray``. scikit-learn's ``Pipeline`` and
        ``ColumnTransformer`` call it through their own ``set_output``.

        Parameters
        ----------
        transform : {"default", "pandas", "polars"} or None, default None
            The container (None: keep the current one).

        Returns
        -------
        self
        """
        if transform is not None:
            self._sklearn_output_config = {**getattr(self, "_sklearn_output_config", {}),
                                           "transform": check_container(transform)}
        return self

    def _check_feature_names(self, X: Any) -> None:
        """Data given to a fitted learner have the columns it was fitted with, by name
        (scikit-learn's rule: a DataFrame with its columns in another order would be read by
        position, silently); a missing name on either side is warned about."""
        names, fitted = feature_names(X), self.__dict__.get("feature_names_in_")
        if names is None or fitted is None:
            if (names is None) != (fitted is None) and self._fitted:
                which = "has feature names" if fitted is None else "has no feature names"
                how = "without" if fitted is None else "with"
                warn(f"X {which}, but {type(self).__name__} was fitted {how} feature names")
            return
        if len(names) != len(fitted) or np.any(names != fitted):
            raise ValueError(f"The feature names should match those that were passed during "
                             f"fit: {type(self).__name__} was fitted with {list(fitted)}, X has "
                             f"{list(names)}")

    def _keep_feature_names(self, names: Any) -> None:
        """Keep the columns of the DataFrame fitted on (``names``: :func:`feature_names` of
        the data; None keeps nothing), as scikit-learn keeps ``feature_names_in_``."""
        if names is not None:
            self.feature_names_in_ = names

    def _output_meta(self) -> dict:
        """What a checkpoint keeps of the output API: the input's feature names (fitted on
        a DataFrame) and the container ``set_output`` chose (``"default"`` included: an explicit
        choice overrides scikit-learn's global one)."""
        meta = {}
        names = self.__dict__.get("feature_names_in_")
        if names is not None:
            meta["feature_names"] = [str(name) for name in names]
        # any explicit choice, "default" included: it overrides scikit-learn's global one
        container = getattr(self, "_sklearn_output_config", {}).get("transform")
        if container is not None:
            meta["output"] = container
        return meta

    def _restore_output_meta(self, meta: dict, path: Any) -> None:
        """Set what :meth:`_output_meta` wrote (nothing for a learner fitted without names);
        a container whose library is missing here is warned about and left at the default:
        it is a presentation choice, not worth losing the learned state for."""
        names = meta.get("feature_names")
        if names is not None:
            if not (isinstance(names, list) and all(isinstance(n, str) for n in names)
                    and len(names) == self.n_features_in_):
                raise ValueError(f"cannot read checkpoint {str(path)!r}: its feature names are "
                                 f"not {self.n_features_in_} strings")
            self.feature_names_in_ = np.asarray(names, dtype=object)
        if meta.get("output") is not None:
            try:
                self.set_output(transform=meta["output"])
            except ImportError as error:
                warn(f"checkpoint {str(path)!r}: {error}; its learner gives the default output")
            except ValueError:
                raise ValueError(f"cannot read checkpoint {str(path)!r}: its output container "
                                 f"{meta['output']!r} is none of {list(CONTAINERS)}") from None
