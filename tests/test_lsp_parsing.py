"""The server's statement-by-statement parse gives the module `libcst.parse_module` gives, node for node,
and parses again only the statements an edit changed."""

from __future__ import annotations

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from support import FIXTURES
from test_spans import LAYOUTS

from torchlint._lazy import cst
from torchlint.lsp.parsing import StatementParser, text_cache

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
    cache = text_cache()
    text = "import torch\n\n\ndef f():\n    return 1\n"
    first = cache(text)
    monkeypatch.setattr(cst, "parse_module", lambda *a, **k: pytest.fail("parsed again"))
    assert cache(text) is first


def test_the_texts_kept_whole_stay_within_their_budget():
    cache = text_cache(texts=30)
    texts = [f"x = {n}\ny = {n}\n" for n in range(10, 20)]  # 12 characters each
    for text in texts:
        cache(text)
    assert list(cache._results) == texts[-2:]
