"""The gallery's scripts and build hooks: public imports, intros, no build paths, short lines."""

import ast
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
#: Internal packages: an example that needs one of them shows users an API they cannot rely on.
INTERNAL = re.compile(r"^\s*(?:from|import)\s+tensorstream\.(learners|cli|coders|core|engine|"
                      r"steps|finite)\b", re.MULTILINE)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_import_the_public_api_and_open_with_the_three_questions(path):
    source = path.read_text()
    assert not INTERNAL.search(source), INTERNAL.search(source).group(0)
    text = ast.get_docstring(ast.parse(source))
    opening = text.split("\n\n")[1:4]  # after the title
    assert [part.split(".**")[0] for part in opening] == [
        "**What it does", "**When to use it", "**The parameter that matters"]


@pytest.mark.parametrize("page", ["ocpdl", "nmf", "maxnorm", "svrmf", "losses"])
def test_learner_pages_open_with_the_three_questions(page):
    paragraphs = (ROOT / "docs" / f"{page}.md").read_text().split("\n\n")[1:4]
    assert [p.split(".**")[0] for p in paragraphs] == [
        "**What it does", "**When to use it", "**The parameter that matters"]


def test_gallery_arguments_and_warnings_show_no_build_machine_paths(tmp_path, monkeypatch):
    support = load_script("docs/_ext/gallery_support.py")
    monkeypatch.setattr(support, "OUTPUT", tmp_path / "example-output")
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)  # restored after
    example = ROOT / "examples" / "labelled_climate.py"
    argv = support.reset_argv({}, {"src_file": str(example)})
    out = argv[argv.index("--out") + 1]
    assert not Path(out).is_absolute() and (example.parent / out).resolve() == \
        support.output_folder(example)
    message = "RobustOnlineNMF: re-initialised dead atom(s) " + "and a long explanation " * 8
    text = support.format_warning(UserWarning(message), UserWarning,
                                  str(ROOT / "tensorstream" / "learners" / "_base.py"), 220)
    assert text.startswith("tensorstream/learners/_base.py:220: UserWarning: RobustOnlineNMF")
    assert max(len(line) for line in text.splitlines()) <= support.WIDTH
    assert support.short_path("/venv/lib/python3.11/site-packages/sklearn/base.py") == \
        "sklearn/base.py"
    assert warnings.formatwarning is support.format_warning  # what sphinx-gallery calls


def test_wide_figures_get_a_thumbnail_of_the_thumbnails_shape(tmp_path, monkeypatch):
    pytest.importorskip("PIL")
    from PIL import Image

    support = load_script("docs/_ext/gallery_support.py")
    monkeypatch.setattr(support, "THUMBS", tmp_path / "thumbs")
    Image.new("RGB", (1500, 300)).save(tmp_path / "wide.png")
    Image.new("RGB", (300, 300)).save(tmp_path / "square.png")
    with Image.open(support.write_thumbnail(tmp_path / "wide.png", "wide")) as thumb:
        assert thumb.size == (round(300 * 400 / 280), 300)
    with Image.open(support.write_thumbnail(tmp_path / "square.png", "square")) as thumb:
        assert thumb.size == (300, 300)


def test_the_reshapings_example_reads_the_package_s_image_loader(monkeypatch):
    """examples/image_reshapings.py had a copy of the image loader (its own fallback picture,
    no refusal of grey images): it reads tensorstream.datasets.load_image, with its errors."""
    from tensorstream import datasets

    example = load_script("examples/image_reshapings.py")
    calls = []
    real = datasets.load_image
    monkeypatch.setattr(datasets, "load_image", lambda *a, **k: calls.append(a) or real(*a, **k))
    image, source = example.load_image("coffee")
    pixels, expected = real("coffee", downsample=2)
    assert calls and source == expected
    np.testing.assert_array_equal(image.transpose("y", "x", "channel").values, pixels)
    assert list(image["channel"].values) == ["red", "green", "blue"]
