"""Every Examples section in the package's docstrings runs and prints what it claims."""

import doctest
import importlib
import pkgutil

import pytest

import tensorstream

MODULES = sorted(name for _, name, _ in pkgutil.walk_packages(tensorstream.__path__,
                                                              "tensorstream.")
                 if not name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0
