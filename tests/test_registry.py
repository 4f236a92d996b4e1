"""The learner registry: lookups by registry name, class name and class; clear errors; lazy."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tensorstream
from tensorstream import (
    OnlineCPDL,
    OnlineDivergenceNMF,
    OnlineNMF,
    RobustNMF,
    RobustPCA,
    VarianceReducedMF,
)
from tensorstream.learners import registry
from tensorstream.learners.registry import Entry, entry, learner_class, register, registered


@pytest.fixture
def own_registry(monkeypatch):
    """Registrations made by a test are undone after it."""
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))


def test_lookup_by_registry_name_class_name_and_class():
    assert learner_class("ocpdl") is learner_class("OnlineCPDL") is OnlineCPDL
    assert learner_class("nmf") is OnlineNMF
    assert learner_class("divergence-nmf") is OnlineDivergenceNMF
    assert learner_class(OnlineNMF) is OnlineNMF
    assert entry("OnlineNMF") is entry("nmf")


def test_every_public_learner_is_registered_once():
    entries = registered()
    assert len({e.name for e in entries}) == len({e.class_name for e in entries}) == len(entries)
    public = {name for name in tensorstream.__all__
              if isinstance(getattr(tensorstream, name), type)
              and hasattr(getattr(tensorstream, name), "fit")}
    assert public == {e.class_name for e in entries}
    for e in entries:
        assert learner_class(e.name) is getattr(tensorstream, e.class_name)


def test_kinds_keep_the_non_streamable_learners_out_of_the_command():
    assert entry("vr-mf").load() is VarianceReducedMF and entry("vr-mf").kind == "finite"
    assert [e.load() for e in registered("batch")] == [RobustNMF, RobustPCA]
    assert all(e.streamable for e in registered("online"))
    assert not any(e.streamable for e in registered() if e.kind != "online")
    assert entry("nmf").matrix and not entry("ocpdl").matrix
    assert entry("nmf").aliases == {"alpha": "alpha_W"}


def test_unknown_names_list_the_names_there_are():
    with pytest.raises(ValueError, match=r"unknown model 'pca'; choose from \[.*'ocpdl'.*"
                                         r"class names \[.*'OnlineCPDL'"):
        learner_class("pca")
    with pytest.raises(ValueError, match="unknown model 'Ocpdl'"):
        entry("Ocpdl")
    with pytest.raises(TypeError, match="model must be a model name or a learner class"):
        learner_class(3)
    with pytest.raises(ValueError, match="kind must be one of"):
        registered("streaming")
    with pytest.raises(ValueError, match="kind must be one of"):
        Entry("x", "m", "X", "summary", kind="streaming")


def test_a_missing_module_is_reported_when_asked_for(own_registry):
    ghost = register(Entry("ghost", "tensorstream.learners.ghost", "Ghost", "not installed"))
    assert not ghost.installed and entry("Ghost") is ghost
    with pytest.raises(ValueError, match="'ghost' is not available in this installation"):
        learner_class("ghost")
    with pytest.raises(ValueError, match=r"already registered: \['Ghost', 'nmf'\]"):
        register(Entry("nmf", "m", "Ghost", "a second nmf"))


def test_importing_the_registry_imports_no_learner():
    """A fresh interpreter with a bare ``tensorstream`` package (its ``__init__``, which imports
    every learner, not run): the registry loads alone, and a lookup loads what it needs only."""
    package = Path(tensorstream.__file__).parent
    code = textwrap.dedent(f"""
        import sys, types
        package = types.ModuleType("tensorstream")
        package.__path__ = [{str(package)!r}]
        sys.modules["tensorstream"] = package
        import tensorstream.learners.registry as registry
        loaded = sorted(m for m in sys.modules if m.startswith("tensorstream."))
        assert loaded == ["tensorstream.learners", "tensorstream.learners.registry"], loaded
        assert registry.entry("ocpdl").installed
        assert "tensorstream.learners.ocpdl" not in sys.modules
        assert registry.learner_class("OnlineMaxNormMD").__name__ == "OnlineMaxNormMD"
        assert "tensorstream.learners.maxnorm" in sys.modules
        assert "tensorstream.learners.variance_reduced" not in sys.modules
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def models_table() -> str:
    """The model table of docs/cli.md, as the registry has it."""
    rows = ["| name | learner | kind | what it is |", "|---|---|---|---|"]
    for e in registered():
        kind = e.kind + (", matrix" if e.matrix else "")
        aliases = "".join(f"; `--{option}` sets `{param}`" for option, param in e.aliases.items())
        rows.append(f"| `{e.name}` | `{e.class_name}` | {kind} | {e.summary}{aliases} |")
    return "\n".join(rows) + "\n"


def test_docs_list_every_registered_model():
    """docs/cli.md holds the table above: no model is missing there, none is described wrongly."""
    docs = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    assert models_table() in docs, f"replace the model table of docs/cli.md by\n{models_table()}"
