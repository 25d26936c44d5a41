"""Which of two nodes comes first in the text, and which holds which, without positions.

A question such as "which assignments of `model` reach this use?" only needs the order of a few nodes of
one function. Offsets answer it, but an offset costs LibCST's PositionProvider over the statement that
holds the node, which renders the statement: about 80 ms for a long training function, paid for every
other module a cross-file question reaches (a fifth of a check of yolov5's `models/common.py`).
The ranks of a pre-order walk through the children in the order of the text give the same answers: a
node that starts earlier is visited earlier, and the nodes a node holds are the ranks up to its last
descendant's, so `TextOrder.span` stands in for `SourceModule.span` where only order matters. (A def or
a class holds its decorators, where its offsets start at `def`, after them.)

LibCST declares most fields in the order of the text; the few node types that do not (a def's
`decorators` after its `body`, a conditional expression's `test` before its `body`) are listed in
`_TEXT_FIELDS`. tests/test_facts_order.py checks the walk against LibCST's own `children`, which are in the
order of the text, and the answers against offsets.
"""

from __future__ import annotations

from torchlint._lazy import cst
from torchlint.facts.syntax.collect import _fields_of
from torchlint.facts.syntax.walk import nodes_in

# The child fields, in the order of the text, of the node types whose dataclass fields are in another.
_TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "FunctionDef": ("decorators", "name", "type_parameters", "params", "returns", "body"),
    "ClassDef": ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    "IfExp": ("body", "test", "orelse"),
    "ExceptHandler": ("type", "name", "body"),
    "ExceptStarHandler": ("type", "name", "body"),
    "Arg": ("keyword", "value"),
    "MatchCase": ("pattern", "guard", "body"),
    "ImportFrom": ("relative", "module", "names"),
    "TypeAlias": ("name", "type_parameters", "value"),
}


# Nodes whose text starts with the text of one child: that child's field, and 0 where it is the first item
# of a sequence field. LibCST's offsets of a parenthesised node leave its own parentheses out, so the node
# holding it starts at its `(`, before it.
_STARTS_WITH: dict[str, tuple[str, int | None]] = {
    "Call": ("func", None),
    "Attribute": ("value", None),
    "Subscript": ("value", None),
    "SubscriptElement": ("slice", None),
    "Index": ("value", None),
    "Slice": ("lower", None),
    "BinaryOperation": ("left", None),
    "BooleanOperation": ("left", None),
    "Comparison": ("left", None),
    "ConcatenatedString": ("left", None),
    "IfExp": ("body", None),
    "NamedExpr": ("target", None),
    "GeneratorExp": ("elt", None),
    "Tuple": ("elements", 0),
    "Element": ("value", None),
    "DictElement": ("key", None),
    "WithItem": ("item", None),
    "ImportAlias": ("name", None),
    "Expr": ("value", None),
    "Assign": ("targets", 0),
    "AssignTarget": ("target", None),
    "AugAssign": ("target", None),
    "AnnAssign": ("target", None),
    "SimpleStatementLine": ("body", 0),
}


def _first_child_at_start(node: cst.CSTNode) -> cst.CSTNode | None:
    """The child whose text starts where `node`'s does (None: a token of its own comes first)."""
    name = type(node).__name__
    if name in ("Arg", "Param"):  # `key=value`, `*args`: the keyword or the star comes first
        if isinstance(node.star, str) and node.star:  # type: ignore[attr-defined]
            return None
        return getattr(node, "keyword", None) or getattr(node, "name", None) or getattr(node, "value", None)
    rule = _STARTS_WITH.get(name)
    if rule is None:
        return None
    field, index = rule
    value = getattr(node, field)
    if index is not None:
        value = value[index] if len(value) > index else None
    return value if isinstance(value, cst.CSTNode) else None


# Tokens some node types keep as nodes of their own: brackets, colons, commas (nothing is written in them).
_PUNCTUATION = frozenset(
    {
        "AssignEqual",
        "Asynchronous",
        "Colon",
        "Comma",
        "Dot",
        "LeftCurlyBrace",
        "LeftParen",
        "LeftSquareBracket",
        "RightCurlyBrace",
        "RightParen",
        "RightSquareBracket",
        "Semicolon",
    }
)


def children_in_text_order(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes `node` holds in its fields (whitespace and punctuation skipped), in the order of the text."""
    return [child for child in nodes_in(node, _text_fields(type(node))) if not _is_punctuation(type(child))]


_FIELDS_IN_TEXT_ORDER: dict[type, tuple[str, ...]] = {}
_IS_PUNCTUATION: dict[type, bool] = {}


def _text_fields(kind: type) -> tuple[str, ...]:
    """A node type's child fields in the order of the text, decided once per type (a walk asks per node)."""
    found = _FIELDS_IN_TEXT_ORDER.get(kind)
    if found is None:
        found = _FIELDS_IN_TEXT_ORDER[kind] = _TEXT_FIELDS.get(kind.__name__) or _fields_of(kind)
    return found


def _is_punctuation(kind: type) -> bool:
    found = _IS_PUNCTUATION.get(kind)
    if found is None:
        found = _IS_PUNCTUATION[kind] = kind.__name__ in _PUNCTUATION
    return found


class TextOrder:
    """The nodes of one subtree (a function, a class, a module), ranked in the order of the text."""

    def __init__(self, root: cst.CSTNode, ranked: dict[int, TextOrder] | None = None) -> None:
        # id(node) -> its rank (nodes are kept alive by the tree), and rank -> the rank of its last
        # descendant: kept apart, a module's hundred thousand nodes cost no pair each. A subtree `ranked`
        # already (by the id of its root: a function asked about before its module) is not walked again:
        # its ranks are shifted into these (a tenth of the walk's time).
        self._ranks: dict[int, int] = {}
        self._last: list[int] = []
        ranks, last = self._ranks, self._last  # the loop below runs once per node of a module: locals
        stack: list[tuple[cst.CSTNode, int]] = [(root, -1)]
        while stack:
            node, rank = stack.pop()
            if rank >= 0:  # every node below it is ranked
                last[rank] = len(last) - 1
                continue
            known = ranked.get(id(node)) if ranked and node is not root else None
            if type(known) is TextOrder and known._root is node:
                offset = len(last)
                ranks.update((key, value + offset) for key, value in known._ranks.items())
                last.extend(value + offset for value in known._last)
                continue
            rank = ranks[id(node)] = len(last)
            last.append(rank)
            stack.append((node, rank))
            children = children_in_text_order(node)
            if children:
                children.reverse()
                stack += [(child, -1) for child in children]
        self._root = root

    def knows(self, *nodes: cst.CSTNode) -> bool:
        """Every one of `nodes` is in the subtree."""
        return all(id(node) in self._ranks for node in nodes)

    def within(self, root: cst.CSTNode) -> TextOrder:
        """The order of the subtree of `root` (a node of this one), read from this one's ranks: ranking a
        function again costs a walk of it, which its module's order has made."""
        return _Within(self, root)

    def start(self, node: cst.CSTNode) -> float:
        """Where `node`'s text starts, as a rank: equal for nodes whose text starts at one place (a call and
        the call its method chain starts with, `scaler.scale(loss).backward()`), else ordered as offsets
        are. A node that starts with its first child (a call with its callee, an attribute with its value,
        an operation with its left operand) starts where that child does; where that child is
        parenthesised, at its `(`, just before the child's own text (LibCST's offsets of a node leave its
        own parentheses out)."""
        while True:
            inner = _first_child_at_start(node)
            if inner is None:
                return self._ranks[id(node)]
            if isinstance(inner, cst.BaseExpression) and inner.lpar:
                return self._ranks[id(inner)] - 0.5  # at the `(` before it, after whatever precedes it
            node = inner

    def holds(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        """`inner` is `outer` or inside it (`walk.contains` without walking)."""
        first = self._ranks[id(outer)]
        return first <= self._ranks[id(inner)] <= self._last[first]

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Where `node` is among the subtree's nodes, as offsets would say it: its rank, and one past its last
        descendant's. Compared as offsets are, for nodes of which neither starts the other's text (a
        statement and a name in it, two statements): an earlier start, a later end, containment."""
        first = self._ranks[id(node)]
        return first, self._last[first] + 1


class _Within(TextOrder):
    """A subtree's order that shares its module's ranks: the same answers as its own `TextOrder` (ranks
    compare as offsets do in both); `knows` only the subtree's nodes."""

    def __init__(self, whole: TextOrder, root: cst.CSTNode) -> None:  # no walk of its own
        self._ranks, self._last = whole._ranks, whole._last
        self._first = self._ranks[id(root)]
        self._end = self._last[self._first]

    def knows(self, *nodes: cst.CSTNode) -> bool:
        ranks, first, end = self._ranks, self._first, self._end
        return all(first <= ranks.get(id(node), -1) <= end for node in nodes)
