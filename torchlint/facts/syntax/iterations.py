"""What changes from one iteration of a loop to the next: the names the loop assigns, and whether an `if`
test inside it can change its value between iterations (`step % log_every == 0`, `i > 0`,
`ni - last_step >= accumulate`) or is fixed for the whole run (`args.verbose`, `rank == 0`). Pure syntax:
several families ask (which reads run every step; which backward passes skip the optimizer step).
"""

from __future__ import annotations

from torchlint._lazy import cst
from torchlint.facts.syntax.walk import descendants, statements

# A call in a test is taken as fixed for the run only when it names the process (`dist.get_rank()`,
# `is_main_process()`, `xm.is_master_ordinal()`); any other call may answer differently each time.
PROCESS_WORDS = ("rank", "main", "master")


def assigned_in(loop: cst.For | cst.While) -> set[str]:
    """The names and dotted attributes the loop binds: its targets, those of loops inside it, and what its
    body assigns (`x = ...`, `x += ...`, `self.step = ...`)."""
    found: set[str] = set()
    for statement in statements(loop):
        if isinstance(statement, cst.For):
            found.update(bound_names(statement.target))
        for targets, _ in assignments(statement):
            found.update(targets)
    return found


def assignments(line: cst.CSTNode) -> list[tuple[list[str], cst.BaseExpression]]:
    """(the names bound, the value) for each assignment of a statement line (`a, b = x`, `y += z`)."""
    if not isinstance(line, cst.SimpleStatementLine):
        return []
    found = []
    for small in line.body:
        if isinstance(small, cst.Assign):
            found.append(([n for target in small.targets for n in bound_names(target.target)], small.value))
        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)) and small.value is not None:
            found.append((bound_names(small.target), small.value))
    return found


def bound_names(target: cst.BaseExpression) -> list[str]:
    """The names an assignment target binds, a tuple or list of targets unpacked."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in bound_names(element.value)]
    name = dotted_name(target)
    return [name] if name else []


def mentioned_names(node: cst.CSTNode) -> set[str]:
    """The names and dotted attributes an expression mentions (`loss`, `self.loss`, and `self`)."""
    return {name for n in descendants(node) if (name := dotted_name(n)) is not None}


def varies(test: cst.BaseExpression, assigned: set[str]) -> bool:
    """The test may change between iterations: it takes a remainder, mentions a name the loop assigns, or
    calls something other than a question about the process."""
    for node in descendants(test):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
            return True
        if isinstance(node, cst.Call):
            callee = (dotted_name(node.func) or "").rpartition(".")[2].lower()
            if not any(word in callee for word in PROCESS_WORDS):
                return True
        if isinstance(node, (cst.Name, cst.Attribute)) and dotted_name(node) in assigned:
            return True
    return False


def dotted_name(node: cst.CSTNode) -> str | None:
    """`loss`, `self.loss`, `args.device` (None for anything else: a call, a subscript)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        inner = dotted_name(node.value)
        return f"{inner}.{node.attr.value}" if inner else None
    return None
