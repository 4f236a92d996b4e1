"""The import graph (``tools/check_layers.py``, run by CI): no circle, no import up the layers.

The package is checked as it stands, and the check itself is shown to catch what it is for on a
small package written to a temporary folder: a planted circle (one side a lazy import inside a
function), a planted upward import (relative), and a module that no layer holds.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

from scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "check_layers.py"


check_layers = load_script("tools/check_layers.py")

#: the planted package's layers, bottom first
PLANTED_LAYERS = (("low", ("pkg.low", "pkg.sub")), ("high", ("pkg.high", "pkg")))


def plant(folder, files):
    """A package ``pkg`` under ``folder`` with the given modules (relative path -> source)."""
    package = folder / "pkg"
    for relative, source in {"__init__.py": "", "sub/__init__.py": "", **files}.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return package


def test_the_package_has_no_circle_and_no_import_up_the_layers():
    assert check_layers.problems(ROOT / "tensorstream") == []


def test_the_graph_is_read_with_relative_lazy_and_submodule_imports():
    """The check is not vacuous: it reads arrows the package is known to have, of every kind."""
    graph = check_layers.import_graph(ROOT / "tensorstream")
    assert "tensorstream.coders.lasso" in graph["tensorstream.algorithms.surrogate_cp"]  # ..coders
    assert "tensorstream.labels" in graph["tensorstream.accessor"]  # lazy `from . import labels`
    assert "tensorstream.learners.registry" in graph["tensorstream.io.checkpoint"]
    assert sum(map(len, graph.values())) > 100


def test_a_planted_circle_is_caught_and_named(tmp_path):
    package = plant(tmp_path, {
        "sub/a.py": "from . import b\n",
        "sub/b.py": "def later():\n    from pkg.sub.a import later  # lazy, still a tie\n",
        "low.py": "", "high.py": "from .sub import a\n",
    })
    found = check_layers.problems(package, PLANTED_LAYERS)
    assert len(found) == 1
    assert found[0].startswith("import circle between pkg.sub.a, pkg.sub.b")
    assert "pkg.sub.b -> pkg.sub.a (line 2)" in found[0]


def test_a_planted_upward_import_is_caught_and_named(tmp_path):
    package = plant(tmp_path, {"low.py": "import math\nfrom . import high\n", "high.py": ""})
    found = check_layers.problems(package, PLANTED_LAYERS)
    assert found == ["pkg.low (layer low) imports pkg.high (layer high) at line 2: an import up "
                     "the layers; move the code it needs down, or pass it in"]


def test_an_import_of_the_package_itself_from_below_is_upward(tmp_path):
    """``from .. import name`` reaches the package's ``__init__`` (the top), not a submodule."""
    package = plant(tmp_path, {"low.py": "", "high.py": "", "__init__.py": "VERSION = 1\n",
                               "sub/c.py": "from .. import VERSION\n"})
    found = check_layers.problems(package, PLANTED_LAYERS)
    assert found == ["pkg.sub.c (layer low) imports pkg (layer high) at line 1: an import up "
                     "the layers; move the code it needs down, or pass it in"]


def test_a_module_in_no_layer_is_named(tmp_path):
    package = plant(tmp_path, {"low.py": "", "high.py": "", "stray.py": "from . import low\n"})
    assert check_layers.problems(package, PLANTED_LAYERS) == [
        "module pkg.stray is in no layer: add it to LAYERS in tools/check_layers.py"]


def test_the_script_fails_with_the_problems_on_stderr(tmp_path):
    """The command CI runs: status 1 and the lines on a bad package, status 0 on the real one."""
    package = plant(tmp_path, {"low.py": "from . import high\n", "high.py": "from . import low\n"})
    bad = subprocess.run([sys.executable, str(SCRIPT), str(package)],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert "import circle between pkg.high, pkg.low" in bad.stderr
    assert "problem(s) in" in bad.stderr
    good = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    assert "no circle, no import up the layers" in good.stdout


def test_a_literal_import_module_call_is_an_import(tmp_path):
    """``importlib.import_module("pkg.high")`` ties the modules as an import statement does."""
    package = plant(tmp_path, {"high.py": "", "low.py": """\
        import importlib


        def probe(name):
            importlib.import_module(name)  # computed at run time: not readable, not an arrow
            return importlib.import_module("pkg.high")
        """})
    found = check_layers.problems(package, PLANTED_LAYERS)
    assert found == ["pkg.low (layer low) imports pkg.high (layer high) at line 6: an import up "
                     "the layers; move the code it needs down, or pass it in"]


def test_the_workers_package_probe_reads_the_version_module(monkeypatch):
    """engine.distributed's probe of a worker's install (run here in-process) imports the
    version's module, not the package's ``__init__`` above the engine, and still reports the
    version, or the module that fails to import."""
    import tensorstream
    from tensorstream.engine.distributed import package_on_worker

    assert package_on_worker()["version"] == tensorstream.__version__
    monkeypatch.setitem(sys.modules, "tensorstream._version", None)  # an import that fails
    assert package_on_worker()["missing"] == "tensorstream._version"
