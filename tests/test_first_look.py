"""The first look (`Linter.check_own_file`): the editor's findings before any other file is read. What it
shows must be what the full check shows for the rules it finished, never a guess: a rule that asks about
another file is left for the full check, and nothing it half worked out answers the rules after it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from torchlint.linter import Linter
from torchlint.rules.base import Rule
from torchlint.workspace.settings import Settings

FIXTURES = Path(__file__).parent.parent / "fixtures"
ALL = Settings(select=("ALL",))


def _key(diagnostic) -> tuple:
    return (
        diagnostic.code,
        diagnostic.start,
        diagnostic.end,
        diagnostic.message,
        diagnostic.note,
        diagnostic.fix,
    )


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: p.relative_to(FIXTURES).as_posix()
)
def test_the_first_look_shows_the_full_checks_findings_of_the_rules_it_finished(path):
    text = path.read_text()
    own, deferred = Linter().check_own_file(str(path), text, ALL, in_project=True)
    full = Linter().check_text(str(path), text, ALL, in_project=True)
    assert [_key(d) for d in own] == [_key(d) for d in full if d.code not in deferred]


def test_rules_that_ask_about_another_file_are_left_for_the_full_check(tmp_path):
    shutil.copytree(FIXTURES / "two_module", tmp_path / "demo")
    train = tmp_path / "demo" / "train.py"
    own, deferred = Linter().check_own_file(str(train), train.read_text(), ALL, in_project=True)
    # `train_one_epoch` comes from engine.py: whether `model` is trained there is another file's answer.
    assert [(d.code, d.location.line) for d in own] == [("TL304", 62)]
    assert {"TL101", "TL203"} <= deferred
    assert "TL304" not in deferred
    full = Linter().check_text(str(train), train.read_text(), ALL, in_project=True)
    assert [(d.code, d.location.line) for d in full] == [("TL203", 49), ("TL101", 59), ("TL304", 62)]


def test_a_script_nothing_imports_is_checked_whole_at_the_first_look(tmp_path):
    # Who imports a file is read from the other files' import statements, not their code: a script that
    # no file imports and that imports nothing of the project needs no other file's facts.
    shutil.copytree(FIXTURES / "mnist_style", tmp_path / "demo")
    (tmp_path / "demo" / "plots.py").write_text("import matplotlib\n")
    main = tmp_path / "demo" / "main.py"
    own, deferred = Linter().check_own_file(str(main), main.read_text(), ALL, in_project=True)
    assert deferred == frozenset()
    full = Linter().check_text(str(main), main.read_text(), ALL, in_project=True)
    assert [_key(d) for d in own] == [_key(d) for d in full]
    assert len(full) == 6


def test_a_text_on_its_own_is_checked_whole_at_the_first_look():
    text = (FIXTURES / "two_module" / "train.py").read_text()
    own, deferred = Linter().check_own_file("train.py", text, ALL, in_project=False)
    assert deferred == frozenset()
    assert [_key(d) for d in own] == [
        _key(d) for d in Linter().check_text("train.py", text, ALL, in_project=False)
    ]


def test_an_unused_noqa_is_known_only_once_every_rule_has_reported(tmp_path):
    shutil.copytree(FIXTURES / "two_module", tmp_path / "demo")
    train = tmp_path / "demo" / "train.py"
    text = train.read_text().replace("import torch\n", "import torch  # noqa: TL501\n", 1)
    own, deferred = Linter().check_own_file(str(train), text, ALL, in_project=True)
    assert "TL003" in deferred
    assert "TL003" not in {d.code for d in own}
    full = Linter().check_text(str(train), text, ALL, in_project=True)
    assert "TL003" in {d.code for d in full}


class _HalfWay(Rule):
    """Fills a table on the facts, then asks about another file midway: as an analysis's cached question
    that a rule stops in."""

    code = "TL995"
    name = "half-way"
    messages = {"m": "m"}

    def check(self, facts):
        facts.table = ["half filled"]
        facts.source.project.facts_for(facts.source.file)
        yield from ()


class _Reader(Rule):
    """Reports what the table says, as a later rule asking the same cached question would."""

    code = "TL996"
    name = "reader"
    messages = {"filled": "the table says {what}"}

    def check(self, facts):
        for what in getattr(facts, "table", []):
            yield self.report(facts, facts.source.module.body[0], "filled", what=what)


def test_what_a_stopped_rule_half_worked_out_does_not_answer_the_rules_after_it(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    linter = Linter(rule_classes={"TL995": _HalfWay, "TL996": _Reader}, prefilter=False)
    settings = Settings(select=("TL995", "TL996"))
    own, deferred = linter.check_own_file(str(script), script.read_text(), settings)
    assert (own, deferred) == ([], {"TL995"})


class _Guarded(Rule):
    """Asks the project inside a handler of every error, as an analysis might around a shaky answer."""

    code = "TL997"
    name = "guarded"
    messages = {"alone": "checked alone"}

    def check(self, facts):
        try:
            facts.source.project.facts_for(facts.source.file)
        except Exception:  # noqa: BLE001 - what is tested: this must not catch the first look's signal
            yield self.report(facts, facts.source.module.body[0], "alone")


def test_no_handler_of_errors_turns_the_question_into_an_answer(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    linter = Linter(rule_classes={"TL997": _Guarded}, prefilter=False)
    own, deferred = linter.check_own_file(str(script), script.read_text(), Settings(select=("TL997",)))
    assert (own, deferred) == ([], {"TL997"})
