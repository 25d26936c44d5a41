"""The order of the text without positions (`facts/syntax/order.py`): the walk visits children as LibCST's
own `children` list them (in the order of the text), and "comes first" and "holds" agree with offsets."""

from __future__ import annotations

import pytest
from support import FIXTURES

from torchlint._lazy import cst
from torchlint.facts.syntax.order import TextOrder, children_in_text_order
from torchlint.facts.syntax.spans import Spans
from torchlint.positions import LineIndex

# Every node type whose fields LibCST declares in another order than the text's, and the usual ones.
OUT_OF_FIELD_ORDER = """
from ..models import (Net as N, Head)

@register("a")
@torch.no_grad()
def f(x: int = 1, *args, key=None, **kwargs) -> int:
    y = x if key else -x
    try:
        z = g(y, scale=2, *args, **kwargs)
    except (ValueError, KeyError) as error:
        z = error
    finally:
        del y
    match z:
        case [first, *rest] if first > 0:
            return first
        case {"k": value}:
            return value
        case _:
            return lambda q=3: q + z
    return [i for i in range(x) if i if i > 1]


@dataclass
class C(Base, metaclass=Meta):
    field: int = 0
    other = {k: v for k, v in items}

    async def run(self):
        async with lock as held, other:
            async for item in stream:
                await item
        while held:
            yield f"{held!r:>{width}}"[1:2]
"""


def _children_in_text(node: cst.CSTNode) -> list[cst.CSTNode]:
    """LibCST's children (in the order of the text) that the walk's fields hold."""
    own = {id(child) for child in children_in_text_order(node)}
    return [child for child in node.children if id(child) in own]


def _every_node(module: cst.Module) -> list[cst.CSTNode]:
    found, todo = [], [module]
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(children_in_text_order(node))
    return found


def _texts() -> list[tuple[str, str]]:
    fixtures = [(p.relative_to(FIXTURES).as_posix(), p.read_text()) for p in sorted(FIXTURES.rglob("*.py"))]
    return [("out of field order", OUT_OF_FIELD_ORDER), *fixtures]


@pytest.mark.parametrize(("name", "text"), _texts(), ids=[name for name, _ in _texts()])
def test_children_come_in_the_order_of_the_text(name, text):
    for node in _every_node(cst.parse_module(text)):
        assert children_in_text_order(node) == _children_in_text(node), type(node).__name__


@pytest.mark.parametrize(("name", "text"), _texts(), ids=[name for name, _ in _texts()])
def test_rank_spans_compare_as_offsets_do(name, text):
    """Among the statements and names of the text (what the analyses order), for every pair of which
    neither starts the other's text: an earlier start, an end before a start, and containment agree."""
    module = cst.parse_module(text)
    spans = Spans(text, module, LineIndex(text))
    order = TextOrder(module)
    nodes = [
        n for n in _every_node(module) if isinstance(n, (cst.Name, cst.BaseStatement, cst.BaseSmallStatement))
    ]
    located = {id(node): _own_text(spans, node) for node in nodes}
    step = max(1, len(nodes) // 60)  # a sample of pairs: every node against every 60th
    for first in nodes:
        for second in nodes[::step]:
            (a_start, a_end), (b_start, _) = located[id(first)], located[id(second)]
            if first is second or a_start == b_start:
                continue  # one starts the other's text (`x` as a statement of its own): offsets tie
            (x_start, x_end), (y_start, _) = order.span(first), order.span(second)
            assert (x_start < y_start) == (a_start < b_start)
            assert (x_end <= y_start) == (a_end <= b_start)
            assert (x_start <= y_start < x_end) == (a_start <= b_start < a_end)


@pytest.mark.parametrize(("name", "text"), _texts(), ids=[name for name, _ in _texts()])
def test_starts_compare_as_offsets_do(name, text):
    """Every expression and statement (but a decorated def or class, which LibCST starts at `def`): equal
    starts where the offsets are equal, else the same order."""
    module = cst.parse_module(text)
    spans = Spans(text, module, LineIndex(text))
    order = TextOrder(module)
    nodes = [
        n
        for n in _every_node(module)
        if isinstance(n, (cst.BaseExpression, cst.BaseStatement, cst.BaseSmallStatement))
        and not getattr(n, "decorators", ())
    ]
    starts = {id(node): spans.span(node)[0] for node in nodes}
    step = max(1, len(nodes) // 80)
    for first in nodes:
        for second in nodes[::step]:
            offsets = starts[id(first)], starts[id(second)]
            ranks = order.start(first), order.start(second)
            assert (ranks[0] < ranks[1], ranks[0] == ranks[1]) == (
                offsets[0] < offsets[1],
                offsets[0] == offsets[1],
            ), (
                module.code_for_node(first),
                module.code_for_node(second),
            )


def _own_text(spans: Spans, node: cst.CSTNode) -> tuple[int, int]:
    """A node's offsets; a decorated def's or class's from its first decorator (LibCST's start at `def`)."""
    decorators = getattr(node, "decorators", ())
    return (spans.span(decorators[0])[0] if decorators else spans.span(node)[0]), spans.span(node)[1]


def test_a_subtree_knows_only_its_own_nodes():
    module = cst.parse_module("def f():\n    a = 1\n\nb = 2\n")
    function, assignment = module.body
    order = TextOrder(function)
    assert order.knows(function.body.body[0]) and not order.knows(assignment)


def test_a_subtree_read_from_its_module_s_order_answers_as_its_own():
    """`within`: a function's order taken from its module's ranks (no second walk) knows only the function's
    nodes and orders them as the function's own order does."""
    module = cst.parse_module(OUT_OF_FIELD_ORDER)
    function = next(node for node in module.body if isinstance(node, cst.FunctionDef))
    own, within = TextOrder(function), TextOrder(module).within(function)
    inside = list(_every_node(function))
    assert within.knows(*inside) and not within.knows(module.body[0]) and not within.knows(module.body[-1])
    for first in inside:
        for second in inside[::7]:
            assert (within.span(first) < within.span(second)) == (own.span(first) < own.span(second))
            assert within.holds(first, second) == own.holds(first, second)
            assert (within.start(first) < within.start(second)) == (own.start(first) < own.start(second))


def test_a_module_s_order_takes_the_ranks_of_a_function_ranked_before_it(monkeypatch):
    """A function asked about first (yolov5's `train()`, most of `train.py`), then its module: the module's
    walk shifts the function's ranks into its own instead of walking the function again, and ranks the
    same."""
    import torchlint.facts.syntax.order as order_module

    module = cst.parse_module(OUT_OF_FIELD_ORDER)
    function = next(node for node in module.body if isinstance(node, cst.FunctionDef))
    fresh = TextOrder(module)
    ranked = {id(function): TextOrder(function)}
    walked = []
    original = order_module.children_in_text_order
    monkeypatch.setattr(
        order_module, "children_in_text_order", lambda node: walked.append(node) or original(node)
    )
    spliced = TextOrder(module, ranked)
    assert (spliced._ranks, spliced._last) == (fresh._ranks, fresh._last)
    assert not [node for node in walked if any(node is inner for inner in _every_node(function))]
