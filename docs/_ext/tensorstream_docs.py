"""Build-time helpers of the tensorstream documentation (a small Sphinx extension).

* **API pages.** ``docs/api/<module>.rst`` (and ``docs/api/index.rst``) are written at the start
  of every build (``config-inited``) from the modules' public names: ``__all__`` when the module
  has one, else the functions and classes it defines. Packages in :data:`WALKED_PACKAGES` also
  get the public names of their submodules that the package does not re-export, and the modules
  of :data:`OPTIONAL_MODULES` are documented when they import. So modules that move (e.g.
  ``tensorstream.motifs`` into ``tensorstream.streams.motifs``) are picked up without editing
  the docs.
  autosummary then writes one page per object under ``docs/api/generated/``.
* **Gallery arguments.** Each gallery page says with which arguments its script ran
  (``gallery_support.EXAMPLE_ARGS``).
* **Docstring fixes.** :data:`DOCSTRING_FIXES`: temporary, one object each, with a TODO for
  the owner of the file.
* **Optional glossary.** The root toctree lists ``glossary``; the entry is dropped while
  ``docs/glossary.md`` does not exist, so the build does not fail on a missing page.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

DOCS = Path(__file__).resolve().parents[1]
API_DIR = DOCS / "api"

#: The documented modules, in the order of the API index.
API_MODULES = (
    "tensorstream",
    "tensorstream.streams",
    "tensorstream.datasets",
    "tensorstream.losses",
    "tensorstream.schedules",
    "tensorstream.labels",
    "tensorstream.modes",
    "tensorstream.model_selection",
    "tensorstream.io",
    "tensorstream.plot",
    "tensorstream.metrics",
)

#: Packages whose submodules' public names are documented too (unless re-exported).
WALKED_PACKAGES = ("tensorstream.streams", "tensorstream.datasets")

#: Documented when importable; names already documented elsewhere are skipped.
OPTIONAL_MODULES = ("tensorstream.streams.motifs",)

#: Pages (docnames) listed in a toctree that may not exist yet.
OPTIONAL_PAGES = ("glossary",)


def public_names(module: ModuleType) -> list[str]:
    """``__all__``, or the public functions and classes defined in ``module``."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return [str(name) for name in names]
    return sorted(
        name for name, obj in vars(module).items()
        if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", None) == module.__name__)


def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        return "Classes"
    if callable(obj):
        return "Functions"
    return "Data"


def _title(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def _summary(module_name: str, names: list[str], objects: dict[str, object],
             char: str = "-") -> str:
    """autosummary tables of ``names`` of ``module_name``, grouped by kind."""
    out = [f".. currentmodule:: {module_name}\n"]
    for kind in ("Classes", "Functions", "Data"):
        chosen = [n for n in names if _kind(objects[n]) == kind]
        if not chosen:
            continue
        out.append(_title(kind, char))
        out.append(".. autosummary::\n   :toctree: generated\n   :nosignatures:\n")
        out.extend(f"   {name}" for name in chosen)
        out.append("")
    return "\n".join(out)


def _module_page(module_name: str, documented: dict[int, str],
                 stubs: set[str] | None = None) -> str | None:
    """The page of one module (None when there is nothing new to document)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    sections = []
    parts = [(module_name, module)]
    if module_name in WALKED_PACKAGES and hasattr(module, "__path__"):
        for info in sorted(pkgutil.iter_modules(module.__path__), key=lambda i: i.name):
            if not info.name.startswith("_"):
                sub = f"{module_name}.{info.name}"
                parts.append((sub, importlib.import_module(sub)))
    for name, mod in parts:
        objects = {n: getattr(mod, n) for n in public_names(mod) if hasattr(mod, n)}
        new = [n for n, obj in objects.items() if id(obj) not in documented]
        for n in new:
            documented[id(objects[n])] = f"{name}.{n}"
            if stubs is not None:
                stubs.add(f"{name}.{n}")
        if not new:
            continue
        if name == module_name:
            sections.append(_summary(name, new, objects))
        else:  # a submodule's names the package does not re-export
            sections.append(_title(name, "-") + "\n"
                            + _summary(name, new, objects, char="~"))
    if not sections:
        return None
    head = [_title(module_name),
            f".. automodule:: {module_name}\n   :no-members:\n   :no-index:\n"]
    return "\n".join(head + sections)


def write_api_pages(app=None, config=None) -> list[str]:
    """Write ``docs/api/*.rst``; returns the documented module names (the index order)."""
    API_DIR.mkdir(exist_ok=True)
    documented: dict[int, str] = {}
    stubs: set[str] = set()
    pages = []
    for module_name in API_MODULES + OPTIONAL_MODULES:
        page = _module_page(module_name, documented, stubs)
        if page is None:
            continue
        _write_if_changed(API_DIR / f"{module_name}.rst", page)
        pages.append(module_name)
    index = [_title("API reference"),
             "Every public name of the package, by module. The learners are importable from "
             "the top level (``from tensorstream import OnlineCPDL``).\n",
             ".. toctree::\n   :maxdepth: 1\n"]
    index += [f"   {name}" for name in pages]
    _write_if_changed(API_DIR / "index.rst", "\n".join(index) + "\n")
    for stale in API_DIR.glob("*.rst"):  # a module that moved away
        if stale.stem not in pages and stale.stem != "index":
            stale.unlink()
    for stale in (API_DIR / "generated").glob("*.rst"):  # its objects' autosummary stubs
        if stale.stem not in stubs:
            stale.unlink()
    return pages


def _write_if_changed(path: Path, text: str) -> None:
    """Keep the mtime of unchanged pages (Sphinx rebuilds only what changed)."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def drop_missing_optional_pages(app, docname: str, source: list[str]) -> None:
    """Remove toctree entries of :data:`OPTIONAL_PAGES` whose source file does not exist."""
    if docname != app.config.root_doc:
        return
    srcdir = Path(app.srcdir)
    for page in OPTIONAL_PAGES:
        if not any((srcdir / f"{page}{suffix}").exists() for suffix in (".md", ".rst")):
            source[0] = "\n".join(line for line in source[0].split("\n")
                                  if line.strip() != page)


def show_gallery_arguments(app, docname: str, source: list[str]) -> None:
    """Say on each gallery page with which arguments the script ran in this build."""
    from gallery_support import EXAMPLE_ARGS

    folder, _, stem = docname.rpartition("/")
    if folder != "auto_examples" or stem not in EXAMPLE_ARGS:
        return
    argv = EXAMPLE_ARGS[stem]
    args = " ".join(arg.replace("{out}", "OUT") for arg in argv)
    resized = any(arg.startswith("--") and arg not in ("--out", "--output") for arg in argv)
    why = ("small sizes, so that the documentation builds quickly; its defaults are the sizes "
           "its docstring quotes" if resized else "its default sizes")
    note = (f"\n.. note::\n\n   In this gallery the script ran as ``python examples/{stem}.py "
            f"{args}`` ({why}; ``OUT`` is a scratch folder).\n")
    lines = source[0].split("\n")
    for k in range(1, len(lines)):  # after the title's underline
        if lines[k - 1].strip() and lines[k] and set(lines[k]) == {"="} \
                and len(lines[k]) >= len(lines[k - 1].rstrip()):
            lines.insert(k + 1, note)
            source[0] = "\n".join(lines)
            return


#: Build-time docstring fixes for package files this documentation does not own, each with the
#: owner's TODO. Remove an entry once the source is fixed (the build warns when a fix no longer
#: applies, so none goes stale).
DOCSTRING_FIXES: dict[str, tuple[str, str]] = {}


def fix_docstrings(app, what, name, obj, options, lines: list[str]) -> None:
    """Apply :data:`DOCSTRING_FIXES` (narrowly: one object, one exact string each)."""
    if name not in DOCSTRING_FIXES:
        return
    old, new = DOCSTRING_FIXES[name]
    text = "\n".join(lines)
    if old not in text:
        from sphinx.util import logging

        logging.getLogger(__name__).warning(
            f"DOCSTRING_FIXES[{name!r}] no longer applies: remove it from docs/_ext")
        return
    lines[:] = text.replace(old, new).split("\n")


def setup(app):
    # before Sphinx lists the source files, and autosummary the pages it writes stubs for
    app.connect("config-inited", write_api_pages)
    app.connect("source-read", drop_missing_optional_pages)
    app.connect("source-read", show_gallery_arguments)
    app.connect("autodoc-process-docstring", fix_docstrings)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
