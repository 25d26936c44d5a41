"""The rule docs are tests: each doc's Example fires exactly where it says, its fix gives Use instead."""

from __future__ import annotations

import pytest
from support import RULE_DOCS, doc_sections, error_lines, fix, lint, python_block, strip_error_markers

from torchlint.docs import rule_doc
from torchlint.rules.base import registered_rules

RULES = registered_rules()
REQUIRED_SECTIONS = ["What it does", "Why it matters", "Example", "Use instead", "Fix safety", "Options"]


def test_every_rule_has_a_doc_and_every_doc_a_rule():
    documented = {path.stem for path in RULE_DOCS.glob("*.md")}
    assert documented == set(RULES)


@pytest.mark.parametrize("code", sorted(RULES))
def test_doc_has_title_and_all_sections_in_order(code):
    sections = doc_sections(code)
    assert sections["title"] == f"# {code} {RULES[code].name}"
    assert [s for s in sections if s != "title"] == REQUIRED_SECTIONS


EXAMPLE_RULES = sorted(code for code, rule in RULES.items() if rule.has_doc_examples)


@pytest.mark.parametrize("code", EXAMPLE_RULES)
def test_example_fires_exactly_on_the_marked_lines(code):
    example = python_block(doc_sections(code)["Example"])
    assert example is not None, "the Example section needs a python block"
    found = {d.location.line for d in lint(example, select=(code,))}
    assert found == error_lines(example)


@pytest.mark.parametrize("code", EXAMPLE_RULES)
def test_use_instead_does_not_fire(code):
    good = python_block(doc_sections(code)["Use instead"])
    assert good is not None
    assert [d for d in lint(good, select=(code,))] == []


@pytest.mark.parametrize(
    "code", sorted(c for c in EXAMPLE_RULES if RULES[c].fix_availability.value != "none")
)
def test_fixed_example_is_use_instead(code):
    sections = doc_sections(code)
    example = python_block(sections["Example"])
    assert strip_error_markers(fix(example, select=(code,))) == python_block(sections["Use instead"])


def test_torchlint_rule_prints_the_doc_from_the_package():
    assert rule_doc("TL303") == (RULE_DOCS / "TL303.md").read_text(encoding="utf-8")
