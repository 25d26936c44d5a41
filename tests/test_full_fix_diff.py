"""The `full` format shows, under `help:`, the diff of each fix that `--fix` would apply (ruff's fix diff), and
marks exactly those findings `[*]`: the fix policy (applicability, `--unsafe-fixes`, `fixable` /
`unfixable`, trade-offs) decides both, per file's settings, in a fresh run as in a replayed one."""

from __future__ import annotations

import io
import textwrap

from click.testing import CliRunner
from support import check_replayed

from torchlint.cli import main
from torchlint.diagnostics import Applicability, Diagnostic, Edit, Fix, LineIndex, Severity
from torchlint.report.full import fix_diff, write_full

DEPRECATED = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
AUTOCAST = '`torch.cuda.amp.autocast` is deprecated since torch 2.4: use `torch.amp.autocast("cuda", ...)`'
IMPORTED = textwrap.dedent(
    """\
    import os
    from torch.cuda.amp import autocast


    def train(model, batch):
        x = os.getcwd()
        y = 1
        z = 2
        with autocast():
            return model(batch)
    """
)
COMPILE = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    def main():
        model = Net().cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
    """
)
TRADE_OFF = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x, mask):
            return x + self.mlp(x)


    class Transformer(nn.Module):
        def __init__(self, dim=64, depth=12):
            super().__init__()
            self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])

        def forward(self, x, mask=None):
            for blk in self.blocks:
                x = blk(x, mask)
            return x


    model = Transformer()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    """
)


def invoke(*args: str):
    return CliRunner().invoke(main, ["--no-cache", *args], catch_exceptions=False)


def test_a_safe_fix_shows_its_diff_numbered_by_the_fixed_lines(project):
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("train.py")
    assert result.exit_code == 1
    assert result.output == textwrap.dedent(
        f"""\
        train.py:3:6: TL303 [*] {AUTOCAST}
          |
        3 | with torch.cuda.amp.autocast():
          |      ^^^^^^^^^^^^^^^^^^^^^^^ TL303
          |
          = help: Replace with `torch.amp.autocast`
          |
        2 |
          - with torch.cuda.amp.autocast():
        3 + with torch.amp.autocast("cuda"):
        4 |     pass
          |

        Found 1 finding.
        [*] 1 fixable with the `--fix` option.
        """
    )


def test_the_import_a_fix_needs_is_a_hunk_of_its_own_when_far_from_the_edit(project):
    (project / "train.py").write_text(IMPORTED)
    result = invoke("train.py")
    assert result.output == textwrap.dedent(
        f"""\
        train.py:9:10: TL303 [*] {AUTOCAST}
          |
        9 |     with autocast():
          |          ^^^^^^^^ TL303
          |
          = help: Replace with `torch.amp.autocast`
           |
        1  | import os
           - from torch.cuda.amp import autocast
        2  + import torch
        3  |
        {"-" * 80}
        8  |     z = 2
           -     with autocast():
        9  +     with torch.amp.autocast("cuda"):
        10 |         return model(batch)
           |

        Found 1 finding.
        [*] 1 fixable with the `--fix` option.
        """
    )


def test_an_unsafe_fix_shows_no_marker_nor_diff_without_unsafe_fixes(project):
    (project / "train.py").write_text(COMPILE)
    result = invoke("--select", "TL101", "train.py")
    assert result.output == textwrap.dedent(
        """\
        train.py:6:13: TL101 `model` is trained (by `torch.optim.AdamW(...)`) but never compiled: `torch.compile` usually makes each training step faster on the GPU
          |
        6 |     model = Net().cuda()
          |             ^^^^^ TL101
          |
          = help (unsafe fix): Compile `model` in place

        Found 1 finding.
        No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).
        """
    )


def test_with_unsafe_fixes_an_unsafe_fix_shows_its_diff_and_ruffs_note(project):
    (project / "train.py").write_text(COMPILE)
    result = invoke("--select", "TL101", "--unsafe-fixes", "train.py")
    assert result.output == textwrap.dedent(
        """\
        train.py:6:13: TL101 [*] `model` is trained (by `torch.optim.AdamW(...)`) but never compiled: `torch.compile` usually makes each training step faster on the GPU
          |
        6 |     model = Net().cuda()
          |             ^^^^^ TL101
          |
          = help (unsafe fix): Compile `model` in place
          |
        6 |     model = Net().cuda()
        7 +     model.compile()
        8 |     optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
          |
          = note: This is an unsafe fix and may change runtime behavior

        Found 1 finding.
        [*] 1 fixable with the `--fix` option.
        """
    )


def test_an_unfixable_rule_gets_no_marker_and_no_diff_from_the_command_line_or_the_config(project):
    (project / "train.py").write_text(DEPRECATED)
    by_option = invoke("--unfixable", "TL303", "train.py").output
    with (project / "pyproject.toml").open("a") as config:
        config.write("\n[tool.torchlint]\nunfixable = ['TL303']\n")
    by_config = invoke("train.py").output
    expected_head = f"train.py:3:6: TL303 {AUTOCAST}\n"
    for output in (by_option, by_config):
        assert output.startswith(expected_head)
        assert output.endswith("  = help: Replace with `torch.amp.autocast`\n\nFound 1 finding.\n")


def test_the_policy_is_each_files_own(project):
    """A sub-project that makes TL303 unfixable: its finding has no diff, the root's has one."""
    (project / "train.py").write_text(DEPRECATED)
    (project / "legacy").mkdir()
    (project / "legacy" / "pyproject.toml").write_text("[tool.torchlint]\nunfixable = ['TL303']\n")
    (project / "legacy" / "old.py").write_text(DEPRECATED)
    output = invoke(".").output
    assert f"legacy/old.py:3:6: TL303 {AUTOCAST}\n" in output
    assert f"train.py:3:6: TL303 [*] {AUTOCAST}\n" in output
    assert output.count('+ with torch.amp.autocast("cuda"):') == 1


def test_a_trade_off_fix_is_shown_only_with_its_rule_selected_by_its_code(project):
    (project / "model.py").write_text(TRADE_OFF)
    blanket = invoke("--unsafe-fixes", "model.py").output
    assert "TL401 (info)" in blanket
    assert "[*]" not in blanket and "checkpoint(blk" not in blanket
    chosen = invoke("--unsafe-fixes", "--select", "TL401", "model.py").output
    assert "TL401 [*] (info)" in chosen
    assert "".join(chosen.splitlines(keepends=True)[6:20]) == textwrap.dedent(
        f"""\
           |
        2  | from torch import nn
        3  + from torch.utils.checkpoint import checkpoint
        4  |
        {"-" * 80}
        21 |         for blk in self.blocks:
           -             x = blk(x, mask)
        22 +             if self.training and torch.is_grad_enabled():
        23 +                 x = checkpoint(blk, x, mask, use_reentrant=False)
        24 +             else:
        25 +                 x = blk(x, mask)
        26 |         return x
           |
           = note: This is an unsafe fix and may change runtime behavior
        """
    )


def test_a_replayed_run_shows_the_same_markers_and_diffs(project):
    (project / "train.py").write_text(DEPRECATED)
    (project / "model.py").write_text(COMPILE)
    first = check_replayed("--unsafe-fixes", "--unfixable", "TL301", ".")
    again = check_replayed("--unsafe-fixes", "--unfixable", "TL301", ".")
    assert again[2], "the second run is replayed"
    assert first[:2] == again[:2]
    assert "TL101 [*]" in again[1] and "+     model.compile()" in again[1]
    assert "TL301 `model(...)`" in again[1]


def test_diff_lines_show_control_characters_escaped(project):
    (project / "train.py").write_text(
        "import torch\n\nwith torch.cuda.amp.autocast():  # \x1b[2K\n    pass\n", encoding="utf-8"
    )
    output = invoke("train.py").output
    assert "\x1b" not in output
    assert '3 + with torch.amp.autocast("cuda"):  # \\x1b[2K\n' in output


def test_colour_paints_added_lines_green_and_removed_lines_red(project):
    (project / "train.py").write_text(DEPRECATED)
    output = invoke("--color", "always", "train.py").output
    assert "\x1b[1;31m-\x1b[0m \x1b[31mwith torch.cuda.amp.autocast():\x1b[0m\n" in output
    assert '\x1b[1;32m+\x1b[0m \x1b[32mwith torch.amp.autocast("cuda"):\x1b[0m\n' in output


def test_other_formats_show_no_diff(project):
    (project / "train.py").write_text(DEPRECATED)
    for name in ("concise", "grouped"):
        assert "+ with" not in invoke("--output-format", name, "train.py").output


# -- the reporter alone -------------------------------------------------------------------------------------


def _finding(text: str, fix: Fix, severity: Severity = Severity.WARNING) -> Diagnostic:
    diagnostic = Diagnostic("TL303", "name", "message", severity, "a.py", 0, 1, fix)
    return LineIndex(text).locate(diagnostic)


def _full(diagnostic: Diagnostic, text: str, **options) -> str:
    out = io.StringIO()
    write_full([diagnostic], {"a.py": LineIndex(text)}, out, **options)
    return out.getvalue()


def test_without_the_runs_policy_only_safe_fixes_of_defects_are_marked_and_shown():
    text = "a = 1\n"
    safe = Fix("Rename", Applicability.SAFE, (Edit(0, 1, "b"),))
    unsafe = Fix("Rename", Applicability.UNSAFE, (Edit(0, 1, "b"),))
    suggestion = Fix("Rename", Applicability.DISPLAY_ONLY, (Edit(0, 1, "b"),))
    assert "[*]" in _full(_finding(text, safe), text)
    assert "1 + b = 1" in _full(_finding(text, safe), text)
    for fix, severity in ((unsafe, Severity.WARNING), (suggestion, Severity.WARNING), (safe, Severity.INFO)):
        shown = _full(_finding(text, fix, severity), text)
        assert "[*]" not in shown and "b = 1" not in shown
    assert "1 + b = 1" in _full(_finding(text, unsafe), text, applies=lambda d: True)


def test_hunks_with_at_most_two_hidden_lines_between_them_are_shown_as_one():
    """Each change keeps one unchanged line around it; what is left between two hunks is shown when it is
    at most two lines (ruff's merge window), else a row of dashes separates them."""
    text = "".join(f"line{n}\n" for n in range(1, 13))
    lines = LineIndex(text)

    def edits_on(*numbers: int) -> Fix:
        edits = tuple(Edit(lines.line_starts[n - 1], lines.line_starts[n - 1] + 4, "LINE") for n in numbers)
        return Fix("Shout", Applicability.SAFE, edits)

    assert fix_diff(edits_on(2, 7), lines) == textwrap.dedent(
        """\
          |
        1 | line1
          - line2
        2 + LINE2
        3 | line3
        4 | line4
        5 | line5
        6 | line6
          - line7
        7 + LINE7
        8 | line8
          |
        """
    )
    assert fix_diff(edits_on(2, 8), lines) == textwrap.dedent(
        f"""\
          |
        1 | line1
          - line2
        2 + LINE2
        3 | line3
        {"-" * 80}
        7 | line7
          - line8
        8 + LINE8
        9 | line9
          |
        """
    )


def test_a_removed_line_and_an_empty_line_have_no_text_after_their_sign():
    text = "import os\n\nx = 1\n"
    removal = Fix("Remove", Applicability.SAFE, (Edit(0, len("import os\n"), ""),))
    assert fix_diff(removal, LineIndex(text)) == "  |\n  - import os\n1 |\n  |\n"
    blanked = Fix("Blank", Applicability.SAFE, (Edit(0, len("import os"), ""),))
    assert fix_diff(blanked, LineIndex(text)) == "  |\n  - import os\n1 +\n2 |\n  |\n"


def test_a_fix_that_changes_nothing_shows_no_diff():
    text = "a = 1\n"
    same = Fix("Keep", Applicability.SAFE, (Edit(0, 1, "a"),))
    assert fix_diff(same, LineIndex(text)) == ""
