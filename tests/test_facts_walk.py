"""The shared walks skip whitespace and punctuation fields for speed: they must still reach every
expression, statement and clause that LibCST's own `children` reaches, however the code is written."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchlint.facts.syntax.walk import child_nodes, contains

EVERY_CONSTRUCT = textwrap.dedent(
    """
    import os, sys as system
    from . import sibling
    from pkg.mod import (a, b as c)

    @decorator(arg=lambda x, *rest, key=1, **kw: x + 1)
    async def f(p: int = 1, /, q: "str" = f"{x!r:>{width}}", *, r: list[int] | None = None) -> dict:
        global g
        x: int = (y := 3) if cond else -z
        async with open(a) as (h, i), other():
            async for item in stream[1:2, ::3]:
                await item
        try:
            yield from gen(*args, **kwargs)
        except (ValueError, TypeError) as error:
            raise RuntimeError("x") from error
        else:
            del d[0], e.attr
        finally:
            assert not a < b <= c is not d in e, "message"
        match command:
            case [Point(x=0, y=y), *others] if y > 0:
                pass
            case {"key": value, **extra} | str() as s:
                return {k: v for k, v in extra.items() if v}
        print({*s, *t}, [n ** 2 for n in range(3)], (m for m in []), {q for q in "abc"})
        joined = "implicit" f"concat {x}" + b"bytes".decode()
        return x @ y

    class K(Base, metaclass=Meta):
        attribute: int
        def method(self):
            while True:
                self.x += 1; break
            else:
                continue
    """
)


def _everything(node: cst.CSTNode) -> list[cst.CSTNode]:
    found, todo = [], [node]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(current.children)
    return found


def _reached(node: cst.CSTNode) -> set[int]:
    found, todo = set(), [node]
    while todo:
        current = todo.pop()
        found.add(id(current))
        todo.extend(child_nodes(current))
    return found


WANTED = (cst.BaseExpression, cst.BaseStatement, cst.BaseSmallStatement, cst.BaseSuite, cst.Arg, cst.Param)


def test_the_fields_walk_reaches_every_expression_and_statement():
    module = cst.parse_module(EVERY_CONSTRUCT)
    reached = _reached(module)
    missed = [type(n).__name__ for n in _everything(module) if isinstance(n, WANTED) and id(n) not in reached]
    assert missed == []


def test_contains_answers_as_a_walk_of_every_child():
    module = cst.parse_module(EVERY_CONSTRUCT)
    nodes = [n for n in _everything(module) if isinstance(n, WANTED)]
    containers = [n for n in nodes if isinstance(n, (cst.BaseStatement, cst.BaseSuite, cst.Call))]
    for container in containers:
        inside = {id(n) for n in _everything(container)}
        for target in nodes:
            assert contains(container, target) == (id(target) in inside)
