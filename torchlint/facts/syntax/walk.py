"""Walks of the syntax tree that the analyses share, through the fields that matter only.

LibCST's `node.children` rebuilds a node's child list on every call: walking a whole module with it costs
more than the analyses that ask. These walks go through statement containers (bodies, clauses, handlers) or,
for expressions, through the fields that can carry a value (calls, containers, comprehensions, operators).
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint._lazy import cst
from torchlint.facts.syntax.collect import _fields_of, is_node


def statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and the statements, blocks and clauses below it, in the order of the text. A one-line suite
    (`if x: y = 1`) is yielded but not entered: its statements do not stand on lines of their own."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        yield current
        if type(current) is cst.SimpleStatementLine or type(current) is cst.SimpleStatementSuite:
            continue
        inner: list[cst.CSTNode] = []
        for name in ("body", "handlers", "orelse", "finalbody", "cases"):
            part = getattr(current, name, None)
            if isinstance(part, (list, tuple)):
                inner.extend(p for p in part if is_node(p))
            elif is_node(part):
                inner.append(part)
        stack.extend(reversed(inner))


def simple_lines(node: cst.CSTNode) -> Iterator[cst.SimpleStatementLine]:
    """Every statement line below `node` (a line of small statements: assignments, expressions)."""
    return (found for found in statements(node) if isinstance(found, cst.SimpleStatementLine))


def subexpressions(expr: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`expr` and the expressions inside it that can carry parameters to an optimizer (calls, containers,
    comprehensions, operators), without LibCST's costly `children`. Dispatched on the node's exact type:
    see `collect.is_node`."""
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        yield node
        kind = type(node)
        if kind is cst.Call:
            stack.append(node.func)
            stack.extend(arg.value for arg in node.args)
        elif kind is cst.Attribute:
            stack.append(node.value)
        elif kind is cst.List or kind is cst.Tuple or kind is cst.Set or kind is cst.Dict:
            stack.extend(element.value for element in node.elements)
        elif kind is cst.ListComp or kind is cst.GeneratorExp or kind is cst.SetComp:
            stack.append(node.elt)
            stack.extend(_comprehension_iters(node.for_in))
        elif kind is cst.DictComp:
            stack.append(node.value)
            stack.extend(_comprehension_iters(node.for_in))
        elif kind is cst.BinaryOperation:
            stack.extend((node.left, node.right))
        elif kind is cst.Subscript:
            stack.append(node.value)
        elif kind is cst.IfExp:
            stack.extend((node.body, node.orelse))


def _comprehension_iters(for_in: cst.CompFor) -> list[cst.BaseExpression]:
    found = [for_in.iter]
    while for_in.inner_for_in is not None:
        for_in = for_in.inner_for_in
        found.append(for_in.iter)
    return found


def calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    """Every call inside `node`, through all of its children: for one small subtree (a `with` body, a
    statement), never for a whole module."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            yield current
        stack.extend(reversed(current.children))


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes `node` holds in its fields, whitespace and punctuation skipped (as collect.py walks)."""
    return nodes_in(node, _fields_of(type(node)))


def nodes_in(node: cst.CSTNode, fields: tuple[str, ...]) -> list[cst.CSTNode]:
    """The nodes `node` holds in the fields named `fields`, in that order (a sequence field item by item)."""
    found: list[cst.CSTNode] = []
    for name in fields:
        value = getattr(node, name, None)
        if is_node(value):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            found.extend(item for item in value if is_node(item))
    return found


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node inside it, through the fields that hold nodes (for one small expression or
    statement: a whole module is walked once, by collect.py)."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(child_nodes(current))


def contains(node: cst.CSTNode, target: cst.CSTNode) -> bool:
    """`target` (an expression, a statement or a clause) is `node` or inside it. Through the fields that
    hold nodes, which reach every expression and statement (tests/test_facts_walk.py checks it): asked
    whether a loop holds a `with`, LibCST's `children` built the child list of every node of the loop."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if current is target:
            return True
        stack.extend(child_nodes(current))
    return False
