"""Which classes of a module other modules' code can reach: from the module's facts and the other files'
exports.

TL401 asks which modules train a class of the checked one: answering builds every module that imports it,
up to three levels of importers, and follows what each trains (`CheckpointAnalysis.trained`). In a class
module such as yolov5's `models/common.py` that is 13 modules and most of a second of a one-file check, to
learn that no script trains its deep stacks: its network is built from a YAML file by `eval`, which no
analysis follows.

Another module's code can only make an instance of a class here by naming it (the way `_classes_built`
and `_parts` find the classes of a trained model): a call of the class, or of one of its classmethods, a
class statement deriving from it, or a call of one of this module's functions that builds it (by its name,
or by picking it from this module: `getattr(models, name)`, which names the module). From there, a class
here reaches the classes and functions of this module that its own code names. So a class that neither
another module's calls and bases nor this module's reachable code names cannot be part of a model that
another module trains, and the modules that import this one need not be built to say so. Only the files
whose text writes one of the names that lead to a stack have their exports read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint._lazy import cst
from torchlint.facts.syntax.names import dotted

if TYPE_CHECKING:
    from collections.abc import Iterable

    from torchlint.facts.syntax.collect import FunctionRecord
    from torchlint.facts.syntax.module import SourceModule
    from torchlint.facts.torch.exports import Export, ExportIndex

_MODULE = ""  # the module's own statements (and class bodies): run whenever it is imported
_REGISTRY = "register_model"  # timm's registry: a model is named by a string (`create_model(args.model)`)


def others_may_reach(source: SourceModule, targets: set[str]) -> bool:
    """Whether other modules' code may reach one of `targets` (classes defined in the module's body):
    True where exports cannot tell (a run that builds every file, a name `ast` reads otherwise, a file
    that names one without an export, or a module whose models are registered by name). Only the names
    from which this module's code reaches a target are looked for in other files, and only the files
    that write one are read."""
    project: ExportIndex | None = source.project  # type: ignore[assignment]
    file = source.file
    if project is None or file is None or _REGISTRY in source.text:
        return True
    classes, functions = _top_level(source)
    if not targets <= classes:
        return True
    names = _names_in(source, classes, functions)
    if targets & _closure(names, {_MODULE}):
        return True  # the module's own statements build one whenever it is imported
    leading = {name for name in classes | functions if targets & _closure(names, {name})}
    others = project.exports_naming(file, leading, file)
    if others is None or _named_by(project, others.values(), leading):
        return True
    if leading & functions:  # `getattr(models, name)(...)`: code naming this module may call its functions
        real = source.real_file
        naming_module = project.exports_naming(
            file, {real.stem if real.name != "__init__.py" else real.parent.name}, file
        )
        return naming_module is None or bool(naming_module)
    return False


def _top_level(source: SourceModule) -> tuple[set[str], set[str]]:
    """The names of the classes and functions defined directly in the module's body, each once (a name
    defined twice is left out: its scopes then count as the module's own)."""
    counts: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for statement in source.module.body:
        if isinstance(statement, (cst.ClassDef, cst.FunctionDef)):
            name = statement.name.value
            counts[name] = counts.get(name, 0) + 1
            kinds[name] = "class" if isinstance(statement, cst.ClassDef) else "function"
    once = {name for name, count in counts.items() if count == 1}
    return (
        {name for name in once if kinds[name] == "class"},
        {name for name in once if kinds[name] == "function"},
    )


def _named_by(project: ExportIndex, exports: Iterable[Export], top: set[str]) -> bool:
    """Whether these exports' calls or bases name one of `top`, also under a name an import gives it."""
    meaning = {alias for name in top for alias in project.names_for(name)}
    for export in exports:
        written = [symbol for scope in export.scopes for symbol in scope.symbols]
        written += [base for _, *bases in export.bases for base in bases]
        if any(part in meaning for symbol in written for part in symbol.split(".")):
            return True
    return False


def _names_in(source: SourceModule, classes: set[str], functions: set[str]) -> dict[str, set[str]]:
    """What the code of each class and function defined in the module's body names of them (its calls,
    what they are handed and, for a class, its bases), and what the module's own statements name
    (`_MODULE`, which also takes the code of anything defined deeper: a def in a def). Read from the
    module's facts, which the check has built: its export would be one more walk of the text at each
    keystroke in the editor."""
    top = classes | functions
    body = {id(statement) for statement in source.module.body}
    names: dict[str, set[str]] = {}
    for call in source.calls:
        written = [call.node.func, *(argument.value for argument in call.node.args)]
        parts = {part for node in written for part in (dotted(node) or "").split(".") if part in top}
        names.setdefault(_owner(call.function, body, top), set()).update(parts)
    for cls in source.classes:
        node = cls.name if id(cls.node) in body and cls.name in top else _MODULE
        bases = (dotted(base.value) or "" for base in cls.node.bases)
        names.setdefault(node, set()).update(
            part for base in bases for part in base.split(".") if part in top
        )
    return names


def _owner(function: FunctionRecord | None, body: set[int], top: set[str]) -> str:
    """The class or function defined in the module's body whose code holds a call of `function`."""
    if function is not None and function.owner is not None:
        owner = function.owner
        return owner.name if id(owner.node) in body and owner.name in top else _MODULE
    if function is not None and id(function.node) in body and function.name in top:
        return function.name
    return _MODULE


def _closure(names: dict[str, set[str]], start: set[str]) -> set[str]:
    """`start` and what the code of each name reached names, in turn."""
    reached = set(start)
    todo = list(start)
    while todo:
        for name in names.get(todo.pop(), ()):
            if name not in reached:
                reached.add(name)
                todo.append(name)
    return reached
