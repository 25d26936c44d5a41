"""Fixes you can trust: the pure `apply`, the fixpoint in `Linter.fix_text`, the CLI's --fix/--diff summary.

The rules used for the fixer's mechanics (`fixer_rules.py`) are not in `torchlint.rules`, so they are never
discovered by other tests; the CLI tests add their module to the packages rules are discovered in.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixer_rules import text_rule
from support import FIXTURES, REPO, doc_sections, fix, lint, python_blocks, settings

from torchlint.api import RunOptions, run
from torchlint.cli import main
from torchlint.fix.apply import Applied, apply, unified_diff
from torchlint.fix.model import AddImport, Applicability, DropImportIfUnused, Edit, Fix
from torchlint.linter import MAX_FIX_PASSES, InternalError, Linter, _compiles
from torchlint.rules import base
from torchlint.rules.base import Rule, registered_rules
from torchlint.workspace.notebook import Notebook

SAFE, UNSAFE, DISPLAY = Applicability.SAFE, Applicability.UNSAFE, Applicability.DISPLAY_ONLY


def fix_with(rules: list[type[Rule]], source: str, unsafe: bool = True, path: str = "example.py"):
    linter = Linter(rule_classes={rule.code: rule for rule in rules})
    return linter.fix_text(path, source, settings(), unsafe)


def test_test_rules_are_not_registered():
    text_rule("TL981", "a", "b")
    assert "TL981" not in registered_rules()


# -- apply: the pure part ---------------------------------------------------------------------------------


def test_non_overlapping_fixes_are_applied_together():
    text = "a = slow(1) + slow(2)\n"
    fixes = [Fix("t", SAFE, (Edit(4, 8, "fast"),)), Fix("t", SAFE, (Edit(14, 18, "fast"),))]
    result = apply(text, fixes)
    assert result.text == "a = fast(1) + fast(2)\n"
    assert (result.applied, result.skipped) == ((0, 1), ())


def test_overlapping_fix_is_skipped_for_a_later_pass():
    text = "f(g(x))\n"
    outer = Fix("outer", SAFE, (Edit(0, 7, "F(g(x))"),))
    inner = Fix("inner", SAFE, (Edit(2, 6, "G(x)"),))
    result = apply(text, [inner, outer])
    assert (result.text, result.applied, result.skipped) == ("F(g(x))\n", (1,), (0,))


def test_shared_import_is_added_once():
    text = "import os\nx = a\ny = a\n"
    add = (AddImport("torch", 10, "import torch\n"),)
    fixes = [Fix("t", SAFE, (Edit(14, 15, "torch.b"),), add), Fix("t", SAFE, (Edit(20, 21, "torch.b"),), add)]
    assert apply(text, fixes).text == "import os\nimport torch\nx = torch.b\ny = torch.b\n"


def test_a_fix_whose_import_cannot_be_added_is_not_applied():
    # The import would land inside text another kept fix replaces: applying the fix without it would leave
    # `torch` undefined, so the whole fix waits for the next pass.
    text = "import os\nx = a\ny = a\n"
    first = Fix("t", SAFE, (Edit(5, 12, "t os\nz "),))
    second = Fix("t", SAFE, (Edit(20, 21, "torch.b"),), (AddImport("torch", 10, "import torch\n"),))
    result = apply(text, [first, second])
    assert (result.applied, result.skipped) == ((0,), (1,))
    assert result.text == "import os\nz = a\ny = a\n"


def test_two_insertions_at_one_point_conflict_unless_both_are_imports():
    text = "x\n"
    one, two = Fix("1", SAFE, (Edit(0, 0, "a"),)), Fix("2", SAFE, (Edit(0, 0, "b"),))
    assert apply(text, [one, two]).applied == (0,)
    imports = [
        Fix("1", SAFE, (), (AddImport("torch", 0, "import torch\n"),)),
        Fix("2", SAFE, (), (AddImport("os", 0, "import os\n"),)),
    ]
    assert apply(text, imports).text == "import os\nimport torch\nx\n"  # by key, whatever the fix order
    assert apply(text, imports[::-1]).text == "import os\nimport torch\nx\n"


def test_an_insertion_goes_before_a_replacement_at_the_same_offset():
    text = "old()\n"
    fix = Fix("t", SAFE, (Edit(0, 3, "new"),), (AddImport("torch", 0, "import torch\n"),))
    assert apply(text, [fix]).text == "import torch\nnew()\n"


def test_an_import_is_dropped_only_when_every_use_was_rewritten():
    text = "from m import a\nx = a\ny = a\n"
    drop = (DropImportIfUnused(0, 16, "a", uses=2),)
    first = Fix("t", SAFE, (Edit(20, 21, "m.a"),), drops=drop)
    second = Fix("t", SAFE, (Edit(26, 27, "m.a"),), drops=drop)
    assert apply(text, [first]).text == "from m import a\nx = m.a\ny = a\n"
    assert apply(text, [first, second]).text == "x = m.a\ny = m.a\n"


def test_two_names_leaving_one_import_statement_are_merged():
    text = "from m import a, b, c\nx = a\ny = b\n"
    fixes = [
        Fix("t", SAFE, (Edit(26, 27, "m.a"),), drops=(DropImportIfUnused(0, 22, "a", uses=1),)),
        Fix("t", SAFE, (Edit(32, 33, "m.b"),), drops=(DropImportIfUnused(0, 22, "b", uses=1),)),
    ]
    assert apply(text, fixes).text == "from m import c\nx = m.a\ny = m.b\n"


def test_a_fix_with_overlapping_edits_of_its_own_is_never_applied():
    fix = Fix("t", SAFE, (Edit(0, 3, "a"), Edit(2, 4, "b")))
    assert apply("abcdef", [fix]) == Applied("abcdef", (), (0,))


def test_apply_changes_nothing_without_fixes():
    result = apply("x = 1\n", [])
    assert (result.text, result.applied, result.skipped) == ("x = 1\n", (), ())


def test_unified_diff_marks_a_missing_final_newline():
    assert unified_diff("a.py", "x = 1", "x = 2") == (
        "--- a.py\n+++ a.py\n@@ -1 +1 @@\n-x = 1\n\\ No newline at end of file\n"
        "+x = 2\n\\ No newline at end of file\n"
    )


# -- fix_text: several fixes, imports, formatting ---------------------------------------------------------


def _fix(source: str, unsafe: bool = True):
    return Linter().fix_text(
        "example.py", textwrap.dedent(source), settings(select=("TL303", "TL304")), unsafe
    )


def test_several_fixes_in_one_file_are_applied_in_one_pass():
    result = _fix(
        """\
        from torch.cuda.amp import GradScaler, autocast

        scaler = GradScaler()
        with autocast(enabled=True):
            pass
        """
    )
    assert result.text == textwrap.dedent(
        """\
        import torch

        scaler = torch.amp.GradScaler("cuda")
        with torch.amp.autocast("cuda", enabled=True):
            pass
        """
    )
    assert (result.fixed, result.fixed_codes, result.diagnostics, result.warnings) == (
        2,
        {"TL303": 1, "TL304": 1},
        [],
        [],
    )
    assert [d.code for d in result.initial] == ["TL304", "TL303"]


def test_nested_fixes_are_applied_over_passes():
    result = _fix(
        """\
        import torch
        with torch.cuda.amp.autocast(torch.cuda.amp.GradScaler().is_enabled()):
            pass
        """
    )
    assert result.text == (
        "import torch\n"
        'with torch.amp.autocast("cuda", enabled=torch.amp.GradScaler("cuda").is_enabled()):\n'
        "    pass\n"
    )
    assert (result.fixed, result.diagnostics) == (2, [])


def test_an_existing_alias_is_reused():
    result = _fix("import torch as T\n\nscaler = T.cuda.amp.GradScaler()\n")
    assert result.text == 'import torch as T\n\nscaler = T.amp.GradScaler("cuda")\n'


def test_a_missing_import_is_added_once_where_isort_would_put_it():
    result = _fix(
        """\
        \"\"\"Training.\"\"\"
        import os
        import torch.nn as nn
        from torch.cuda.amp import GradScaler

        a = GradScaler()
        b = GradScaler()


        def f():
            import sys
            return GradScaler()
        """
    )
    assert result.text == textwrap.dedent(
        """\
        \"\"\"Training.\"\"\"
        import os
        import torch
        import torch.nn as nn

        a = torch.amp.GradScaler("cuda")
        b = torch.amp.GradScaler("cuda")


        def f():
            import sys
            return torch.amp.GradScaler("cuda")
        """
    )


@pytest.mark.parametrize(
    ("block", "fixed"),
    [
        (
            "import os\nimport sys\n\nfrom torch.cuda.amp import GradScaler\n",
            "import os\nimport sys\n\nimport torch\n",
        ),
        (
            "import numpy as np\nfrom torch.cuda.amp import GradScaler\n",
            "import numpy as np\nimport torch\n",
        ),
        (
            "import os\n\nimport zarr\nfrom torch.cuda.amp import GradScaler\n",
            "import os\n\nimport torch\nimport zarr\n",
        ),
        (
            "from __future__ import annotations\n\nfrom torch.cuda.amp import GradScaler\n",
            "from __future__ import annotations\n\nimport torch\n",
        ),
        (
            "import os\n\nimport numpy\nfrom torch.cuda.amp import GradScaler\nfrom tqdm import tqdm\n",
            "import os\n\nimport numpy\nimport torch\nfrom tqdm import tqdm\n",
        ),
        (
            "from torch.cuda.amp import GradScaler\n\nfrom . import models\n",
            "import torch\n\nfrom . import models\n",
        ),
    ],
)
def test_an_added_import_goes_where_isort_and_ruff_would_sort_it(block, fixed):
    """Sections apart by a blank line, straight imports before from-imports, by module name: a block
    that ruff's I001 accepted still passes after the fix."""
    result = _fix(f"{block}\nscaler = GradScaler()\n")
    assert result.text == f'{fixed}\nscaler = torch.amp.GradScaler("cuda")\n'


def test_the_only_statement_of_a_block_is_not_removed():
    source = """\
        try:
            from torch.cuda.amp import autocast
        except ImportError:
            pass

        with autocast():
            pass
        """
    result = _fix(source)
    assert result.text == textwrap.dedent(
        """\
        import torch
        try:
            from torch.cuda.amp import autocast
        except ImportError:
            pass

        with torch.amp.autocast("cuda"):
            pass
        """
    )


FORMATTED = '''\
"""Docstring kept."""
# a comment at the top

import torch   # two spaces before this comment
from torch.cuda.amp import autocast, GradScaler  # this import goes


def train(model,   batch):
\tscaler = GradScaler( init_scale = 2.0**16 )  # odd spacing kept
\twith autocast( enabled = True ):   # comment after with
\t\tx = {'single': "double",
\t\t     'tabs':\t1}   # aligned
\t\treturn model(batch)  # unchanged



def other(): return torch.cuda.amp.GradScaler (enabled = False)
'''


def test_formatting_next_to_fixed_nodes_survives_byte_for_byte():
    result = _fix(FORMATTED)
    assert (
        result.text
        == '''\
"""Docstring kept."""
# a comment at the top

import torch   # two spaces before this comment


def train(model,   batch):
\tscaler = torch.amp.GradScaler( "cuda", init_scale = 2.0**16 )  # odd spacing kept
\twith torch.amp.autocast( "cuda", enabled = True ):   # comment after with
\t\tx = {'single': "double",
\t\t     'tabs':\t1}   # aligned
\t\treturn model(batch)  # unchanged



def other(): return torch.amp.GradScaler ("cuda", enabled = False)
'''
    )


def test_crlf_stays_crlf_also_in_an_added_import():
    source = "from torch.cuda.amp import GradScaler\r\n\r\ns = GradScaler()  # keep\r\n"
    assert _fix(source).text == 'import torch\r\n\r\ns = torch.amp.GradScaler("cuda")  # keep\r\n'


def test_a_last_line_without_a_final_newline_is_fixed_and_stays_without_one():
    # LibCST renders the last statement with a newline the file does not have: the edit must not need it.
    source = "from torch.cuda.amp import GradScaler\ns = GradScaler()"
    assert _fix(source).text == 'import torch\ns = torch.amp.GradScaler("cuda")'


def test_a_use_kept_by_noqa_keeps_its_import():
    source = "from torch.cuda.amp import GradScaler\na = GradScaler()\nb = GradScaler()  # noqa: TL304\n"
    assert _fix(source).text == (
        'import torch\nfrom torch.cuda.amp import GradScaler\na = torch.amp.GradScaler("cuda")\n'
        "b = GradScaler()  # noqa: TL304\n"
    )


# -- fix_text: applicability, refusal, non-convergence ----------------------------------------------------


def test_applicability_decides_what_is_applied():
    rules = [text_rule("TL981", "slow", "fast"), text_rule("TL982", "risky", "bold", UNSAFE)]
    rules.append(text_rule("TL983", "hint", "HINT", DISPLAY))
    source = "slow = risky = hint = 1\n"
    safe_only = fix_with(rules, source, unsafe=False)
    assert (safe_only.text, safe_only.fixed) == ("fast = risky = hint = 1\n", 1)
    assert [d.code for d in safe_only.diagnostics] == ["TL982", "TL983"]
    with_unsafe = fix_with(rules, source, unsafe=True)
    assert (with_unsafe.text, with_unsafe.fixed) == ("fast = bold = hint = 1\n", 2)
    assert [d.code for d in with_unsafe.diagnostics] == ["TL983"]  # display-only: shown, never applied


def test_a_fix_that_breaks_the_code_is_refused_naming_the_rule_and_the_file():
    broken = text_rule("TL984", "total = ", "total = = ")  # deliberately produces a syntax error
    harmless = text_rule("TL985", "slow", "fast")
    with pytest.raises(InternalError) as raised:
        fix_with([broken, harmless], "total = slow(1)\n", path="train.py")
    assert str(raised.value) == (
        "a fix by TL984 would break train.py (the result does not compile); the file was left as it was"
    )


def test_a_result_that_only_compile_rejects_is_refused():
    # LibCST parses `return` at module level; CPython's compile() does not.
    moved = text_rule("TL986", "def f():\n    return 1\n", "return 1\n")
    with pytest.raises(InternalError, match="a fix by TL986 would break example.py"):
        fix_with([moved], "def f():\n    return 1\n")


def test_a_file_that_did_not_compile_is_not_held_to_it():
    # `return` outside a function already fails to compile: a fix elsewhere is not refused for it.
    rule = text_rule("TL987", "slow", "fast")
    result = fix_with([rule], "slow = 1\nreturn slow\n")
    assert result.text == "fast = 1\nreturn fast\n"


def test_fixes_that_undo_each_other_are_reported_not_looped_on():
    there = text_rule("TL988", "spam", "eggs")
    back = text_rule("TL989", "eggs", "spam")
    result = fix_with([there, back], "spam = 1\n", path="loop.py")
    assert result.text == "eggs = 1\n"
    assert result.warnings == [
        "loop.py: fixes by TL989 undo each other; stopped (this is a bug in torchlint, please report it)"
    ]


def test_a_fix_that_keeps_reappearing_is_reported_after_the_last_pass():
    growing = text_rule("TL990", "x", "xx")
    result = fix_with([growing], "x = 1\n", path="grow.py")
    assert result.text == "x" * 2**MAX_FIX_PASSES + " = 1\n"
    assert result.fixed == 2**MAX_FIX_PASSES - 1  # one more `x` each time, each one a finding
    assert result.warnings == [
        f"grow.py: fixes did not converge after {MAX_FIX_PASSES} passes; still fixable: TL990 "
        "(this is a bug in torchlint, please report it)"
    ]


def test_fix_text_still_unpacks_as_a_triple():
    text, fixed, diagnostics = _fix("import torch\ntorch.cuda.amp.GradScaler()\n")
    assert (text, fixed, diagnostics) == ('import torch\ntorch.amp.GradScaler("cuda")\n', 1, [])


# -- idempotence: every fixture and every rule doc Example --------------------------------------------------


DOC_EXAMPLES = [
    pytest.param(code, index, id=f"{code}-{index + 1}")
    for code, rule in sorted(registered_rules().items())
    if rule.has_doc_examples
    for index in range(len(python_blocks(doc_sections(code)["Example"])))
]


@pytest.mark.parametrize("code, index", DOC_EXAMPLES)
def test_a_second_fix_of_a_doc_example_changes_nothing(code, index):
    example = python_blocks(doc_sections(code)["Example"])[index]
    first = Linter().fix_text("example.py", example, settings(), True)
    assert first.warnings == []
    assert _compiles(first.text, "example.py") or not _compiles(example, "example.py")
    second = Linter().fix_text("example.py", first.text, settings(), True)
    assert (second.text, second.fixed) == (first.text, 0)


def test_a_second_fix_of_the_fixtures_changes_nothing(tmp_path):
    copy = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'copy'\n")
    before = _contents(copy)
    first = run(RunOptions(paths=[copy], fix=True, unsafe_fixes=True))
    assert (first.errors, first.warnings) == ([], [])
    after = _contents(copy)
    changed = sorted(path for path in after if after[path] != before[path])
    assert len(changed) == len(first.files_fixed) > 0
    assert all(_compiles(_python(after[path].decode(), path), path) for path in changed)
    second = run(RunOptions(paths=[copy], fix=True, unsafe_fixes=True))
    assert (second.errors, second.warnings, second.fixed, second.files_fixed) == ([], [], 0, [])
    assert _contents(copy) == after


def _contents(folder: Path) -> dict[str, bytes]:
    files = [*folder.rglob("*.py"), *folder.rglob("*.ipynb")]
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(files)}


def _python(text: str, path: str) -> str:
    """The module a file is: a notebook's code cells joined."""
    return Notebook.parse(text).python() if path.endswith(".ipynb") else text


# -- the CLI: what --fix, --unsafe-fixes and --diff say and do ---------------------------------------------


@pytest.fixture
def project(project, monkeypatch):
    """The shared empty project, with the text rules of `fixer_rules.py` discovered for the duration."""
    monkeypatch.setattr(base, "RULE_PACKAGES", (*base.RULE_PACKAGES, "fixer_rules"))
    return project


def invoke(*args: str):
    return CliRunner().invoke(main, ["--select", "TL991,TL992,TL993", *args], catch_exceptions=False)


def test_summary_counts_fixable_and_hidden_fixes(project):
    (project / "a.py").write_text("slow = risky = 1\n")
    result = invoke("--output-format", "concise")
    assert result.exit_code == 1
    assert result.output == (
        "a.py:1:1: TL991 `slow` is slow\n"
        "a.py:1:8: TL992 `risky` is slow\n"
        "Found 2 findings.\n"
        "[*] 1 fixable with the `--fix` option (1 hidden fix can be enabled with the `--unsafe-fixes` option).\n"
    )


def test_summary_with_only_unsafe_fixes(project):
    (project / "a.py").write_text("risky = risky + 1\n")
    result = invoke("--output-format", "concise", "-q")
    assert result.exit_code == 1
    result = invoke("--output-format", "concise")
    assert result.output.splitlines()[-2:] == [
        "Found 2 findings.",
        "No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option).",
    ]


def test_summary_with_unsafe_fixes_enabled_counts_them_as_fixable(project):
    (project / "a.py").write_text("slow = risky = 1\n")
    result = invoke("--output-format", "concise", "--unsafe-fixes")
    assert result.output.splitlines()[-2:] == ["Found 2 findings.", "[*] 2 fixable with the `--fix` option."]


def test_fix_applies_safe_fixes_and_says_what_remains(project):
    (project / "a.py").write_text("slow = risky = hint = 1\n")
    result = invoke("--output-format", "concise", "--fix")
    assert result.exit_code == 1
    assert (project / "a.py").read_text() == "fast = risky = hint = 1\n"
    assert result.output == (
        "a.py:1:8: TL992 `risky` is slow\n"
        "a.py:1:16: TL993 `hint` is slow\n"
        "Found 3 findings (1 fixed, 2 remaining).\n"
        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).\n"
    )


def test_fix_with_unsafe_fixes_applies_both_but_never_display_only(project):
    (project / "a.py").write_text("slow = risky = hint = 1\n")
    result = invoke("--output-format", "concise", "--fix", "--unsafe-fixes")
    assert result.exit_code == 1
    assert (project / "a.py").read_text() == "fast = bold = hint = 1\n"
    assert result.output.splitlines()[-1] == "Found 3 findings (2 fixed, 1 remaining)."


def test_fix_of_everything_exits_zero(project):
    (project / "a.py").write_text("slow = 1\n")
    (project / "b.py").write_text("slow = slow + 1\n")
    result = invoke("--fix")
    assert (result.exit_code, result.output) == (0, "Found 3 findings (3 fixed, 0 remaining).\n")


def test_diff_prints_what_fix_would_do_and_writes_nothing(project):
    (project / "a.py").write_text("x = 1\nslow = risky = 2\n")
    result = invoke("--diff")
    assert result.exit_code == 1
    assert result.stdout == (
        "--- a.py\n+++ a.py\n@@ -1,2 +1,2 @@\n x = 1\n-slow = risky = 2\n+fast = risky = 2\n"
    )
    assert result.stderr == "Would fix 1 finding (1 additional fix available with `--unsafe-fixes`).\n"
    assert (project / "a.py").read_text() == "x = 1\nslow = risky = 2\n"


def test_diff_with_unsafe_fixes(project):
    (project / "a.py").write_text("slow = risky = 2")  # no final newline
    result = invoke("--diff", "--unsafe-fixes")
    assert result.exit_code == 1
    assert result.stdout == (
        "--- a.py\n+++ a.py\n@@ -1 +1 @@\n-slow = risky = 2\n\\ No newline at end of file\n"
        "+fast = bold = 2\n\\ No newline at end of file\n"
    )
    assert result.stderr == "Would fix 2 findings.\n"


def test_diff_without_changes_exits_zero(project):
    (project / "a.py").write_text("hint = 1\n")
    result = invoke("--diff")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "No findings would be fixed.\n")


def test_fix_that_would_break_a_file_leaves_it_and_fixes_the_others(project, monkeypatch):
    (project / "a.py").write_text("total = slow\n")
    (project / "b.py").write_text("slow = 1\n")
    result = CliRunner().invoke(
        main, ["--select", "TL991,TL994", "--output-format", "concise", "--fix"], catch_exceptions=False
    )
    assert result.exit_code == 2
    assert (project / "a.py").read_text() == "total = slow\n"
    assert (project / "b.py").read_text() == "fast = 1\n"
    assert result.stderr == (
        "error: internal error: a fix by TL994 would break a.py (the result does not compile); "
        "the file was left as it was\n"
    )
    assert result.stdout == (
        "a.py:1:1: TL994 `total = ` is slow\n"
        "a.py:1:9: TL991 `slow` is slow\n"
        "Found 3 findings (1 fixed, 2 remaining).\n"
        "[*] 2 fixable with the `--fix` option.\n"
        "1 file could not be fixed (see the errors above).\n"
    )


def test_a_non_converging_fix_is_a_warning_and_the_file_is_still_written(project, monkeypatch):
    (project / "a.py").write_text("x = 1\n")
    result = CliRunner().invoke(main, ["--select", "TL995", "--fix", "-q"], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr == (
        f"warning: a.py: fixes did not converge after {MAX_FIX_PASSES} passes; still fixable: TL995 "
        "(this is a bug in torchlint, please report it)\n"
    )
    assert (project / "a.py").read_text() == "x" * 2**MAX_FIX_PASSES + " = 1\n"


def test_the_repo_is_where_the_tests_think_it_is():
    assert (REPO / "torchlint" / "fix" / "apply.py").is_file()


def test_a_lone_carriage_return_ends_a_line_for_positions_fixes_and_noqa():
    """Python and LibCST end a line at a lone "\\r": so must positions, or a fix lands on the wrong line
    (reliability repro D4: inside a string literal)."""
    source = (
        '# x\r# y\rimport torch\nscaler = torch.cuda.amp.GradScaler()\ndoc = """\n'
        'scaler = torch.cuda.amp.GradScaler()\n"""\nkept = torch.cuda.amp.GradScaler()  # noqa: TL304\r'
    )
    assert [(d.code, d.location.line) for d in lint(source, select=("TL304",))] == [("TL304", 4)]
    assert fix(source, select=("TL304",)) == source.replace(
        "scaler = torch.cuda.amp.GradScaler()\ndoc", 'scaler = torch.amp.GradScaler("cuda")\ndoc'
    )


# -- edits that must stay valid code and keep what the author wrote (reliability report M4, M5, M6, L1, L2) --


def test_a_string_written_inside_an_f_string_takes_the_other_quote():
    """Before Python 3.12 an f-string's replacement field may not reuse its quote."""
    result = _fix('import torch\nx = f"{torch.cuda.amp.GradScaler(init_scale=2.0)!s:{w}}"\n')
    assert result.text == "import torch\nx = f\"{torch.amp.GradScaler('cuda', init_scale=2.0)!s:{w}}\"\n"
    assert result.warnings == []


def test_no_fix_inside_f_strings_that_use_both_quotes():
    source = "import torch\ny = f'{f\"{torch.cuda.amp.autocast()}\"}'\n"
    result = _fix(source)
    assert result.text == source
    assert [d.code for d in result.diagnostics] == ["TL303"]
    assert result.diagnostics[0].fix is None


def test_an_import_re_exported_through_dunder_all_is_kept():
    result = _fix("from torch.cuda.amp import GradScaler\n__all__ = ['GradScaler']\ns = GradScaler()\n")
    assert result.text == (
        "import torch\nfrom torch.cuda.amp import GradScaler\n"
        "__all__ = ['GradScaler']\ns = torch.amp.GradScaler(\"cuda\")\n"
    )


def test_a_lazy_import_inside_a_function_stays_inside_it():
    """A module that could be imported without torch still can."""
    result = _fix(
        """\
        def make_scaler():
            from torch.cuda.amp import GradScaler
            return GradScaler()


        def run():
            ready = True
            from torch.cuda.amp import autocast, GradScaler
            with autocast():
                return GradScaler()
        """
    )
    assert result.text == textwrap.dedent(
        """\
        def make_scaler():
            import torch
            return torch.amp.GradScaler("cuda")


        def run():
            ready = True
            import torch
            with torch.amp.autocast("cuda"):
                return torch.amp.GradScaler("cuda")
        """
    )


def test_comments_inside_a_removed_import_are_kept():
    result = _fix(
        """\
        import torch
        from torch.cuda.amp import (  # pinned: see the release notes
            GradScaler,  # the fp16 scaler
        )
        s = GradScaler()
        """
    )
    assert result.text == textwrap.dedent(
        """\
        import torch
        # pinned: see the release notes
        # the fp16 scaler
        s = torch.amp.GradScaler("cuda")
        """
    )


def test_the_diff_counts_lines_as_patch_does_across_form_feeds_and_line_separators():
    before = "import torch\n# page\x0cbreak\u2028 here\nscaler = torch.cuda.amp.GradScaler()\n"
    after = before.replace("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")')
    assert unified_diff("t.py", before, after) == (
        "--- t.py\n+++ t.py\n@@ -1,3 +1,3 @@\n"
        " import torch\n"
        " # page\x0cbreak\u2028 here\n"
        "-scaler = torch.cuda.amp.GradScaler()\n"
        '+scaler = torch.amp.GradScaler("cuda")\n'
    )


def test_valid_code_nested_deeper_than_the_default_recursion_limit_is_checked_and_fixed():
    """300 implicitly concatenated strings in parentheses: valid Python, and a tree 300 levels deep."""
    strings = "\n".join(['"a" "b"'] * 300)
    source = f"import torch\nscaler = torch.cuda.amp.GradScaler()\nx = ({strings})\n"
    result = _fix(source)
    assert result.text == source.replace("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")')
    assert (result.fixed, result.diagnostics, result.warnings) == (1, [], [])


@pytest.mark.parametrize(
    ("call", "fixed"),
    [
        (
            "DataLoader(\n    ds,\n    batch_size=4\n)",
            "DataLoader(\n    ds,\n    batch_size=4,\n    pin_memory=True\n)",
        ),
        ("DataLoader(\n    ds)", "DataLoader(\n    ds,\n    pin_memory=True)"),
        (
            "DataLoader(ds,\n           batch_size=4)",
            "DataLoader(ds,\n           batch_size=4,\n           pin_memory=True)",
        ),
        ("DataLoader(ds, batch_size=4)", "DataLoader(ds, batch_size=4, pin_memory=True)"),
    ],
)
def test_a_keyword_added_to_a_call_follows_the_call_s_own_layout(call, fixed):
    """One argument per line stays one per line, with no trailing whitespace and `)` where it was."""
    source = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "model = Net().cuda()\nopt = torch.optim.SGD(model.parameters())\n"
        f"loader = {call}\n"
        "for x, y in loader:\n    opt.zero_grad()\n    model(x.cuda()).sum().backward()\n    opt.step()\n"
    )
    result = Linter().fix_text("example.py", source, settings(select=("TL202",)), True)
    assert result.text == source.replace(call, fixed)


def _same_edits(text: str, replacements, monkeypatch) -> tuple[int, int]:
    """Each (old, new) of `replacements(module)` edited as the text tells (`_replace_in_text`,
    `_replace_in_statement`) and by rendering the top-level statement: the same edit, or both EditError.
    Returns how many were compared, and how many the text answered without the top-level statement."""
    import libcst as cst

    import torchlint.fix.build as build
    from torchlint.facts.syntax.module import SourceModule

    source = SourceModule("train.py", text, cst.parse_module(text))
    pairs = replacements(source.module)
    quick = (build._replace_in_text, build._replace_in_statement)
    answered = 0
    for old, new in pairs:
        answered += any(way(source, old, new) is not None for way in quick)
        edits = []
        for ways in (quick, (lambda *_: None,) * 2):
            monkeypatch.setattr(build, "_replace_in_text", ways[0])
            monkeypatch.setattr(build, "_replace_in_statement", ways[1])
            try:
                edits.append(build.replace_node(source, old, new))
            except build.EditError:
                edits.append(None)
        assert edits[0] == edits[1], source.code(old)
    monkeypatch.setattr(build, "_replace_in_text", quick[0])
    monkeypatch.setattr(build, "_replace_in_statement", quick[1])
    return len(pairs), answered


def _argument_added_everywhere(text: str, monkeypatch) -> tuple[int, int]:
    """Each call of `text` gains a keyword argument (see `_same_edits`)."""
    import libcst as cst

    import torchlint.fix.build as build

    def added(module):
        calls = [node for node in _every_node(module) if isinstance(node, cst.Call)]
        return [(call, build._with_argument(call, "num_workers", cst.Integer("4"))) for call in calls]

    return _same_edits(text, added, monkeypatch)


def _blocks_and_statements_replaced(text: str, monkeypatch) -> tuple[int, int]:
    """Each indented block gains a statement, and each statement in one is replaced (see `_same_edits`)."""
    import libcst as cst

    def replaced(module):
        pairs = []
        for node in _every_node(module):
            if isinstance(node, cst.IndentedBlock):
                pairs.append((node, node.with_changes(body=[*node.body, cst.parse_statement("pass")])))
                pairs.extend((line, cst.parse_statement("x = 1  # new\n")) for line in node.body)
        return pairs

    return _same_edits(text, replaced, monkeypatch)


def _every_node(module):
    todo, found = list(module.body), []
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(node.children)
    return found


MULTI_LINE_CALLS = (
    "import torch\n\n\ndef train(model, data):\n    for epoch in range(3):\n"
    "        loader = DataLoader(\n            data,\n            # batches\n\n"
    "            batch_size=8,\n        )\n        if epoch:\n          loader = DataLoader(data,\n"
    "\t\tshuffle=True)\n    x = f(g(1,\n          2), h(\n        3))\n"
    "loader = DataLoader(data, batch_size=8,\n                    shuffle=True)\n"
)


def test_a_call_over_several_lines_gains_an_argument_as_the_whole_statement_would(monkeypatch):
    assert _argument_added_everywhere(MULTI_LINE_CALLS, monkeypatch) == (7, 7)


def test_a_nested_block_or_statement_is_replaced_as_the_whole_statement_would(monkeypatch):
    assert _blocks_and_statements_replaced(MULTI_LINE_CALLS, monkeypatch) == (8, 5)


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: p.relative_to(FIXTURES).as_posix()
)
def test_every_call_of_the_fixtures_gains_an_argument_as_the_whole_statement_would(path, monkeypatch):
    compared, _ = _argument_added_everywhere(path.read_text(encoding="utf-8"), monkeypatch)
    assert compared > 0


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: p.relative_to(FIXTURES).as_posix()
)
def test_every_block_and_statement_of_the_fixtures_is_replaced_as_the_whole_statement_would(
    path, monkeypatch
):
    _blocks_and_statements_replaced(path.read_text(encoding="utf-8"), monkeypatch)


def test_a_one_line_replacement_is_edited_on_its_line_as_the_whole_statement_would_be(monkeypatch):
    """`replace_node` on a callee inside a long function edits its line of text: the same edit as
    rendering the statement before and after, which it no longer does."""
    import libcst as cst

    import torchlint.fix.build as build
    from torchlint.facts.syntax.module import SourceModule

    text = "def train(model):\n" + "    model.step()\n" * 300 + "    torch.cuda.amp.autocast(x)  # keep\n"
    source = SourceModule("train.py", text, cst.parse_module(text))
    old = cst.ensure_type(
        cst.ensure_type(source.module.body[0].body.body[-1], cst.SimpleStatementLine).body[0], cst.Expr
    ).value.func
    new = cst.parse_expression("torch.amp.autocast")
    rendered: list[cst.CSTNode] = []
    monkeypatch.setattr(build, "_body_code", lambda source, statement: rendered.append(statement) or "")
    edit = build.replace_node(source, old, new)
    start = text.index("cuda.amp")
    assert (edit.start, edit.end, edit.content) == (start, start + len("cuda."), "")
    assert rendered == []
    monkeypatch.undo()
    assert build.replace_node(source, old, cst.parse_expression("amp.autocast")) == build.minimal_edit(
        text.index("torch.cuda"), "torch.cuda.amp.autocast", "amp.autocast"
    )
