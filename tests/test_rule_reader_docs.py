"""Rule docs as readers get them (`torchlint rule`, the editor's hover, SARIF help): the examples without
the `# error` markers that make them tests, and nothing else changed."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from support import RULE_DOCS

from torchlint.cli import main
from torchlint.rules.base import registered_rules


@pytest.mark.parametrize("code", sorted(registered_rules()))
def test_torchlint_rule_prints_the_doc_without_test_markers(code):
    written = (RULE_DOCS / f"{code}.md").read_text(encoding="utf-8")
    printed = CliRunner().invoke(main, ["rule", code], catch_exceptions=False).output
    assert "# error" not in printed
    kept = [line for line in written.splitlines() if "# error" not in line]
    assert all(line in printed.splitlines() for line in kept)  # only the marked lines changed


def test_a_marker_with_columns_and_applicability_goes_with_its_spaces():
    printed = CliRunner().invoke(main, ["rule", "TL303"], catch_exceptions=False).output
    assert "with torch.cuda.amp.autocast(True, torch.float16, False):\n" in printed
    assert "    with autocast(enabled=use_amp):\n" in printed
