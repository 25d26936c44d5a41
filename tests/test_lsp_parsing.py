"""The server's statement-by-statement parse gives the module `libcst.parse_module` gives, node for node,
and parses again only the statements an edit changed."""

from __future__ import annotations

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from support import FIXTURES
from test_spans import LAYOUTS

from torchlint._lazy import cst
from torchlint.lsp.parsing import OtherFiles, StatementParser

MORE_LAYOUTS = {
    "comments indented under a block, then blank lines": (
        "def f():\n    pass\n    # mine\n\n        # also mine\n\n# the next one's\nx = 1\n"
    ),
    "nested blocks with trailing comments": (
        "if a:\n    if b:\n        pass\n        # inner\n    # outer\n# top\nclass C:\n    x = 1\n\n\n"
    ),
    "an indented comment after a simple statement": "x = 1\n    # odd\ny = 2\n",
    "repeated statements": "x = 1\nx = 1\ndef f():\n    pass\ndef f():\n    pass\n",
    "tabs": "if x:\n\tpass\ny = 1\n",
    "blank lines and comments at the top": "\n\n# a\n\n#!b\nimport os\n\n\n# c\n",
}


def _assert_same(text: str, parser: StatementParser | None = None) -> cst.Module:
    parsed = (parser or StatementParser())(text)
    expected = cst.parse_module(text)
    assert parsed.code == text
    assert parsed.deep_equals(expected)
    assert (parsed.default_indent, parsed.default_newline, parsed.has_trailing_newline) == (
        expected.default_indent,
        expected.default_newline,
        expected.has_trailing_newline,
    )
    return parsed


@pytest.mark.parametrize("name", sorted({**LAYOUTS, **MORE_LAYOUTS}))
def test_the_assembled_module_is_libcsts(name):
    _assert_same({**LAYOUTS, **MORE_LAYOUTS}[name])


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: p.relative_to(FIXTURES).as_posix()
)
def test_the_assembled_module_is_libcsts_on_the_fixtures(path):
    _assert_same(path.read_text(encoding="utf-8"))


GENERATED = hypothesmith.from_grammar()


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # generated programs say odd things
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(GENERATED)
def test_the_assembled_module_is_libcsts_on_generated_programs(text):
    try:
        expected = cst.parse_module(text)
    except Exception:  # noqa: BLE001 - valid for the grammar, not for LibCST: nothing to compare
        return
    parsed = StatementParser()(text)
    assert parsed.code == expected.code and parsed.deep_equals(expected)


def test_an_edit_parses_only_the_statement_it_changed(monkeypatch):
    parser = StatementParser()
    text = "import torch\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n"
    _assert_same(text, parser)
    parsed = []
    parse = cst.parse_module
    monkeypatch.setattr(
        cst, "parse_module", lambda code, *a, **k: parsed.append(code) or parse(code, *a, **k)
    )
    StatementParser.__call__(parser, text.replace("return 2", "return 3"))
    assert parsed == ["\n\ndef g():\n    return 3\n"]


def test_a_repeated_statement_gets_nodes_of_its_own():
    module = _assert_same("x = 1\nx = 1\n")
    assert module.body[0] is not module.body[1]


def test_another_files_text_seen_before_comes_back_without_any_parse(monkeypatch):
    """Every check is a run, which parses the other files its questions reach again: their unchanged
    texts come back as they were."""
    cache = OtherFiles()
    text = "import torch\n\n\ndef f():\n    return 1\n"
    first = cache.parse(text)
    monkeypatch.setattr(cst, "parse_module", lambda *a, **k: pytest.fail("parsed again"))
    assert cache.parse(text) is first


def test_the_texts_kept_whole_stay_within_their_budget():
    cache = OtherFiles(texts=30)
    texts = [f"x = {n}\ny = {n}\n" for n in range(10, 20)]  # 12 characters each
    for text in texts:
        cache.parse(text)
    assert list(cache._kept._results) == texts[-2:]


def test_another_files_records_come_back_with_its_module_and_only_with_it():
    """The syntax records of an unchanged other file are collected once; a second parse of the same text
    (two files with one text in one run) gets records of its own nodes."""
    cache = OtherFiles()
    text = "import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n"
    module = cache.parse(text)
    records = cache.records(text, module)
    assert cache.records(text, cache.parse(text)) is records
    assert records.classes[0].node is module.body[-1]
    other = cst.parse_module(text)
    own = cache.records(text, other)
    assert own is not records and own.classes[0].node is other.body[-1]


def test_an_edit_collects_no_records_of_the_unchanged_other_files_again(tmp_path, monkeypatch):
    """A keystroke's check is a new run, but engine.py's text did not change: its module and its records
    come back as they were, and only the edited buffer is collected; the findings are a fresh server's."""
    from support import record_calls
    from test_lsp_result_cache import ENGINE, TRAIN, findings

    from torchlint.facts.syntax.collect import Collector
    from torchlint.lsp.checker import Checker
    from torchlint.lsp.documents import Buffer, BufferFileSystem

    monkeypatch.setenv("TORCHLINT_NO_CACHE", "1")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "engine.py").write_text(ENGINE)
    (tmp_path / "train.py").write_text(TRAIN)
    path = tmp_path / "train.py"
    checker = Checker(BufferFileSystem(), tmp_path)
    first = Buffer(path.as_uri(), 1, TRAIN, path)
    checker.fs.open(first)
    checker.check(first)
    collected = record_calls(monkeypatch, Collector, "collect", lambda self, module: module.code)
    edited = TRAIN.replace("lr=0.1", "lr=0.2")
    second = Buffer(path.as_uri(), 2, edited, path)
    checker.fs.open(second)
    found = findings(checker.check(second))
    assert collected == [edited]
    monkeypatch.undo()
    monkeypatch.setenv("TORCHLINT_NO_CACHE", "1")
    fresh = Checker(BufferFileSystem(), tmp_path)
    again = Buffer(path.as_uri(), 1, edited, path)
    fresh.fs.open(again)
    assert found == findings(fresh.check(again))
    assert {"TL101", "TL202"} <= {code for code, _, _ in found}
