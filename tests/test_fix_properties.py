"""Property test: generated programs with trigger snippets spliced in never make checking or fixing crash.

hypothesmith generates syntactically valid, often bizarre, Python; on its own it never contains a
`torch.cuda.amp` use, so a trigger snippet (uses TL303/TL304 fix) is spliced in before, after, or before
and after it, at module level or indented into an `if True:` block, with or without a final newline. For
each program: checking does not crash, fixing does not
crash, the fixed text compiles (the fixer would refuse otherwise, which fails the test as well), the number
of applied fixes is exactly the number of trigger uses (generated code cannot interfere: it cannot bind the
names the triggers use, see `_interferes`), and a second fix changes nothing.
"""

from __future__ import annotations

import ast
import warnings

import hypothesmith
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support import settings as torchlint_settings

from torchlint.linter import Linter, _compiles

# (snippet, number of fixable uses): each is complete code that the rules fix wherever it lands.
TRIGGERS = [
    (
        "import torch\n\n\ndef _trained(model, batch):\n"
        "    with torch.cuda.amp.autocast(enabled=True):\n        return model(batch)\n",
        1,
    ),
    ("import torch\n_scaler = torch.cuda.amp.GradScaler()\n", 1),
    (
        "from torch.cuda.amp import autocast, GradScaler\n\n\n"
        "def _step(model, batch):\n    s = GradScaler(2.0**14, enabled=False)\n"
        "    with autocast(True, None):\n        return s, model(batch)\n",
        2,
    ),
    (
        "import torch as T\n\n\nclass _F(T.autograd.Function):\n"
        "    @staticmethod\n    @T.cuda.amp.custom_fwd(cast_inputs=T.float32)\n"
        "    def forward(ctx, x):\n        return x\n\n"
        "    @staticmethod\n    @T.cuda.amp.custom_bwd\n    def backward(ctx, g):\n        return g\n",
        2,
    ),
    ("import torch.cuda.amp as amp\nwith amp.autocast(): _s: amp.GradScaler = amp.GradScaler()\n", 3),
    # The import is the only statement of its block: removing it would leave `try:` empty.
    (
        "try:\n    from torch.cuda.amp import GradScaler\nexcept ImportError:\n    pass\n_g = GradScaler()\n",
        1,
    ),
]
NAMES_THE_TRIGGERS_USE = {
    *("torch", "T", "amp", "autocast", "GradScaler"),
    *("_trained", "_scaler", "_step", "_F", "_s", "_g"),
}

_linter = Linter()
_settings = torchlint_settings(select=("TL001", "TL303", "TL304"))


def _interferes(generated: str) -> bool:
    """Whether generated code could change what the triggers' names mean (or hide them from the rules)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(generated)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal)):
            return True  # `from x import *`, or an import that may bind one of the names
        for attribute in ("id", "name", "arg", "rest"):  # names, defs, parameters, except/match targets
            if getattr(node, attribute, None) in NAMES_THE_TRIGGERS_USE:
                return True
    return "noqa" in generated  # a generated comment could suppress a finding


def _indent_into_block(snippet: str) -> str:
    """The trigger as the body of an `if True:` block (a different indentation and scope nesting)."""
    body = "".join(f"    {line}" if line.strip() else line for line in snippet.splitlines(keepends=True))
    return "if True:\n" + body


# Built once: `from_grammar()` compiles the grammar into a strategy, and calling it inside the composite
# strategy for every example made this test 100x slower.
GENERATED = hypothesmith.from_grammar()


@st.composite
def programs(draw):
    generated = draw(GENERATED)
    snippet, uses = draw(st.sampled_from(TRIGGERS))
    if draw(st.booleans()):
        snippet = _indent_into_block(snippet)
    where = draw(st.sampled_from(["after", "before", "both"]))
    if not generated.endswith("\n"):
        generated += "\n"
    if where == "after":
        program = generated + "\n" + snippet
    elif where == "before":
        program = snippet + "\n" + generated
    else:
        program, uses = snippet + "\n" + generated + "\n" + snippet, 2 * uses
    if draw(st.booleans()):
        program = program.rstrip("\n")  # no final newline (LibCST renders one anyway)
    return program, uses, generated


def _check_program(program: str, uses: int, generated: str, counts: list[tuple[int, int]]) -> None:
    assume(_compiles(program, "generated.py"))  # valid grammar need not compile (`return` outside def)
    found = _linter.check_text("generated.py", program, _settings)
    if any(d.code == "TL001" for d in found):
        counts.append((0, -1))
        return  # LibCST cannot parse what CPython can: reported as TL001, nothing to fix, no crash
    result = _linter.fix_text("generated.py", program, _settings, True)
    assert result.warnings == []
    assert _compiles(result.text, "generated.py")
    expected = -1 if _interferes(generated) else uses
    if expected >= 0:
        assert result.fixed == uses, result.text
        assert [d for d in result.diagnostics if d.fix is not None] == []
    again = _linter.fix_text("generated.py", result.text, _settings, True)
    assert (again.text, again.fixed) == (result.text, 0)
    counts.append((result.fixed, expected))


def test_fixing_generated_programs_with_triggers_never_crashes_and_always_compiles():
    counts: list[tuple[int, int]] = []  # (fixes applied, fixes expected or -1 when unknown), per example

    @settings(
        max_examples=80,
        deadline=None,
        derandomize=True,  # the same programs every run: the counts below must not flake
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
        database=None,
    )
    @given(programs())
    def check(case):
        program, uses, generated = case
        _check_program(program, uses, generated, counts)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # hypothesmith compiles what it generates
        check()
    # The property would be vacuous unless fixes were applied: count them.
    exact = [fixed for fixed, expected in counts if expected >= 0]
    assert len(exact) >= 30, counts
    assert sum(exact) >= 30, counts
    assert sum(fixed for fixed, _ in counts) >= sum(exact)
