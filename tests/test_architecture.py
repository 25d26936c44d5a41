"""The architecture holds: import contracts (import-linter, configured in pyproject.toml), rules that read
facts and build fixes only through `torchlint.fix.build`, and analyses that never reach up to the facade."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

PACKAGE = REPO / "torchlint"
# CST node fields and LibCST entry points: a rule that names one is reading or building syntax itself.
CST_ATTRIBUTES = frozenset(
    {
        "func",
        "args",
        "keyword",
        "attr",
        "elements",
        "body",
        "orelse",
        "targets",
        "decorators",
        "whitespace_before_args",
        "evaluated_value",
        "with_changes",
        "deep_replace",
        "parse_expression",
        "parse_module",
        "code_for_node",
    }
)


def _modules(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*.py") if "__pycache__" not in path.parts)


def _imports(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def test_import_contracts_hold():
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports is not None, "import-linter is a test dependency"
    result = subprocess.run(
        [lint_imports, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", _modules(PACKAGE / "rules"), ids=lambda p: p.name)
def test_rules_never_touch_the_syntax_tree(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = _imports(tree)
    assert not [name for name in imported if name.split(".")[0] == "libcst" or name == "torchlint._lazy"]
    below_the_facade = [
        name for name in imported if name.startswith(("torchlint.facts.syntax", "torchlint.facts.torch"))
    ]
    assert below_the_facade == [], "rules import `torchlint.facts` only"
    touched = sorted(
        {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in CST_ATTRIBUTES
        }
    )
    assert touched == [], f"{path.name} reads or builds CST nodes itself: {touched}"


@pytest.mark.parametrize(
    "path",
    _modules(PACKAGE / "facts" / "syntax") + _modules(PACKAGE / "facts" / "torch"),
    ids=lambda p: p.name,
)
def test_analyses_never_import_the_facade(path):
    """The facade (`torchlint.facts`) is built on the analyses, never the other way round."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torchlint.facts":
            assert all(alias.name in ("syntax", "torch") for alias in node.names), ast.unparse(node)
        if isinstance(node, ast.Import):
            assert "torchlint.facts" not in [alias.name for alias in node.names]
