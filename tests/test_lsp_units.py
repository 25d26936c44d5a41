"""The Language Server's pure parts, without a client: positions in the protocol's units, the minimal
edit of a fix-all, the "disable for this line" comment, the buffer overlay, and the import boundary."""

from __future__ import annotations

import subprocess
import sys

import pytest
from lsprotocol import types

from torchlint.diagnostics import Diagnostic, Edit, Severity
from torchlint.lsp.convert import PositionMap, carried, changed_span, to_lsp
from torchlint.lsp.documents import Buffer, BufferFileSystem, encoded, path_of_uri
from torchlint.noqa import noqa_edit
from torchlint.workspace.source import SourceFile

# "é" is one UTF-16 unit (two UTF-8 bytes); "🔥" is outside the BMP: two UTF-16 units, four UTF-8 bytes.
TEXT = 'x = "é🔥"; y = torch.cuda.amp.autocast()\nz = 1\n'
AUTOCAST = TEXT.index("torch")


def position(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


@pytest.mark.parametrize(
    ("encoding", "column"), [("utf-16", AUTOCAST + 1), ("utf-8", AUTOCAST + 4), ("utf-32", AUTOCAST)]
)
def test_columns_count_the_negotiated_units_past_non_ascii_and_astral_characters(encoding, column):
    positions = PositionMap(TEXT, encoding)
    assert positions.position(AUTOCAST) == position(0, column)
    assert positions.offset(position(0, column)) == AUTOCAST


def test_positions_on_later_lines_and_past_the_end():
    positions = PositionMap(TEXT)
    second = TEXT.index("z")
    assert positions.position(second + 1) == position(1, 1)
    assert positions.position(len(TEXT)) == position(2, 0)
    assert positions.offset(position(1, 99)) == second + len("z = 1")  # past a line's end: its end
    assert positions.offset(position(7, 0)) == len(TEXT)
    emoji = TEXT.index("🔥")
    assert (positions.offset(position(0, 6)), positions.offset(position(0, 8))) == (emoji, emoji + 1)
    assert positions.position(emoji + 1) == position(0, 8)  # the emoji is units 6 and 7


def test_a_diagnostic_becomes_the_protocols_with_code_link_and_rule_name():
    diagnostic = Diagnostic(
        "TL303", "deprecated-amp-autocast", "msg", Severity.WARNING, "t.py", AUTOCAST, AUTOCAST + 23
    )
    converted = to_lsp(diagnostic, PositionMap(TEXT))
    assert converted.range == types.Range(start=position(0, 15), end=position(0, 38))
    assert (converted.code, converted.source, converted.severity) == (
        "TL303",
        "torchlint",
        types.DiagnosticSeverity.Warning,
    )
    assert converted.code_description.href == "https://docs.example/torchlint/rules/TL303.md"
    assert converted.data == {"name": "deprecated-amp-autocast", "fix": None}
    error = Diagnostic("TL001", "syntax-error", "SyntaxError", Severity.ERROR, "t.py", 0, 0)
    assert to_lsp(error, PositionMap(TEXT)).severity == types.DiagnosticSeverity.Error


def test_the_fix_all_edit_is_only_the_changed_span():
    old = "a = 1\nb = torch.cuda.amp.autocast()\nc = 3\nd = torch.cuda.amp.GradScaler()\ne = 5\n"
    new = old.replace("torch.cuda.amp", "torch.amp")
    edit = changed_span(old, new)
    # From the first change to the last: the lines around them are not resent.
    assert (edit.start, edit.end) == (old.index("cuda"), old.rindex("cuda.amp") + len("cuda"))
    assert old[: edit.start] + edit.content + old[edit.end :] == new
    assert changed_span(old, old) is None
    assert changed_span("x = 1\n", "import os\nx = 1\n") == Edit(0, 0, "import os\n")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("loader = DataLoader(ds)\n", "loader = DataLoader(ds)  # noqa: TL201\n"),
        ("loader = DataLoader(ds)  # noqa: TL202\n", "loader = DataLoader(ds)  # noqa: TL202, TL201\n"),
        (
            "loader = DataLoader(ds)  # expect: TL2\n",
            "loader = DataLoader(ds)  # expect: TL2  # noqa: TL201\n",
        ),
        ("loader = DataLoader(ds)  # noqa: TL2  # more\n", None),  # a prefix covers it already
        ("loader = DataLoader(ds)  # noqa\n", None),
        ("loader = DataLoader(ds) \\\n    .x\n", None),  # a backslash continues the line
        ('loader = DataLoader("""\n""")\n', None),  # the line ends inside a string
        ("loader = DataLoader(ds)\r\n", "loader = DataLoader(ds)  # noqa: TL201\r\n"),
    ],
)
def test_the_noqa_edit_writes_or_extends_the_lines_comment(line, expected):
    edit = noqa_edit(line, 1, "TL201")
    after = None if edit is None else line[: edit.start] + edit.content + line[edit.end :]
    assert after == expected


def test_the_overlay_answers_an_open_buffer_for_its_path_and_disk_for_the_rest(tmp_path):
    (tmp_path / "on_disk.py").write_text("disk = 1\n")
    fs = BufferFileSystem()
    unsaved = tmp_path / "new.py"
    fs.open(Buffer(unsaved.as_uri(), 1, "buffer = 'é'\n", unsaved))
    assert fs.is_file(unsaved) and fs.read_text(unsaved) == "buffer = 'é'\n"
    assert SourceFile.read(unsaved, fs).text == "buffer = 'é'\n"
    assert fs.read_text(tmp_path / "on_disk.py") == "disk = 1\n"
    assert fs.identity(unsaved) is not None
    fs.close(unsaved)
    assert not fs.exists(unsaved)


def test_a_buffer_is_encoded_as_its_coding_declaration_says():
    text = "# -*- coding: latin-1 -*-\nname = 'é'\n"
    assert encoded(text) == text.encode("latin-1")
    assert SourceFile.decode(path_of_uri("file:///x.py"), encoded(text)).text == text
    assert encoded("name = 'é'\n") == "name = 'é'\n".encode()


def test_uris_to_paths():
    assert path_of_uri("file:///tmp/a%20b/train.py").as_posix() == "/tmp/a b/train.py"
    assert path_of_uri("untitled:Untitled-1") is None


def test_the_cli_does_not_import_pygls_until_the_lsp_command_runs():
    code = "import sys, torchlint.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol') or m.startswith('torchlint.lsp')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == "[]\n"


def test_the_lsp_command_and_its_alias_are_listed():
    result = subprocess.run(
        [sys.executable, "-m", "torchlint", "--help"], capture_output=True, text=True, check=True
    )
    assert "  lsp " in result.stdout and "  server " in result.stdout


def _finding(code: str, text: str, what: str) -> Diagnostic:
    start = text.index(what)
    return Diagnostic(code, "name", "msg", Severity.WARNING, "t.py", start, start + len(what))


def test_findings_an_edit_left_alone_are_carried_moved_with_the_text_after_it():
    old = "loader = DataLoader(ds)\nx = 1\nmodel = Net()\n"
    new = "loader = DataLoader(ds)\nx = 22222\nmodel = Net()\n"
    before = [
        _finding("TL201", old, "DataLoader(ds)"),
        _finding("TL101", old, "model"),
        _finding("TL9", old, "1"),
    ]
    moved = carried(before, old, new)
    # The finding on the edited span waits for the check; the one after the edit moves with its text.
    assert [(d.code, new[d.start : d.end]) for d in moved] == [
        ("TL201", "DataLoader(ds)"),
        ("TL101", "model"),
    ]


def test_an_insertion_right_at_an_empty_finding_carries_it_once():
    old, new = "ab", "aXb"
    empty = Diagnostic("TL1", "name", "msg", Severity.WARNING, "t.py", 1, 1)
    assert [(d.start, d.end) for d in carried([empty], old, new)] == [(1, 1)]
    assert [(d.start, d.end) for d in carried([empty], old, old)] == [(1, 1)]


def test_a_request_waits_for_the_publish_of_its_documents_scheduled_check(tmp_path):
    """The worker keeps a check's result before its publish reaches the event loop: a hover arriving in
    between is answered from that result once the publish is done, or its answer would overtake it (a
    client reading the diagnostics after the answer sees the first look's). Nothing else is waited for."""
    import asyncio

    from torchlint.lsp.checker import Checked
    from torchlint.lsp.server import build_server

    server = build_server()
    path = tmp_path / "train.py"
    buffer = Buffer(path.as_uri(), 1, "x = 1\n", path)
    known = Checked(1, buffer.text, [])
    server.checker._checked[buffer.uri] = known
    through_the_worker: list[str] = []

    async def run(job, *args):
        through_the_worker.append(job.__name__)
        return known

    server.worker.run = run  # type: ignore[method-assign]

    async def ask() -> None:
        assert await server.checked(buffer) is known
        publishing = asyncio.get_running_loop().create_future()
        server._pending[buffer.uri] = publishing
        asyncio.get_running_loop().call_later(0.01, publishing.set_result, None)
        assert await server.checked(buffer) is known
        assert publishing.done()
        assert through_the_worker == []

    asyncio.run(ask())
