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


def _rule_modules() -> list[Path]:
    """What reads like a rule's doc: each family's rule classes and its `debug facts` section (a family's
    detection modules beside them build on the syntax tree, as `torchlint.facts` does)."""
    rules = PACKAGE / "rules"
    return sorted([rules / "base.py", *rules.glob("*/rules.py"), *rules.glob("*/describe.py")])


def _family_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[1]


@pytest.mark.parametrize("path", _rule_modules(), ids=lambda p: "/".join(p.parts[-2:]))
def test_rules_never_touch_the_syntax_tree(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = _imports(tree)
    assert not [name for name in imported if name.split(".")[0] == "libcst" or name == "torchlint._lazy"]
    below_the_facade = [
        name for name in imported if name.startswith(("torchlint.facts.syntax", "torchlint.facts.torch"))
    ]
    assert below_the_facade == [], "rules import `torchlint.facts` and their own family's modules only"
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


def test_every_family_is_a_folder_with_its_rules_and_every_rule_lives_in_its_family_folder():
    """`FAMILIES` and the folders agree, and TL1xx rules live in `rules/compile/`, TL2xx in
    `rules/data_loading/`, and so on: adding a family is one folder (and its docs)."""
    from torchlint.rules.base import family_folders, registered_rules
    from torchlint.workspace.settings import FAMILIES

    folders = sorted(p.parent.name for p in (PACKAGE / "rules").glob("*/rules.py"))
    assert sorted(f.rsplit(".", 1)[1] for f in family_folders()) == folders
    for code, rule in registered_rules().items():
        expected = FAMILIES[code[2]].replace(" ", "_")
        assert rule.__module__ == f"torchlint.rules.{expected}.rules", code
