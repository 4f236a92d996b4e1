"""Sphinx configuration of the tensorstream documentation.

Build (warnings are errors), from the repository root::

    python -m sphinx -W docs docs/_build/html

Generated during the build, never committed: ``docs/api/`` (the API reference pages, from the
modules' ``__all__``), ``docs/auto_examples/`` (the gallery, from ``examples/*.py``, every script
run), ``docs/sg_execution_times.rst`` and ``docs/_build/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from threadpoolctl import threadpool_limits

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

import tensorstream  # noqa: E402

# One BLAS/OpenMP thread for the whole build, as in the tests: the examples' products are tiny,
# and on a shared 2-core machine more threads made them up to 8x slower (measured on
# huber_denoising_faces: 30 s against 4 s).
threadpool_limits(1)

project = "tensorstream"
author = "the tensorstream developers"
copyright = "the tensorstream developers"  # noqa: A001  (Sphinx's name)
release = tensorstream.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "tensorstream_docs",  # docs/_ext: the API pages, the optional glossary entry
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "**/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.codeobj.json", "auto_examples/*.md5"]

# -- MyST: the markdown pages (docs/*.md) -------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# -- API reference: autosummary + numpydoc ----------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # the numpydoc "Parameters" sections carry the types
autodoc_member_order = "groupwise"
numpydoc_show_class_members = False  # the class template lists the members itself
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False


# -- Gallery: every script in examples/ runs during the build ----------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"\.py$",  # run every example, not only plot_*.py
    # the scripts are command-line programs: small sizes and an output folder per example
    # come from docs/_ext/gallery_support.py, the figures they write are scraped from there
    "reset_argv": "gallery_support.reset_argv",
    "image_scrapers": ("gallery_support.scrape_written_figures",),
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "min_reported_time": 0,
    "show_memory": False,
}

# -- HTML -----------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"tensorstream {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "navbar_align": "left",
    "header_links_before_dropdown": 4,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_context = {"default_mode": "light"}
# pages without sub-pages: no empty "Section Navigation" column
html_sidebars = {page: [] for page in ("index", "getting_started", "cli", "design", "glossary",
                                       "references")}
html_show_sourcelink = False
