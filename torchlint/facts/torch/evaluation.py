"""Batches fetched inside a training loop that only evaluate: `next(val_loader)` under `with torch.no_grad():`
every N steps (x-transformers' scripts validate this way), whose loader then feeds no training step.

The batch is followed by name through the rest of the loop's body, the way Python runs it once: a name bound
from it (or from what is computed with it) is tainted; a statement that reads a tainted name and is not a
plain assignment (a call statement, `return`, `self.x = ...`) uses the batch — except a call statement
inside a block where gradients are off (`torch.no_grad()`, `torch.inference_mode()`,
`torch.set_grad_enabled(False)`), which can only log or collect what evaluation computed. A statement that
reads the batch and calls something that runs a backward pass or an optimizer step uses it too. Anything this
walk cannot follow (a header of a compound statement, a nested function) counts as a use: unknown is never
evidence that a loader is for evaluation only. A batch fetched where gradients are on (`x = next(val_it)`
before `with torch.no_grad():`) must be read under `no_grad` and not by the next iteration (a prefetch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.values import literal_of
from torchlint.facts.syntax.walk import child_nodes, contains

if TYPE_CHECKING:
    from torchlint.facts.syntax.collect import LoopRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.syntax.names import Scope

_NO_GRAD = {"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
_INFERENCE = {"torch.inference_mode", "torch.autograd.grad_mode.inference_mode"}
_SET_GRAD = {
    "torch.set_grad_enabled",
    "torch.autograd.set_grad_enabled",
    "torch.autograd.grad_mode.set_grad_enabled",
}

# (a block of statements, the position of the statement on the way to the batch, whether the block is the
# body of a grad-free `with`, whether it is the body of a loop inside the training loop)
Frame = tuple[Sequence[cst.CSTNode], int, bool, bool]
Trains = Callable[[cst.CSTNode], bool]  # does the code below this node run a backward pass or a step?


def only_evaluates(source: SourceModule, loop: LoopRecord, fetch: cst.Call, trains: Trains) -> bool:
    """The batch `fetch` (a `next(...)` inside `loop`) reaches only code that computes no gradients for
    training, up to the end of the loop's body."""
    body = loop.node.body
    if not isinstance(body, cst.IndentedBlock):
        return False
    frames = _path(source, loop.scope, body.body, fetch, trains)
    if frames is None:
        return False
    statements, index, _, _ = frames[-1]
    line = statements[index]
    if not isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return False  # in a compound statement's header (`for x in next(it):`)
    small = next((s for s in line.body if contains(s, fetch)), None)
    if small is None:
        return False
    fetched_free = any(frame[2] for frame in frames)
    tainted, used = _step(small, set(), fetched_free, trains, fetch)
    if used:
        return False
    fetched = set(tainted)
    walker = _Walker(source, loop.scope, trains)
    # Then what follows, block by block, out to the loop's body; a loop inside the training loop runs its
    # body again, so its statements before the fetch are walked once more.
    rest = line.body[line.body.index(small) + 1 :]
    tainted, used = walker.smalls(rest, tainted, fetched_free)
    for depth in range(len(frames) - 1, -1, -1):
        if used:
            return False
        statements, index, _, inner_loop = frames[depth]
        free = any(frame[2] for frame in frames[: depth + 1])
        tainted, used = walker.block(statements[index + 1 :], tainted, free)
        if not used and inner_loop:
            tainted, used = walker.block(statements, tainted, free)
    if used:
        return False
    if fetched_free:
        return True
    # Fetched where gradients are on: only evaluation if what reads it is under `no_grad`, and if the next
    # iteration does not read the names it was bound to (`x, y = next(it)` at the end of the body prefetches
    # the next step's batch).
    statements, index, _, _ = frames[0]
    _, used = walker.block(statements[: index + 1], fetched, False)
    return not used and walker.free_reads > 0


def _path(
    source: SourceModule, scope: Scope, statements: Sequence[cst.CSTNode], target: cst.Call, trains: Trains
) -> list[Frame] | None:
    """The statements on the way from `statements` down to the one holding `target`, as frames."""
    frames: list[Frame] = []
    block: Sequence[cst.CSTNode] = statements
    free = False
    inner_loop = False
    while True:
        index = next((i for i, statement in enumerate(block) if contains(statement, target)), None)
        if index is None:
            return None
        frames.append((block, index, free, inner_loop))
        statement = block[index]
        inner = next(
            ((part, kind) for part, kind in _blocks(statement) if any(contains(s, target) for s in part)),
            None,
        )
        if inner is None:
            return frames  # a simple statement, or the target is in a header
        block, kind = inner
        free = kind == "with" and grad_free(source, statement, scope) and not trains(statement)
        inner_loop = kind == "loop"


def _blocks(statement: cst.CSTNode) -> list[tuple[Sequence[cst.CSTNode], str]]:
    """The statement blocks of a compound statement, each with what runs it: "with" (always, once), "loop"
    (zero or more times), "branch" (zero or one time)."""
    found: list[tuple[Sequence[cst.CSTNode], str]] = []

    def add(suite: cst.CSTNode | None, kind: str) -> None:
        if isinstance(suite, cst.IndentedBlock):
            found.append((suite.body, kind))
        elif isinstance(suite, cst.SimpleStatementSuite):
            found.append(([suite], kind))
        elif isinstance(suite, (cst.Else, cst.Finally)):
            add(suite.body, kind)
        elif isinstance(suite, cst.If):  # elif
            found.append(([suite], kind))

    if isinstance(statement, cst.With):
        add(statement.body, "with")
    elif isinstance(statement, (cst.For, cst.While)):
        add(statement.body, "loop")
        add(statement.orelse, "branch")
    elif isinstance(statement, cst.If):
        add(statement.body, "branch")
        add(statement.orelse, "branch")
    elif isinstance(statement, cst.Try):
        add(statement.body, "branch")
        for handler in statement.handlers:
            add(handler.body, "branch")
        add(statement.orelse, "branch")
        add(statement.finalbody, "branch")
    return found


def grad_free(source: SourceModule, statement: cst.CSTNode, scope: Scope) -> bool:
    """`with torch.no_grad():`, `torch.inference_mode()` (not `(False)`), `torch.set_grad_enabled(False)`."""
    if not isinstance(statement, cst.With):
        return False
    for item in statement.items:
        call = item.item
        if not isinstance(call, cst.Call):
            continue
        name = source.qualname(call.func, scope)
        first = call.args[0].value if call.args else None
        if name in _NO_GRAD and not call.args:
            return True
        if name in _INFERENCE and (first is None or literal_of(first) == (True, True)):
            return True
        if name in _SET_GRAD and first is not None and literal_of(first) == (True, False):
            return True
    return False


def _names_read(node: cst.CSTNode) -> set[str]:
    """The names an expression or statement reads (not attribute names, nor keyword names)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.add(current.value)
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        else:
            stack.extend(child_nodes(current))
    return found


def _targets(small: cst.CSTNode) -> tuple[set[str], bool]:
    """The names an assignment binds, and whether every target is a plain name (or a tuple of names)."""
    if isinstance(small, cst.Assign):
        targets = [t.target for t in small.targets]
    elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        targets = [small.target]
    else:
        return set(), False
    names: set[str] = set()
    todo = list(targets)
    while todo:
        target = todo.pop()
        if isinstance(target, cst.Name):
            names.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            todo += [e.value for e in target.elements]
        elif isinstance(target, cst.StarredElement):
            todo.append(target.value)
        else:
            return names, False
    return names, True


def _step(
    small: cst.CSTNode, tainted: set[str], free: bool, trains: Trains, fetch: cst.Call | None = None
) -> tuple[set[str], bool]:
    """One small statement: (the tainted names after it, whether it uses the batch)."""
    value = getattr(small, "value", None)
    reads = (
        _names_read(value) if isinstance(small, (cst.Assign, cst.AnnAssign)) and value else _names_read(small)
    )
    hit = bool(reads & tainted) or (fetch is not None and contains(small, fetch))
    if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        names, plain = _targets(small)
        if not hit:
            return tainted - names if not isinstance(small, cst.AugAssign) else tainted, False
        if not plain or trains(small):
            return tainted, True
        return tainted | names, False
    if not hit:
        return tainted, False
    if isinstance(small, cst.Expr) and free and not trains(small):
        return tainted, False  # logging what evaluation computed
    return tainted, True


class _Walker:
    def __init__(self, source: SourceModule, scope: Scope, trains: Trains) -> None:
        self.source = source
        self.scope = scope
        self.trains = trains
        self.free_reads = 0  # statements under `no_grad` that read the batch

    def smalls(self, smalls: Sequence[cst.CSTNode], tainted: set[str], free: bool) -> tuple[set[str], bool]:
        for small in smalls:
            if free and _names_read(small) & tainted:
                self.free_reads += 1
            tainted, used = _step(small, tainted, free, self.trains)
            if used:
                return tainted, True
        return tainted, False

    def block(
        self, statements: Sequence[cst.CSTNode], tainted: set[str], free: bool
    ) -> tuple[set[str], bool]:
        """Walk statements in order: (tainted names after them, whether one uses the batch)."""
        for statement in statements:
            if not tainted:
                return tainted, False
            if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                tainted, used = self.smalls(statement.body, tainted, free)
            else:
                tainted, used = self.compound(statement, tainted, free)
            if used:
                return tainted, True
        return tainted, False

    def compound(self, statement: cst.CSTNode, tainted: set[str], free: bool) -> tuple[set[str], bool]:
        blocks = _blocks(statement)
        if not blocks or isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return tainted, bool(_names_read(statement) & tainted)
        header = _header(statement)
        if any(_names_read(part) & tainted for part in header) and not free:
            return tainted, True
        if isinstance(statement, cst.For) and _names_read(statement.iter) & tainted:
            tainted = tainted | _names_read(statement.target)  # `for x in batch:` under no_grad
        if isinstance(statement, cst.With):
            inner_free = free or (
                grad_free(self.source, statement, self.scope) and not self.trains(statement)
            )
            return self.block(blocks[0][0], tainted, inner_free)
        after = set(tainted)
        for part, kind in blocks:
            found, used = self.block(part, set(tainted), free)
            if used:
                return tainted, True
            if kind == "loop":  # a second pass sees what the first bound
                found, used = self.block(part, tainted | found, free)
                if used:
                    return tainted, True
            after |= found  # a branch may not run: nothing it rebinds is untainted
        return after, False


def _header(statement: cst.CSTNode) -> list[cst.CSTNode]:
    if isinstance(statement, cst.If):
        return [statement.test]
    if isinstance(statement, cst.While):
        return [statement.test]
    if isinstance(statement, cst.For):
        return [statement.iter]
    if isinstance(statement, cst.With):
        return [item.item for item in statement.items]
    return []
