"""Check the package's import graph: no import circle, no import that runs up the layers.

Run ``python tools/check_layers.py`` from the repository root (CI does, in ``.ci/run``); it exits
with status 1 and names every offending import. Only the standard library is used, so the check
needs no install. Every ``import`` statement counts, those inside functions too: a lazy import
still ties the two modules, only later. Imports under ``if TYPE_CHECKING:`` count as well (they
are what a type checker, and a reader, follows), and so does ``importlib.import_module`` called
with one absolute name as a string literal; what it loads by a name computed at run time (the
registry's and the package's lazy names) cannot be read and is not seen.

The layers are declared below, bottom first, as data: a module may import from its own layer and
the layers under it, never from one above. ``docs/design.md`` ("The layers") draws the same
picture; change both together.
"""

import ast
import sys
from pathlib import Path

#: The layers, bottom first: each a name and the modules (or packages: every module under them)
#: that it holds. The package itself (``tensorstream/__init__.py``, which only names the public
#: entry points lazily; this name stands for that file alone) and ``__main__`` sit on top.
LAYERS = (
    ("core", ("tensorstream.core", "tensorstream._version")),
    ("shared", ("tensorstream.schedules", "tensorstream.streams", "tensorstream.labels",
                "tensorstream.losses", "tensorstream.datasets", "tensorstream.metrics",
                "tensorstream.modes")),
    ("solvers", ("tensorstream.coders", "tensorstream.steps", "tensorstream.finite",
                 "tensorstream.baselines")),
    ("engine", ("tensorstream.engine",)),
    ("algorithms", ("tensorstream.algorithms",)),
    ("learners", ("tensorstream.learners",)),
    ("io", ("tensorstream.io",)),
    ("front", ("tensorstream.accessor", "tensorstream.model_selection", "tensorstream.plot")),
    ("cli", ("tensorstream.cli",)),
    ("package", ("tensorstream", "tensorstream.__main__")),
)


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module in ``path``; ``root`` is the folder that holds the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package_dir: Path) -> dict[str, Path]:
    """Every module of the package in ``package_dir``, by dotted name."""
    root = package_dir.parent
    return {module_name(path, root): path for path in sorted(package_dir.rglob("*.py"))}


def imported_names(tree: ast.AST, name: str, is_package: bool) -> list[tuple[str, str, int]]:
    """Every import statement of the module ``name``: (module, name taken from it or "", line).

    ``from a import b`` gives ``("a", "b", line)``: ``b`` may be a submodule of ``a`` or a name
    defined in ``a``; which of the two is decided against the package's modules later.
    """
    package = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, "", node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node.module, node.level, package)
            found += [(base, alias.name, node.lineno) for alias in node.names]
        elif loaded := literal_import(node):
            found.append((loaded, "", node.lineno))
    return found


def literal_import(node: ast.AST) -> str | None:
    """The module an ``importlib.import_module("a.b")`` call loads, when it is named by one
    string literal (a name computed at run time cannot be read here)."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"):
        return None
    name = node.args[0]
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        return name.value if not name.value.startswith(".") else None
    return None


def absolute(module: str | None, level: int, package: str) -> str:
    """The absolute name of ``from <level dots><module> import ...`` written in ``package``."""
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = parts[:len(parts) - level + 1]
    return ".".join(base + ([module] if module else []))


def resolve(wanted: str, known: dict[str, Path]) -> str | None:
    """The package module that an imported name loads: the longest known prefix, if any."""
    parts = wanted.split(".")
    for stop in range(len(parts), 0, -1):
        candidate = ".".join(parts[:stop])
        if candidate in known:
            return candidate
    return None


def import_graph(package_dir: Path) -> dict[str, dict[str, int]]:
    """The package's import graph: module -> {imported module: first line that imports it}.

    ``from a import b`` is an arrow to the submodule ``a.b`` where there is one, else to ``a``;
    ``import a.b`` is an arrow to ``a.b`` alone, not to the packages above it (Python runs those
    first for every module under them, so they tie nothing). Imports from outside the package
    and a module's imports of itself are left out.
    """
    known = modules(package_dir)
    graph = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges = {}
        for base, taken, line in imported_names(tree, name, path.name == "__init__.py"):
            submodule = f"{base}.{taken}"
            target = submodule if submodule in known else resolve(base, known)
            if target is not None and target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import circles: strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))  # one frame per module deep
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return groups


def layer_of(module: str, layers=LAYERS) -> int | None:
    """The index of the layer that holds ``module``: the longest entry that names it or a
    package above it decides. The top package's own name (no dot) stands for its ``__init__``
    alone, or every module that no layer lists would fall into that layer unseen."""
    best, best_length = None, -1
    for position, (_, members) in enumerate(layers):
        for member in members:
            under = "." in member and module.startswith(member + ".")
            if (module == member or under) and len(member) > best_length:
                best, best_length = position, len(member)
    return best


def problems(package_dir: Path, layers=LAYERS) -> list[str]:
    """Every violation in the package at ``package_dir``, as one readable line each."""
    graph = import_graph(package_dir)
    found = [f"module {module} is in no layer: add it to LAYERS in tools/check_layers.py"
             for module in sorted(graph) if layer_of(module, layers) is None]
    for group in circles(graph):
        ties = [f"{a} -> {b} (line {graph[a][b]})" for a in group for b in graph[a] if b in group]
        found.append("import circle between " + ", ".join(group) + ": " + "; ".join(ties))
    for source, edges in sorted(graph.items()):
        for target, line in sorted(edges.items()):
            low, high = layer_of(source, layers), layer_of(target, layers)
            if low is not None and high is not None and high > low:
                found.append(
                    f"{source} (layer {layers[low][0]}) imports {target} (layer "
                    f"{layers[high][0]}) at line {line}: an import up the layers; move the code "
                    "it needs down, or pass it in")
    return found


def main(argv: list[str]) -> int:
    """Check the package folder given (default ``tensorstream`` next to this script's folder)."""
    package_dir = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "tensorstream"
    found = problems(package_dir)
    for line in found:
        print(line, file=sys.stderr)
    if found:
        print(f"{len(found)} import-graph problem(s) in {package_dir}", file=sys.stderr)
        return 1
    print(f"import graph of {package_dir}: no circle, no import up the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
