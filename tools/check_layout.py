"""make lint's checks of the package's shape that ruff and import-linter do not make.

- no import cycle between hetero_cli's modules (an import inside a function counts: a cycle hidden in a
  function is still a cycle; one under ``if TYPE_CHECKING:`` does not, as for import-linter, except
  between the modules of the runtime layer (STRICT): there a type-only import ties modules as any import
  does, so the compile side, the compiled value and the request side stay apart for good);
- no module over 600 lines and no class over 300 lines (a unit that large is asking to be split).

Run: python tools/check_layout.py  (exit 1 with one line per breach)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hetero_cli"
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 300
#: the packages whose modules' imports of each other count under TYPE_CHECKING too
STRICT = ("hetero_cli.runtime",)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, tree: ast.Module, modules: set[str]) -> set[str]:
    """The hetero_cli modules ``path`` imports, anywhere in it (under TYPE_CHECKING only where both lie in
    one of STRICT's packages)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    strict = next((p for p in STRICT if here == p or here.startswith(p + ".")), None)
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    typed: set[str] = set()  # imported under TYPE_CHECKING only
    for node in ast.walk(tree):
        into = typed if id(node) in typing_only else found
        if isinstance(node, ast.Import):
            into.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                into.add(sub if sub in modules else target)
    if strict is not None:
        found |= {m for m in typed if m == strict or m.startswith(strict + ".")}
    return {m for m in found if m in modules and m != here}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in files}
    problems: list[str] = []
    graph: dict[str, set[str]] = {}
    for path in files:
        text = path.read_text()
        tree = ast.parse(text)
        rel = path.relative_to(PACKAGE.parent)
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            problems.append(f"{rel}: {lines} lines (at most {MAX_MODULE_LINES}): split it by job")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    problems.append(
                        f"{rel}:{node.lineno}: class {node.name} has {size} lines (at most {MAX_CLASS_LINES})"
                    )
        graph[module_name(path)] = imported(path, tree, modules)
    # a package's __init__ re-exporting its modules is not a cycle with them
    for name in graph:
        graph[name] = {m for m in graph[name] if not (m.startswith(name + ".") and name in graph)}
    for comp in cycles(graph):
        problems.append("import cycle: " + " <-> ".join(comp))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
