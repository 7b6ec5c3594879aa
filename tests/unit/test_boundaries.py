"""Module boundaries: no module uses another module's private names, and no module in the
core grows past what one reader holds in mind (the facade stays thin)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = ("pensive_core", "pensive_llamaindex", "pensive_langchain", "tests", "benchmarks")


def _files() -> list[Path]:
    return sorted(p for top in OURS for p in (ROOT / top).rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined(tree: ast.AST) -> set[str]:
    """Private names a file defines: functions, classes, module and class attributes, and
    attributes it assigns on ``self``/``cls`` or on objects it builds itself."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return {n for n in out if _private(n)}


def _ours(module: str | None, level: int) -> bool:
    return level > 0 or (module or "").split(".")[0] in OURS


def test_no_module_uses_another_modules_private_names():
    trees = {p: ast.parse(p.read_text(), str(p)) for p in _files()}
    defined = {p: _defined(t) for p, t in trees.items()}
    everywhere = set().union(*defined.values())
    bad = []
    for path, tree in trees.items():
        rel = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and _ours(node.module, node.level):
                parts = (node.module or "").split(".")
                if any(_private(p) for p in parts):
                    bad.append(f"{rel}:{node.lineno} imports private module {node.module}")
                bad += [
                    f"{rel}:{node.lineno} imports {a.name} from {node.module}"
                    for a in node.names
                    if _private(a.name)
                ]
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                if isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "super":
                    continue  # an override calling the framework method it overrides
                if node.attr in defined[path] or node.attr not in everywhere:
                    continue  # this module's own name, or a third party's (not ours to keep)
                bad.append(f"{rel}:{node.lineno} uses {ast.unparse(node)}")
    assert not bad, "\n".join(bad)


def test_the_core_stays_in_modules_a_reader_can_hold():
    sizes = {
        p.relative_to(ROOT): len(p.read_text().splitlines())
        for p in (ROOT / "pensive_core").rglob("*.py")
    }
    assert sizes[Path("pensive_core/engine.py")] <= 620
    too_big = {str(p): n for p, n in sizes.items() if n > 1000}
    assert not too_big, too_big
