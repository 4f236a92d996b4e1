"""Learner parameters given on the command line as ``--param KEY=VALUE``, for every command.

One parser, so that ``tensorstream fit`` and ``tensorstream select`` read values alike and
refuse alike a name the learner does not take (a typo would otherwise fail deep in the
learner, or not at all).
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from .errors import CLIError

__all__ = ["add_params", "literal", "parameter_names"]


def literal(text: str) -> Any:
    """``0.1`` -> float, ``None`` -> None, ``'kl'`` or ``kl`` -> str."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parameter_names(cls: type) -> list[str]:
    """The parameters a learner class takes (its ``__init__``'s, or ``_param_names``)."""
    names = getattr(cls, "_param_names", None)
    if names is not None:
        return list(names())
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


def add_params(params: dict, items: Iterable[str], cls: type, model: str,
               spell: Callable[[str], str] | None = None) -> dict:
    """``params`` with the ``KEY=VALUE`` items added, every name checked against ``cls``.

    Parameters
    ----------
    params : dict
        The parameters set by other options; updated in place and returned.
    items : iterable of str
        The ``--param`` values, ``KEY=VALUE`` each, the value read as a Python literal (else
        kept as text).
    cls : type
        The learner class: a name it does not take (in ``params`` or ``items``) is an error.
    model : str
        The learner's name on the command line (``--model``), for the error.
    spell : callable, optional
        The command-line spelling of a parameter name (``"random_state"`` -> ``"--seed"``);
        default ``--param NAME``.

    Returns
    -------
    dict
        ``params``.

    Raises
    ------
    CLIError
        An item without ``=`` or a key, or a name ``cls`` does not take (all such names).
    """
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"--param expects KEY=VALUE, got {item!r}")
        params[key.strip()] = literal(text.strip())
    accepted = parameter_names(cls)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        spell = spell or (lambda name: f"--param {name}")
        shown = ", ".join(spell(k) for k in unknown)
        raise CLIError(f"{shown} does not apply to --model {model}; its parameters "
                       f"are {accepted}")
    return params
