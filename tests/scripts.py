"""The repository's scripts as modules, for the tests that read them: ``benchmarks/``,
``examples/``, ``tools/`` and ``docs/_ext/`` are folders, not packages."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str, name: str | None = None):
    """The script at ``relative`` (from the repository's root) run as the module ``name`` (its
    file's stem by default). It stays in ``sys.modules``: its dataclasses look their module up
    there while it runs, a script that imports another (an example, a benchmark) finds the same
    module, and a second call returns it without running it again."""
    path = ROOT / relative
    name = name or path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]  # a script that failed to run is not kept half-made
        raise
    return module
