"""Positions per top-level statement (`facts/syntax/spans.py`) are the whole-module PositionProvider's,
node for node, on the fixtures and on the layouts that could pair ast's statements with LibCST's wrongly."""

from __future__ import annotations

import pytest
from support import FIXTURES

from torchlint._lazy import cst
from torchlint.facts.syntax.spans import Spans
from torchlint.positions import LineIndex

LAYOUTS = {
    "decorators and comments": (
        "# header comment\n\nimport torch\n\n\n# about f\n@decorator(\n    1)\n# between\n@other\n"
        "def f(x):\n    return x  # trailing\n    # indented after the body\n\n# before g\nclass G:\n    pass\n"
    ),
    "several statements on one line": "a = 1; b = (2,\n 3); c = 4\nd = torch.cuda.amp.autocast()\n",
    "no final newline": "import torch\nscaler = torch.cuda.amp.GradScaler()",
    "comments after the last statement": "x = f(1)\n# the end\n   # indented\n",
    "crlf and non-ascii": "name = 'é🔥'\r\nx = torch.cuda.amp.autocast()\r\n",
    "backslash continuation": "x = 1 + \\\n    2\nif x:\n    y = g(\n        x)\n",
    "form feed": "x = 1\n\x0c\ny = f(x)\n",
    "docstring only": '"""Doc."""\n',
    "multi-line calls in nested blocks": (
        "def train(model, loader):\n    for x in loader:\n        loss = model(\n            x,\n"
        "            # a comment in the call\n\n            y=[1,\n   2],\n        )\n"
        "        if loss:\n          opt.step(loss,\n            lr=f(\n              1))\n"
    ),
    "tabs and a backslash inside a block": (
        "class A:\n\tdef f(self):\n\t\treturn g(1,\n\t\t\t2) + \\\n\t\t\th(3)\n"
    ),
    "the same call at two depths": (
        "def f():\n    if a:\n        x = DataLoader(ds,\n            batch_size=1)\n"
        "    x = DataLoader(ds,\n        batch_size=1)\n"
    ),
    "strings over several lines": 'def f():\n    x = g("""a\n  b""",\n        c)\n',
}


def _same_spans(text: str) -> int:
    module = cst.parse_module(text)
    lines = LineIndex(text)
    fast, whole = Spans(text, module, lines), Spans(text, module, lines)
    nodes = _nodes(module)
    for node in nodes:
        assert fast.span(node) == whole._whole_module_span(node), (type(node).__name__, fast.span(node))
    # Every statement was located by itself (none fell back to the whole module).
    assert all(fast._located(index) is not None for index in range(len(module.body)))
    return len(nodes)


def _nodes(module: cst.Module) -> list[cst.CSTNode]:
    index = Spans("", module, LineIndex(""))._index
    found = []
    todo = list(module.body)
    while todo:
        node = todo.pop()
        if id(node) in index:
            found.append(node)
        todo.extend(node.children)
    return found


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_statement_spans_equal_the_whole_module_positions(name):
    assert _same_spans(LAYOUTS[name]) > 0


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: p.relative_to(FIXTURES).as_posix()
)
def test_statement_spans_equal_the_whole_module_positions_on_the_fixtures(path):
    assert _same_spans(path.read_text(encoding="utf-8")) > 0


def test_a_statement_that_is_not_where_ast_says_is_answered_from_the_whole_module():
    text = "x = 1\ny = f(2)\n"
    module = cst.parse_module(text)
    spans = Spans(text, module, LineIndex(text))
    spans.__dict__["_starts"] = [0, 1]  # a pairing gone wrong for the second statement
    call = module.body[1].body[0].value
    assert spans.span(call) == (10, 14)
    assert spans._located(1) is None


LONG_FUNCTION = (
    "import torch\n\n\ndef train(model, loader):\n"
    + "".join(f"    x{i} = model(x{i - 1}, step={i})\n" for i in range(1, 200))
    + "    with torch.cuda.amp.autocast():\n        loss = model(x199)\n"
)


def test_a_one_line_expression_is_found_by_its_text_without_rendering_its_statement(monkeypatch):
    """A finding's callee inside a long training function: its one occurrence in the statement's text is
    where it is, the same offsets as PositionProvider's, with no statement rendered for positions."""
    module = cst.parse_module(LONG_FUNCTION)
    spans = Spans(LONG_FUNCTION, module, LineIndex(LONG_FUNCTION))
    monkeypatch.setattr(Spans, "_locate", lambda self, index: pytest.fail("rendered the statement"))
    (with_item,) = [
        node for node in _nodes(module) if isinstance(node, cst.Attribute) and node.attr.value == "autocast"
    ]
    start = LONG_FUNCTION.index("torch.cuda.amp.autocast")
    assert spans.span(with_item) == (start, start + len("torch.cuda.amp.autocast"))


def test_an_expression_written_twice_in_its_statement_is_located_by_rendering_it():
    text = "def f(model):\n    a = model(x)\n    b = model(x)\n"
    module = cst.parse_module(text)
    spans = Spans(text, module, LineIndex(text))
    calls = [node for node in _nodes(module) if isinstance(node, cst.Call)]
    assert [spans.text_span(call) for call in calls] == [None, None]
    assert sorted(spans.span(call) for call in calls) == [(22, 30), (39, 47)]


def test_a_multi_line_call_is_found_by_its_text_at_its_blocks_indentation(monkeypatch):
    """A `DataLoader(...)` written over several lines inside a long training function: rendered at the
    indentation of its blocks, its one occurrence is where it is, with no statement rendered for
    positions."""
    text = LONG_FUNCTION + (
        "    if True:\n        loader = DataLoader(\n            data,\n            batch_size=8,\n        )\n"
    )
    module = cst.parse_module(text)
    spans = Spans(text, module, LineIndex(text))
    monkeypatch.setattr(Spans, "_locate", lambda self, index: pytest.fail("rendered the statement"))
    (call,) = [
        node
        for node in _nodes(module)
        if isinstance(node, cst.Call) and module.code_for_node(node.func) == "DataLoader"
    ]
    start = text.index("DataLoader(")
    assert spans.span(call) == (start, text.index(")\n", start) + 1)
    assert spans.indentation(call) == "        "


def test_the_same_call_written_at_two_depths_is_told_apart_by_its_indentation():
    text = LAYOUTS["the same call at two depths"]
    module = cst.parse_module(text)
    spans = Spans(text, module, LineIndex(text))
    calls = [node for node in _nodes(module) if isinstance(node, cst.Call)]
    inner = text.index("DataLoader")
    outer = text.index("DataLoader", inner + 1)
    assert sorted(spans.text_span(call) for call in calls) == [
        (inner, text.index("=1)", inner) + 3),
        (outer, text.index("=1)", outer) + 3),
    ]
