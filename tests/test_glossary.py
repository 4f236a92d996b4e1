"""docs/glossary.md names every public parameter of every learner (issue 33): a parameter a
learner gains without its line in the glossary fails here, read from the learners
themselves."""

import inspect
import re
from pathlib import Path

from tensorstream.learners.registry import learner_class, registered

GLOSSARY = Path(__file__).resolve().parents[1] / "docs" / "glossary.md"


def _parameters() -> dict[str, list[str]]:
    """Every ``__init__`` parameter of every registered learner: ``{name: [classes]}``."""
    names: dict[str, list[str]] = {}
    for entry in registered():
        cls = learner_class(entry.name)
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            if name != "self" and parameter.kind not in (parameter.VAR_POSITIONAL,
                                                         parameter.VAR_KEYWORD):
                names.setdefault(name, []).append(cls.__name__)
    return names


def _listed() -> set[str]:
    """The names in backticks in the first cell of the glossary's table rows."""
    listed = set()
    for line in GLOSSARY.read_text().splitlines():
        cells = line.split("|")
        if line.startswith("|") and len(cells) > 2:
            listed |= set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[1]))
    return listed


def test_every_parameter_of_every_learner_has_its_line_in_the_glossary():
    names = _parameters()
    # the registry was read (issue 33 folds flag-dependent parameters into dicts: 84 names)
    assert len(registered()) >= 9 and len(names) > 60
    missing = {name: classes for name, classes in names.items() if name not in _listed()}
    assert not missing, f"add these to docs/glossary.md: {missing}"


def test_the_glossary_keeps_no_line_for_a_renamed_parameter():
    """One name per concept: the names replaced in issue 33 have no line of their own."""
    assert not {"code_solver", "basis_solver", "basis_sweeps", "dict_max_iter", "kappa",
                "accelerated"} & _listed()
