"""The tiers are selected by markers, so a module that forgets its marker runs in the wrong loop:
every integration module is marked ``integration``, every quality module ``quality``, every
adversarial module ``adversarial``, and every
test that takes the real MiniLM (the ``minilm`` fixture) is marked ``slow``. Read from the
source with ``ast``, so nothing heavy is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def _marks(node: ast.AST | None) -> set[str]:
    """The X of every ``pytest.mark.X`` (called or not) inside ``node``."""
    found = set()
    for sub in ast.walk(node) if node is not None else ():
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Attribute)
            and sub.value.attr == "mark"
            and isinstance(sub.value.value, ast.Name)
            and sub.value.value.id == "pytest"
        ):
            found.add(sub.attr)
    return found


def module_marks(tree: ast.Module) -> set[str]:
    """The marks of a module's top-level ``pytestmark`` (one mark or a list)."""
    marks = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            marks |= _marks(node.value)
    return marks


def modules_of(tier: str) -> list[Path]:
    return sorted((TESTS / tier).glob("test_*.py"))


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@pytest.mark.parametrize(
    "tier, mark",
    [("integration", "integration"), ("quality", "quality"), ("adversarial", "adversarial")],
)
def test_every_module_of_a_tier_carries_its_marker(tier, mark):
    modules = modules_of(tier)
    assert modules, f"no test modules under tests/{tier}"
    unmarked = [p.name for p in modules if mark not in module_marks(_parse(p))]
    assert not unmarked, f"add `pytestmark = pytest.mark.{mark}` to: {unmarked}"


def test_every_test_taking_the_real_model_is_slow():
    unmarked = []
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = _parse(path)
        if "slow" in module_marks(tree):
            continue
        for scope in [tree, *(c for c in tree.body if isinstance(c, ast.ClassDef))]:
            scope_marks = _marks(ast.List(scope.decorator_list)) if scope is not tree else set()
            for fn in scope.body:
                if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                if "minilm" not in {a.arg for a in fn.args.args}:
                    continue
                if "slow" not in scope_marks | _marks(ast.List(fn.decorator_list)):
                    unmarked.append(f"{path.relative_to(TESTS)}::{fn.name}")
    assert not unmarked, f"mark these @pytest.mark.slow (they load MiniLM): {unmarked}"


def test_the_checks_see_a_missing_marker():
    marked = ast.parse("import pytest\npytestmark = [pytest.mark.integration, pytest.mark.slow]\n")
    assert module_marks(marked) == {"integration", "slow"}
    assert module_marks(ast.parse("import pytest\nx = pytest.mark.integration\n")) == set()
    assert module_marks(ast.parse("pytestmark = pytest.mark.skipif(True, reason='x')\n")) == {
        "skipif"
    }
