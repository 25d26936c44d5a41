"""Suppression comments, as ruff reads them."""

from __future__ import annotations

from support import codes_and_lines

USES = """\
import torch
s = torch.cuda.amp.GradScaler(){first}
with torch.cuda.amp.autocast():{second}
    pass
"""


def uses(first: str = "", second: str = "", header: str = "") -> list[tuple[str, int]]:
    return codes_and_lines(header + USES.format(first=first, second=second))


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
    assert codes_and_lines(source) == [("TL304", 2)]


def test_noqa_inside_a_string_does_not_count():
    assert uses(first='; note = "# noqa"') == [("TL304", 2), ("TL303", 3)]


def test_file_level_suppression():
    assert uses(header="# torchlint: noqa\n") == []
    assert uses(header="# torchlint: noqa: TL304\n") == [("TL303", 4)]
    assert uses(header="# torchlint: noqa: TL3\n") == []


def test_file_level_comment_must_be_on_its_own_line():
    assert uses(first="  # torchlint: noqa") == [("TL304", 2), ("TL303", 3)]
