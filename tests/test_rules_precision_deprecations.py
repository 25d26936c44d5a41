"""TL303/TL304 beyond what a rule doc can show: every import form, both rules in one file, exact spans and
messages, the torch-version setting.

The single-rule cases (lookalikes, shadowing, arguments that keep their meaning, imports that go) are blocks of
rules/TL303.md and rules/TL304.md, checked by test_rule_docs.py.
"""

from __future__ import annotations

import pytest
from support import codes_and_lines, fix, lint, said


def fixed(source: str, **kwargs) -> str:
    return fix(source, **kwargs)


@pytest.mark.parametrize(
    "imports, use",
    [
        ("import torch", "torch.cuda.amp.autocast()"),
        ("import torch as T", "T.cuda.amp.autocast()"),
        ("import torch.cuda.amp", "torch.cuda.amp.autocast()"),
        ("import torch.cuda.amp as amp", "amp.autocast()"),
        ("from torch.cuda import amp", "amp.autocast()"),
        ("from torch import cuda", "cuda.amp.autocast()"),
        ("from torch.cuda.amp import autocast", "autocast()"),
        ("from torch.cuda.amp import autocast as ac", "ac()"),
        ("from torch.cuda.amp.autocast_mode import autocast", "autocast()"),
    ],
)
def test_autocast_is_found_however_it_was_imported(imports, use):
    source = f"{imports}\n\nwith {use}:\n    pass\n"
    assert codes_and_lines(source) == [("TL303", 3)]


def test_finding_is_on_each_use_never_on_the_import():
    source = """\
    from torch.cuda.amp import autocast, GradScaler

    scaler = GradScaler()
    with autocast():
        pass
    with autocast(enabled=False):
        pass
    """
    assert codes_and_lines(source) == [("TL304", 3), ("TL303", 4), ("TL303", 6)]


def test_finding_spans_the_callee_and_starts_where_the_call_starts():
    [d] = lint("import torch\nscaler = torch.cuda.amp.GradScaler(\n    enabled=True,\n)\n")
    assert (d.location.line, d.location.column) == (2, 10)
    assert (d.end_location.line, d.end_location.column) == (2, 35)
    assert said(d) == (
        '`torch.cuda.amp.GradScaler` is deprecated since torch 2.4: use `torch.amp.GradScaler("cuda", ...)`'
    )


def test_imports_inside_functions_and_guarded_imports_are_resolved():
    source = """\
    try:
        from torch.cuda.amp import GradScaler
    except ImportError:
        GradScaler = None

    def main():
        from torch.cuda.amp import autocast
        with autocast():
            return GradScaler()
    """
    assert codes_and_lines(source) == [("TL303", 8), ("TL304", 9)]


def test_autocast_with_star_args_is_reported_without_a_fix():
    [d] = lint("import torch\nwith torch.cuda.amp.autocast(*flags):\n    pass\n")
    assert d.fix is None
    assert "`*args` cannot be mapped" in said(d)


def test_cpu_variants_get_the_cpu_device():
    source = "import torch\ns = torch.cpu.amp.GradScaler()\nwith torch.cpu.amp.autocast():\n    pass\n"
    assert fixed(source) == (
        'import torch\ns = torch.amp.GradScaler("cpu")\nwith torch.amp.autocast("cpu"):\n    pass\n'
    )


def test_both_names_of_one_import_line_go_together():
    source = """\
    import torch
    from torch.cuda.amp import (
        autocast,
        GradScaler,
    )
    s = GradScaler()
    with autocast():
        pass
    """
    assert (
        fixed(source)
        == 'import torch\ns = torch.amp.GradScaler("cuda")\nwith torch.amp.autocast("cuda"):\n    pass\n'
    )


def test_an_unfixable_use_keeps_the_import():
    source = "import torch\nfrom torch.cuda.amp import autocast\nctx = autocast\nwith autocast():\n    pass\n"
    assert fixed(source) == (
        'import torch\nfrom torch.cuda.amp import autocast\nctx = autocast\nwith torch.amp.autocast("cuda"):\n    pass\n'
    )
    [bare, _] = lint(source)
    assert bare.fix is None and "referenced, not called" in said(bare)


def test_torch_version_setting_silences_rules_whose_replacement_is_newer():
    source = "import torch\ns = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    pass\n"
    assert codes_and_lines(source, torch_version=(2, 2)) == [("TL303", 3)]
    assert codes_and_lines(source, torch_version=(2, 3)) == [("TL304", 2), ("TL303", 3)]
    assert codes_and_lines(source, torch_version=(1, 13)) == []


def test_a_second_fix_run_changes_nothing():
    source = (
        "from torch.cuda.amp import autocast, GradScaler\ns = GradScaler()\nwith autocast(True):\n    pass\n"
    )
    once = fixed(source)
    assert (
        once
        == 'import torch\ns = torch.amp.GradScaler("cuda")\nwith torch.amp.autocast("cuda", enabled=True):\n    pass\n'
    )
    assert fixed(once) == once


def test_the_fallback_for_torch_without_torch_amp_is_left_alone():
    """A library that supports old torch tries the new API first; rewriting its fallback into the call that
    just failed would break it there."""
    source = """\
    import torch

    try:
        scaler = torch.amp.GradScaler("cuda")
    except (AttributeError, TypeError):
        scaler = torch.cuda.amp.GradScaler()

    try:
        from torch.amp import autocast as new_autocast
    except ImportError:
        new_autocast = torch.cuda.amp.autocast

    try:
        ready = load()
    except ValueError:
        scaler = torch.cuda.amp.GradScaler()
    """
    assert codes_and_lines(source) == [("TL304", 16)]


def test_a_module_that_names_no_newer_api_anywhere_has_no_fallback_to_look_for(monkeypatch):
    """Whether a deprecated call is the fallback of a newer one is asked where the module names the newer
    API somewhere: elsewhere the answer is no without ranking every node of the module (20 ms of yolov5's
    `train.py`, in the editor's first look at each keystroke)."""
    from support import record_calls

    from torchlint.facts.syntax.order import TextOrder

    source = """\
    import torch

    if torch.cuda.is_available():
        scaler = torch.cuda.amp.GradScaler()
    else:
        scaler = None
    """
    ranked = record_calls(monkeypatch, TextOrder, "__init__", lambda order, root: type(root).__name__)
    assert codes_and_lines(source, select=("TL304",)) == [("TL304", 4)]
    assert ranked == []
