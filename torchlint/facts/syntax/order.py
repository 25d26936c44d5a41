"""Which of two nodes comes first in the text, and which holds which, without positions.

A question such as "which assignments of `model` reach this use?" only needs the order of a few nodes of
one function. Offsets answer it, but an offset costs LibCST's PositionProvider over the statement that
holds the node, which renders the statement: about 80 ms for a long training function, paid for every
other module a cross-file question reaches (most of a check of yolov5's `models/common.py` was spent so).
The order of a pre-order walk through the children in the order of the text gives the same answers: a
node that starts earlier is visited earlier, and the nodes a node holds are the ranks up to its last
descendant's. A def or a class holds its decorators (its offsets start at `def`, after them).

LibCST declares most fields in the order of the text; the few node types that do not (a def's
`decorators` after its `body`, a conditional expression's `test` before its `body`) are listed in
`_TEXT_FIELDS`. tests/test_facts_order.py checks the walk against LibCST's own `children`, which are in the
order of the text, and the answers against offsets.
"""

from __future__ import annotations

from torchlint._lazy import cst
from torchlint.facts.syntax.collect import _fields_of

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
    names = _TEXT_FIELDS.get(type(node).__name__) or _fields_of(type(node))
    found: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name, None)
        if isinstance(value, cst.CSTNode):
            if type(value).__name__ not in _PUNCTUATION:
                found.append(value)
        elif isinstance(value, (tuple, list)):
            found.extend(
                item
                for item in value
                if isinstance(item, cst.CSTNode) and type(item).__name__ not in _PUNCTUATION
            )
    return found


class TextOrder:
    """The nodes of one subtree (a function, a class, a module), ranked in the order of the text."""

    def __init__(self, root: cst.CSTNode) -> None:
        # id(node) -> (its rank, the rank of its last descendant); nodes are kept alive by the tree.
        self._ranks: dict[int, tuple[int, int]] = {}
        rank = 0
        stack: list[tuple[cst.CSTNode, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                self._ranks[id(node)] = (self._ranks[id(node)][0], rank - 1)
                continue
            self._ranks[id(node)] = (rank, rank)
            rank += 1
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(children_in_text_order(node)))

    def knows(self, *nodes: cst.CSTNode) -> bool:
        """Every one of `nodes` is in the subtree."""
        return all(id(node) in self._ranks for node in nodes)

    def before(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """`first` starts before `second` in the text (also when it holds `second`)."""
        return self._ranks[id(first)][0] < self._ranks[id(second)][0]

    def holds(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        """`inner` is `outer` or inside it."""
        start, end = self._ranks[id(outer)]
        return start <= self._ranks[id(inner)][0] <= end
