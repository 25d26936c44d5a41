"""Rules declare what they say (as ruff's `Violation`): each kind of finding's message and each kind of fix's
title is a template in the rule's class, filled by `Rule.report` and `Rule.fix`; no rule writes its own
`Diagnostic` or `Fix`, so a finding's wording lives next to the rule, not at the call site."""

from __future__ import annotations

import ast
import inspect
import string
from pathlib import Path

import pytest

from torchlint.diagnostics import Severity
from torchlint.fix.model import Applicability, Edit
from torchlint.linter import Linter
from torchlint.rules.base import Rule, registered_rules
from torchlint.workspace.settings import Settings

RULES = registered_rules()
RULE_MODULES = sorted((Path(__file__).parent.parent / "torchlint" / "rules").glob("*/rules.py"))
# TL0xx are raised by the pipeline itself (the parser, the reader, the noqa check), not by `check`.
REPORTING = {code: rule for code, rule in RULES.items() if not code.startswith("TL0")}


def _fields(template: str) -> list[str]:
    return [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]


@pytest.mark.parametrize("code", sorted(REPORTING))
def test_every_rule_declares_its_messages_as_templates_of_named_fields(code):
    rule = REPORTING[code]
    assert rule.messages, f"{code} declares no message"
    for kind, template in [*rule.messages.items(), *rule.fix_titles.items()]:
        assert kind and template, (code, kind)
        for field in _fields(template):  # `{model}`, never `{model.text}` nor `{0}`: the fields are named
            assert field.isidentifier(), (code, kind, field)


@pytest.mark.parametrize("path", RULE_MODULES, ids=lambda p: p.parent.name)
def test_no_rule_writes_its_own_diagnostic_or_fix(path):
    tree = ast.parse(path.read_text())
    built = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if node.func.id in {"Diagnostic", "Fix"}
    }
    assert not built, f"{path.parent.name}/rules.py builds {built} itself: use `self.report` / `self.fix`"


@pytest.mark.parametrize("path", RULE_MODULES, ids=lambda p: p.parent.name)
def test_every_declared_kind_is_reported_somewhere(path):
    """A kind is named once where it is declared and at least once where it is reported (or chosen)."""
    text = path.read_text()
    for code, rule in REPORTING.items():
        if inspect.getsourcefile(rule) != str(path.resolve()):
            continue
        for kind in [*rule.messages, *rule.fix_titles]:
            assert text.count(f'"{kind}"') >= 2, f"{code}'s kind {kind!r} is declared but never reported"


class _Voice(Rule):
    code = "TL998"
    name = "voice"
    messages = {"slow": "`{callee}` is slow: {why}", "braces": 'pass `{{"a": 1}}` to `{callee}`'}
    fix_titles = {"fast": "Use `{better}`"}

    def check(self, facts):
        fix = self.fix("fast", Applicability.SAFE, [Edit(0, 4, "fast")], better="fast")
        yield self.report(facts, facts.source.module.body[0], "slow", fix=fix, callee="slow()", why="it is")
        yield self.report(facts, facts.source.module.body[0], "braces", note="no fix", callee="slow")


def test_report_fills_the_declared_templates_and_keeps_the_note_apart():
    linter = Linter(rule_classes={"TL998": _Voice})
    found = linter.check_text("x.py", "slow()\n", Settings(select=("TL998",)), in_project=False)
    assert [(d.message, d.note, d.severity) for d in found] == [
        ("`slow()` is slow: it is", None, Severity.WARNING),
        ('pass `{"a": 1}` to `slow`', "no fix", Severity.WARNING),
    ]
    assert found[0].fix is not None and found[0].fix.title == "Use `fast`"
    assert found[0].fix.edits == (Edit(0, 4, "fast"),)
