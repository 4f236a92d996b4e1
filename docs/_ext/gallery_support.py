"""sphinx-gallery hooks: command-line arguments of the examples, and their figures.

The scripts in ``examples/`` are command-line programs that write their figures to files. In
the documentation build each one runs with the arguments of :data:`EXAMPLE_ARGS` (small sizes,
so the gallery builds in about two minutes) and writes into its own folder,
``examples/example-output/<example>/``; :func:`scrape_written_figures` then shows every
image the example wrote there, in the order they were written.

The published output must not show the build machine: the folder is passed relative to the
folder sphinx-gallery runs the example in (``examples/``), and warnings are printed by
:func:`format_warning` (paths relative to the repository or to ``site-packages``, lines of at
most :data:`WIDTH` characters, which the pages show without cutting).

sphinx-gallery re-runs an example only when its source changes: after editing
:data:`EXAMPLE_ARGS`, remove ``docs/auto_examples/`` (or the example's ``.md5`` file there).
"""

from __future__ import annotations

import os
import shutil
import textwrap
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Under ``examples/`` (git ignores ``example-output/``), so the scripts print paths as they
#: would when a user runs them there.
OUTPUT = ROOT / "examples" / "example-output"
#: Longest output line the gallery pages show whole.
WIDTH = 88
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".svg")

#: Arguments per example (file stem); ``{out}`` is the example's output folder. The comment
#: after each line is the script's own default, for comparison.
EXAMPLE_ARGS: dict[str, list[str]] = {
    # the defaults (200 frames x 10 copies, ~10 s): at a quarter of the stream the robust
    # background is not yet better than plain NMF's, which would contradict docs/nmf.md
    "background_subtraction": ["--out", "{out}/background_subtraction.png"],
    "huber_denoising_faces": ["--copies", "3", "--n-components", "16",  # 20 copies, 25 atoms
                              "--out", "{out}"],
    "image_reshapings": ["--steps", "40", "--atoms", "12", "--out", "{out}"],  # 400 x 100, 24
    "labelled_climate": ["--days", "60", "--out", "{out}"],  # 120 days
    "matrix_completion": ["--out", "{out}"],
    "maxnorm_ev_curves": ["--rho", "0.1", "0.3", "--every", "200", "--size", "100", "20", "1000",
                          "--output", "{out}/maxnorm_ev_curves.png"],  # 3 panels, p=200, n=2000
    "motif_dictionary": ["--n-steps", "60", "--out", "{out}/motifs.png"],  # 200 steps
    "ncpd_benchmark_curves": ["--trials", "2", "--iterations", "12",  # 5 trials x 30
                              "--out", "{out}/ncpd_curves.png"],
    "robust_nmf_faces": ["--copies", "2", "--out", "{out}/robust_nmf_faces.png"],  # 10 copies
    "select_climate": ["--out", "{out}"],
    "select_groupings": ["--patches", "4000", "--seeds", "2", "--ranks", "4,8,12",  # 20000, 3
                         "--out", "{out}"],  # 4,8,12,16,24,32
    "svrmf_curves": ["--n-samples", "600", "--passes", "4", "--long-factor", "1",  # all, 10
                     "--out", "{out}"],
    "topic_learning_kl": ["--n-docs", "1500", "--n-words", "400", "--batch-size", "50",
                          "--epochs", "2", "--out", "{out}"],  # 5000 x 1000, batch 10, 3
}

#: Thumbnails of wide figures (a row of curve panels shrinks to a blank strip): an example
#: names its own with ``# sphinx_gallery_thumbnail_path = "_build/gallery-thumbs/<stem>.png"``,
#: the left part of its first figure at the thumbnail's shape, written by
#: :func:`write_thumbnail`.
THUMBS = ROOT / "docs" / "_build" / "gallery-thumbs"
THUMB_ASPECT = 400 / 280  # sphinx-gallery's default thumbnail_size

_shown: dict[str, set[Path]] = {}


def output_folder(src_file: str | Path) -> Path:
    return OUTPUT / Path(src_file).stem


def reset_argv(gallery_conf, script_vars) -> list[str]:
    """The example's arguments, its output folder relative to where it runs (emptied first)."""
    src_file = Path(script_vars["src_file"])
    folder = output_folder(src_file)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    _shown[src_file.stem] = set()
    warnings.formatwarning = format_warning  # sphinx-gallery's capture calls it per warning
    relative = os.path.relpath(folder, src_file.parent)
    return [arg.replace("{out}", relative) for arg in EXAMPLE_ARGS.get(src_file.stem, [])]


def short_path(filename: str) -> str:
    """``filename`` relative to the installed packages or to the repository, when under them."""
    path = Path(filename)
    if "site-packages" in path.parts:
        return str(Path(*path.parts[path.parts.index("site-packages") + 1:]))
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return filename


def format_warning(message, category, filename, lineno, line=None) -> str:
    """``path:line: Category: message``, the path short, wrapped at :data:`WIDTH` columns."""
    text = f"{short_path(filename)}:{lineno}: {category.__name__}: {message}"
    lines = [textwrap.fill(part, WIDTH, subsequent_indent="    ") for part in text.splitlines()]
    return "\n".join(lines) + "\n"


def scrape_written_figures(block, block_vars, gallery_conf) -> str:
    """Show the images the example wrote to its output folder since the last code block."""
    from sphinx_gallery.scrapers import figure_rst

    src_file = Path(block_vars["src_file"])
    folder = output_folder(src_file)
    shown = _shown.setdefault(src_file.stem, set())
    written = sorted((p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES
                      and p not in shown), key=lambda p: (p.stat().st_mtime_ns, p.name))
    images = []
    for path, target in zip(written, block_vars["image_path_iterator"]):
        if not shown and path.suffix.lower() == ".png":
            write_thumbnail(path, src_file.stem)
        target = Path(target).with_suffix(path.suffix)
        shutil.copyfile(path, target)
        shown.add(path)
        images.append(target)
    # one figure per directive: several in one are drawn side by side as small thumbnails
    return "".join(figure_rst([image], gallery_conf["src_dir"]) for image in images)


def write_thumbnail(image: Path, stem: str) -> Path:
    """The left part of ``image`` at the thumbnail's aspect (all of it when narrower)."""
    from PIL import Image

    THUMBS.mkdir(parents=True, exist_ok=True)
    with Image.open(image) as picture:
        width = min(picture.width, round(picture.height * THUMB_ASPECT))
        picture.crop((0, 0, width, picture.height)).save(THUMBS / f"{stem}.png")
    return THUMBS / f"{stem}.png"
