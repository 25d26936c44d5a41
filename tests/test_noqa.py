"""Suppression comments, as ruff reads them."""

from __future__ import annotations

import pytest
from support import codes_and_lines, fix, lint

from torchlint.noqa import add_noqa

USES = """\
import torch
s = torch.cuda.amp.GradScaler(){first}
with torch.cuda.amp.autocast():{second}
    pass
"""


def uses(first: str = "", second: str = "", header: str = "") -> list[tuple[str, int]]:
    """What suppression leaves of the two findings (TL003, which judges the comments, is tested below)."""
    return codes_and_lines(header + USES.format(first=first, second=second), ignore=("TL003",))


def test_bare_noqa_suppresses_everything_on_its_line():
    assert uses(first="  # noqa") == [("TL303", 3)]


def test_noqa_with_codes_suppresses_only_those():
    assert uses(first="  # noqa: TL303", second="  # noqa: TL303") == [("TL304", 2)]
    assert uses(first="  # noqa: E501, TL304") == [("TL303", 3)]
    assert uses(first="  # NOQA:TL304") == [("TL303", 3)]


def test_noqa_goes_on_the_first_line_of_a_multiline_call():
    source = "import torch\ns = torch.cuda.amp.GradScaler(  # noqa: TL304\n    enabled=True,\n)\n"
    assert codes_and_lines(source) == []
    source = "import torch\ns = torch.cuda.amp.GradScaler(\n    enabled=True,  # noqa: TL304\n)\n"
    assert codes_and_lines(source) == [("TL304", 2), ("TL003", 3)]  # and TL003 says it missed


def test_noqa_inside_a_string_does_not_count():
    assert uses(first='; note = "# noqa"') == [("TL304", 2), ("TL303", 3)]


def test_file_level_suppression():
    assert uses(header="# torchlint: noqa\n") == []
    assert uses(header="# torchlint: noqa: TL304\n") == [("TL303", 4)]
    assert uses(header="# torchlint: noqa: TL3\n") == []


def test_file_level_comment_must_be_on_its_own_line():
    assert uses(first="  # torchlint: noqa") == [("TL304", 2), ("TL303", 3)]


# -- TL003 unused-noqa ---------------------------------------------------------------------------------------

SCALER = "import torch\ns = torch.cuda.amp.GradScaler()"


def tl003(source: str, **changes) -> list[tuple[int, int, str]]:
    return [
        (d.location.line, d.location.column, d.message) for d in lint(source, **changes) if d.code == "TL003"
    ]


def test_a_used_noqa_is_not_reported():
    assert tl003(SCALER + "  # noqa: TL304\n") == []
    assert tl003(SCALER + "  # noqa: TL3\n") == []  # a prefix that suppressed something


def test_unused_non_enabled_and_unknown_codes_are_reported_once_per_directive():
    source = SCALER + "  # noqa: TL304, TL303, TL201, TL999\n"
    assert tl003(source, ignore=("TL201",)) == [
        (2, 34, "Unused `noqa` directive (unused: `TL303`; non-enabled: `TL201`; unknown: `TL999`)")
    ]


def test_other_tools_codes_bare_noqa_file_level_and_tl003_itself_are_never_reported():
    assert tl003("import os  # noqa: F401, E501\nimport re  # noqa\nimport sys  # noqa: TL003\n") == []
    assert tl003("# torchlint: noqa: TL304\nimport os\n") == []


def test_a_noqa_inside_a_string_is_not_a_directive():
    assert tl003('note = "# noqa: TL304"\n') == []


def test_tl003_can_be_ignored_and_suppressed_like_any_rule():
    assert tl003("x = 1  # noqa: TL304\n", ignore=("TL003",)) == []
    assert tl003("# torchlint: noqa: TL003\nx = 1  # noqa: TL304\n") == []


def test_a_file_with_a_syntax_error_reports_no_unused_noqa():
    assert codes_and_lines("x = (  # noqa: TL304\n") == [("TL001", 1)]


@pytest.mark.parametrize(
    "line, fixed",
    [
        ("x = 1  # noqa: TL304\n", "x = 1\n"),
        ("x = 1  # noqa: TL304   \n", "x = 1\n"),
        ("x = 1  # noqa: E501, TL304\n", "x = 1  # noqa: E501\n"),
        ("x = 1  # noqa: TL304, E501, TL999\n", "x = 1  # noqa: E501\n"),
        ("x = 1  # why  # noqa: TL304\n", "x = 1  # why\n"),
        ("x = 1  # noqa: TL304 - set by the launcher\n", "x = 1  # - set by the launcher\n"),
        ("x = 1  # NOQA:tl304\n", "x = 1\n"),
    ],
)
def test_the_fix_removes_only_torchlint_codes_and_keeps_the_rest_of_the_comment(line, fixed):
    assert fix(line, unsafe=False) == fixed


def test_the_fix_keeps_the_codes_that_are_used():
    assert fix(SCALER + "  # noqa: TL304, TL303\n", unsafe=False) == SCALER + "  # noqa: TL304\n"


# -- --add-noqa ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "before, codes, after",
    [
        ("x = 1\n", {1: {"TL304"}}, "x = 1  # noqa: TL304\n"),
        ("x = 1\n", {1: {"TL304", "TL303"}}, "x = 1  # noqa: TL303, TL304\n"),
        ("x = 1  # noqa: E501\n", {1: {"TL304"}}, "x = 1  # noqa: E501, TL304\n"),
        ("x = 1  # why\n", {1: {"TL304"}}, "x = 1  # why  # noqa: TL304\n"),
        ("x = 1  # noqa: TL3\n", {1: {"TL304"}}, "x = 1  # noqa: TL3\n"),
        ("x = 1  # noqa\n", {1: {"TL304"}}, "x = 1  # noqa\n"),
        ('x = """\n"""\n', {1: {"TL304"}}, 'x = """\n"""\n'),
        ("x = 1 + \\\n    2\n", {1: {"TL304"}}, "x = 1 + \\\n    2\n"),
        ("x = 1\r\ny = 2\r\n", {2: {"TL304"}}, "x = 1\r\ny = 2  # noqa: TL304\r\n"),
    ],
)
def test_add_noqa_merges_with_the_lines_comments(before, codes, after):
    text, added = add_noqa(before, codes)
    assert (text, added) == (after, int(after != before))


def test_a_text_is_tokenized_once_for_its_comments_however_often_it_is_checked(monkeypatch):
    """The suppressions and the unused-noqa check read the same comments, and the editor checks a buffer
    twice (its first look, then the full check): Python's tokenizer is slow (13 ms on yolov5's train.py)."""
    import torchlint.noqa as noqa_module

    text = USES.format(first="  # noqa: TL304, TL999", second="  # noqa: TL303") + "# tokenized once\n"
    tokenized = []
    original = noqa_module._read_comments
    monkeypatch.setattr(noqa_module, "_read_comments", lambda text: tokenized.append(1) or original(text))
    assert codes_and_lines(text) == [("TL003", 2)]
    assert codes_and_lines(text) == [("TL003", 2)]
    assert tokenized == [1]
