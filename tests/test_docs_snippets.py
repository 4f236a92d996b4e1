"""Every ```python block of README.md and docs/*.md runs as written, and its printed values hold.

A page's blocks run in order in one namespace (a reader types them one after the other), in a
temporary folder, so a later block may use what an earlier one made but no block may use
anything the page did not make. A line ``expression  # -> VALUE`` states what the expression
evaluates to; VALUE is a Python literal (a number, a tuple, a list, a string) and is checked:
numbers to the digits shown (0.030 holds for 0.0296 and 0.0304, not 0.032), the rest exactly.
In ``bash`` blocks the ``tensorstream fit`` and ``tensorstream info`` commands run too, in
the page's order (through :func:`tensorstream.cli.main`, the command's own entry point), except
those that need a cluster (``--scheduler``, ``--workers``); other shell lines (installs, builds)
are not run. Text in other fences (``text``, none) is not run: outputs go there.
"""

import ast
import math
import re
import shlex
import warnings
from pathlib import Path

import pytest

from tensorstream.learners import registry

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(python|bash)\n(.*?)^```", re.S | re.M)
CLAIM = re.compile(r"#\s*->\s*(.+?)\s*$")
RUN_COMMANDS = ("tensorstream fit ", "tensorstream info ")
CLUSTER_OPTIONS = ("--scheduler", "--workers")


def blocks(page):
    """The ``python`` and ``bash`` blocks of a page: (language, first line number, source)."""
    text = page.read_text()
    return [(match.group(1), text[:match.start()].count("\n") + 2, match.group(2))
            for match in FENCE.finditer(text)]


def python_blocks(page):
    return [(line, source) for language, line, source in blocks(page) if language == "python"]


def commands(source):
    """The ``tensorstream`` commands of a shell block that run here, continuations joined."""
    joined = source.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines()
            if line.strip().startswith(RUN_COMMANDS)
            and not any(option in line for option in CLUSTER_OPTIONS)]


def run_command(command, first_line, page):
    from tensorstream.cli import main

    status = main(shlex.split(command, comments=True)[1:])
    assert status == 0, f"{page.name}:{first_line}: '{command}' exited with {status}"


def stated_value(text):
    """The literal a ``# ->`` comment states; a trailing explanation after ':' is dropped."""
    for end in range(len(text), 0, -1):  # the longest prefix that parses as a literal
        try:
            return ast.literal_eval(text[:end].strip())
        except (ValueError, SyntaxError):
            continue
    raise ValueError(f"'# -> {text}' states no Python literal")


def digits_tolerance(literal_text):
    """Half a unit of the last digit a number is written with (0.030 -> 0.0005)."""
    match = re.search(r"\d*\.(\d+)", literal_text)
    return 0.5 * 10.0 ** -len(match.group(1)) if match else 0.5


def assert_close(actual, expected, literal_text, where):
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        tolerance = digits_tolerance(literal_text)
        assert math.isclose(float(actual), expected, abs_tol=tolerance * 1.0000001), (
            f"{where}: {float(actual)!r} is not {literal_text} (+- {tolerance:g})")
    elif isinstance(expected, (tuple, list)) and isinstance(actual, (tuple, list)):
        assert len(actual) == len(expected), f"{where}: {actual!r} is not {expected!r}"
        for got, want in zip(actual, expected):
            assert_close(got, want, repr(want), where)
    else:
        assert actual == expected, f"{where}: {actual!r} is not {expected!r}"


def run_block(source, first_line, page, namespace):
    """Run one block; each top-level ``expression  # -> VALUE`` line is checked."""
    lines = source.splitlines()
    tree = ast.parse(source, filename=str(page))
    checks = []
    for node in tree.body:
        claim = CLAIM.search(lines[node.end_lineno - 1])
        if isinstance(node, ast.Expr) and claim:
            checks.append((node, claim.group(1)))
    ast.increment_lineno(tree, first_line - 1)
    namespace["__claims__"] = {}
    for index, (node, _) in enumerate(checks):  # store the value, check it after the block
        node.value = ast.Call(
            ast.Attribute(ast.Name("__claims__", ast.Load()), "__setitem__", ast.Load()),
            [ast.Constant(index), node.value], [])
    code = compile(ast.fix_missing_locations(tree), str(page), "exec")
    exec(code, namespace)  # noqa: S102 - the documentation's own code, the point of the test
    for index, (node, literal_text) in enumerate(checks):
        where = f"{page.name}:{node.lineno}"
        expected = stated_value(literal_text)
        assert_close(namespace["__claims__"][index], expected, literal_text, where)


def runs_something(page):
    return any(language == "python" or commands(source) for language, _, source in blocks(page))


@pytest.mark.parametrize("page", [p for p in PAGES if runs_something(p)],
                         ids=lambda page: page.name)
def test_page_snippets_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # a page may register a learner (docs/cli.md): it stays in this test, not the registry
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    import matplotlib

    matplotlib.use("Agg")  # figures to files; no window opens
    namespace = {"__name__": "__main__"}  # as a reader's script runs the page
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a snippet's warnings are the reader's, not ours
            for language, first_line, source in blocks(page):
                if language == "python":
                    run_block(source, first_line, page, namespace)
                else:
                    for command in commands(source):
                        run_command(command, first_line, page)
    finally:  # a page's `DataArray.plot()` goes through pyplot: its figures end with the page
        import matplotlib.pyplot as plt

        plt.close("all")


def test_claims_are_checked():
    """The checker fails on a wrong stated value and passes on the digits shown."""
    page = ROOT / "README.md"
    run_block("x = 0.0296\nx  # -> 0.030\n", 1, page, {})
    with pytest.raises(AssertionError, match="is not 0.030"):
        run_block("x = 0.032\nx  # -> 0.030\n", 1, page, {})
    with pytest.raises(AssertionError):
        run_block("(5, 8)  # -> (5, 9): the codes\n", 1, page, {})
    run_block("[(1, 2)]  # -> [(1, 2)]\n", 1, page, {})


def test_minibatchnmf_differences_are_the_true_ones():
    """docs/nmf.md's table of MiniBatchNMF's parameters that OnlineNMF lacks is exactly the
    set scikit-learn has and OnlineNMF has not; the attributes it says differ, differ."""
    import inspect

    import numpy as np

    decomposition = pytest.importorskip("sklearn.decomposition")
    from tensorstream import OnlineNMF

    text = (ROOT / "docs" / "nmf.md").read_text()
    section = text.split("## Differences from scikit-learn's MiniBatchNMF")[1].split("\n## ")[0]
    first_table = section.split("\n\n| |")[0].split("|---|---|")[1]  # its rows, no header
    documented = {name for row in first_table.splitlines() if row.startswith("| `")
                  for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    theirs = set(inspect.signature(decomposition.MiniBatchNMF).parameters)
    ours = set(inspect.signature(OnlineNMF).parameters)
    assert documented == theirs - ours
    model = OnlineNMF(2, batch_size=10, max_iter=2, random_state=0).fit(
        np.random.default_rng(0).random((30, 5)))
    assert (model.n_iter_, model.n_steps_) == (2, 6)  # passes, as scikit-learn counts them
    assert not hasattr(model, "reconstruction_err_")
