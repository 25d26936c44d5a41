"""`torchlint lsp` driven by a real LSP client (pytest-lsp runs the server as a subprocess over stdio):
exact diagnostics, quick fixes, fix-all, "disable for this line", hover, changes, saves and
configuration, close, and a server that stays up through whatever a client or the linter does."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import pytest_lsp
from lsp_client import (
    SERVER,
    actions_at,
    apply_action,
    initialize,
    next_publish,
    open_document,
    record_publishes,
    replace_text,
    settled,
    until_published,
)
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from torchlint.docs import rule_doc

FIXTURES = Path(__file__).parent.parent / "fixtures"

TRAIN = textwrap.dedent(
    """\
    import torch
    from torch.utils.data import DataLoader


    def main():
        device = torch.device("cuda")
        model = torch.compile(torch.nn.Linear(4, 2).to(device))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
        scaler = torch.cuda.amp.GradScaler()
        loader = DataLoader(dataset, batch_size=32)
        for epoch in range(3):
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                with torch.cuda.amp.autocast():
                    loss = model(x).sum()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()


    if __name__ == "__main__":
        main()
    """
)
pytestmark = pytest.mark.asyncio  # the real client is asynchronous (pytest-asyncio, pulled in by pytest-lsp)
CODES = ["TL304", "TL201", "TL202", "TL303"]  # TRAIN's findings, in the order they are published
URL = "https://docs.example/torchlint/rules/{}.md"
TL201 = (
    "`DataLoader` feeds training without `num_workers` (default 0): every batch is loaded in the training "
    "process while the GPU waits"
)
TL202 = "`DataLoader` feeds GPU training without `pin_memory=True`: every host-to-device copy of a batch is synchronous"
TL303 = '`torch.cuda.amp.autocast` is deprecated since torch 2.4: use `torch.amp.autocast("cuda", ...)`'
TL304 = '`torch.cuda.amp.GradScaler` is deprecated since torch 2.4: use `torch.amp.GradScaler("cuda", ...)`'


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def train(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def summary(diagnostic: types.Diagnostic) -> tuple:
    r = diagnostic.range
    return (
        diagnostic.code,
        (r.start.line, r.start.character, r.end.line, r.end.character),
        diagnostic.message,
    )


async def test_open_publishes_the_buffers_exact_diagnostics(client, train):
    await initialize(client, train.parent)
    diagnostics = await open_document(client, train)
    assert [summary(d) for d in diagnostics] == [
        ("TL304", (8, 13, 8, 38), TL304),
        ("TL201", (9, 13, 9, 23), TL201),
        ("TL202", (9, 13, 9, 23), TL202),
        ("TL303", (13, 17, 13, 40), TL303),
    ]
    first = diagnostics[0]
    assert first.source == "torchlint"
    assert first.severity == types.DiagnosticSeverity.Warning
    assert first.code_description.href == URL.format("TL304")
    assert first.data == {
        "name": "deprecated-grad-scaler",
        "fix": {"title": "Replace with `torch.amp.GradScaler`", "applicability": "safe"},
    }


async def test_a_quick_fix_and_the_fix_all_give_the_fixed_text(client, train):
    await initialize(client, train.parent)
    await open_document(client, train)
    uri = train.as_uri()
    actions = await actions_at(client, train, 8, 20)
    assert [(a.title, a.kind, a.is_preferred) for a in actions] == [
        ("TL304: Replace with `torch.amp.GradScaler`", "quickfix", True),
        ("Disable TL304 for this line", "quickfix", None),
        ("torchlint: Fix all safe fixes", "source.fixAll.torchlint", None),
    ]
    assert [summary(d)[0] for d in actions[0].diagnostics] == ["TL304"]
    fixed_line = '    scaler = torch.amp.GradScaler("cuda")\n'
    assert apply_action(TRAIN, actions[0], uri) == TRAIN.replace(
        "    scaler = torch.cuda.amp.GradScaler()\n", fixed_line
    )
    # The fix-all's edit is computed when the client resolves it (VS Code does), not on every light bulb;
    # it is one minimal edit (from the first change to the last), not the whole document.
    [offered] = await actions_at(client, train, 0, 0, only=["source.fixAll"])
    assert offered.edit is None
    fix_all = await client.code_action_resolve_async(offered)
    [edit] = fix_all.edit.changes[uri]
    assert (edit.range.start.line, edit.range.end.line) == (8, 13)
    assert apply_action(TRAIN, fix_all, uri) == TRAIN.replace(
        "    scaler = torch.cuda.amp.GradScaler()\n", fixed_line
    ).replace("with torch.cuda.amp.autocast():", 'with torch.amp.autocast("cuda"):')


async def test_a_client_that_does_not_resolve_actions_gets_the_fix_all_edit_at_once(client, train):
    await initialize(client, train.parent, editor="emacs")
    await open_document(client, train)
    [fix_all] = await actions_at(client, train, 0, 0, only=["source"])
    assert apply_action(TRAIN, fix_all, train.as_uri()) == TRAIN.replace(
        "torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")'
    ).replace("torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda")')
    # Resolving an action offered on an older version gives it no edit.
    await replace_text(client, train, TRAIN + "\n", version=2)
    stale = types.CodeAction(
        title=fix_all.title, kind=fix_all.kind, data={"uri": train.as_uri(), "version": 1}
    )
    assert (await client.code_action_resolve_async(stale)).edit is None


async def test_unsafe_fixes_are_offered_only_when_the_client_allows_them(client, train):
    await initialize(client, train.parent)
    await open_document(client, train)
    assert [a.title for a in await actions_at(client, train, 9, 16)] == [
        "Disable TL201 for this line",
        "Disable TL202 for this line",
        "torchlint: Fix all safe fixes",
    ]
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"torchlint": {"unsafeFixes": True}})
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    actions = await actions_at(client, train, 9, 16)
    assert [(a.title, a.is_preferred) for a in actions] == [
        ("TL201: Use one worker per CPU (at most 8) (unsafe)", False),
        ("Disable TL201 for this line", None),
        ("TL202: Set `pin_memory=True` (unsafe)", False),
        ("Disable TL202 for this line", None),
        ("torchlint: Fix all safe fixes", None),
    ]
    assert apply_action(TRAIN, actions[2], train.as_uri()) == TRAIN.replace(
        "DataLoader(dataset, batch_size=32)", "DataLoader(dataset, batch_size=32, pin_memory=True)"
    )


async def test_initialization_options_allow_unsafe_fixes(client, train):
    await initialize(client, train.parent, {"unsafeFixes": True})
    await open_document(client, train)
    titles = [a.title for a in await actions_at(client, train, 9, 16, only=["quickfix"])]
    assert titles == [
        "TL201: Use one worker per CPU (at most 8) (unsafe)",
        "Disable TL201 for this line",
        "TL202: Set `pin_memory=True` (unsafe)",
        "Disable TL202 for this line",
    ]


async def test_the_noqa_action_writes_the_comment_and_the_finding_goes(client, train):
    await initialize(client, train.parent)
    await open_document(client, train)
    disable = [a for a in await actions_at(client, train, 9, 16) if a.title == "Disable TL202 for this line"]
    noqa = apply_action(TRAIN, disable[0], train.as_uri())
    assert noqa == TRAIN.replace("batch_size=32)\n", "batch_size=32)  # noqa: TL202\n")
    diagnostics = await replace_text(client, train, noqa, version=2)
    assert [d.code for d in diagnostics] == ["TL304", "TL201", "TL303"]
    # A second "disable" on the same line extends the comment.
    extend = [a for a in await actions_at(client, train, 9, 16) if a.title == "Disable TL201 for this line"]
    assert apply_action(noqa, extend[0], train.as_uri()) == TRAIN.replace(
        "batch_size=32)\n", "batch_size=32)  # noqa: TL202, TL201\n"
    )


def _lines(params: types.PublishDiagnosticsParams) -> list[tuple[str, int]]:
    return [(d.code, d.range.start.line) for d in params.diagnostics]


async def test_a_file_whose_questions_reach_other_files_is_published_first_with_what_it_alone_shows(
    client, tmp_path
):
    shutil.copytree(FIXTURES / "two_module", tmp_path / "demo")
    train = tmp_path / "demo" / "train.py"
    await initialize(client, train.parent)
    published = record_publishes(client)
    text = train.read_text()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=train.as_uri(), language_id="python", version=1, text=text
            )
        )
    )
    await until_published(published, train.as_uri(), count=2)
    # First the deprecated scaler (this file alone says so), then what engine.py's loop adds.
    assert [_lines(p) for p in published] == [[("TL304", 61)], [("TL203", 48), ("TL101", 58), ("TL304", 61)]]
    # An edit above them: at once, the findings of the other rules move with their lines, until the check.
    published.clear()
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=train.as_uri(), version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="# run me\n" + text)],
        )
    )
    await until_published(published, train.as_uri(), count=2)
    assert [_lines(p) for p in published] == [[("TL203", 49), ("TL101", 59), ("TL304", 62)]] * 2


async def test_a_file_that_needs_no_other_file_is_published_once(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    script = tmp_path / "amp.py"
    script.write_text("import torch\n\nscaler = torch.cuda.amp.GradScaler()\n")
    await initialize(client, tmp_path)
    published = record_publishes(client)
    assert [d.code for d in await open_document(client, script)] == ["TL304"]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(next_publish(client), 0.5)
    assert len(published) == 1


async def test_a_change_publishes_the_new_versions_diagnostics(client, train):
    await initialize(client, train.parent)
    await open_document(client, train)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=train.as_uri(), version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=8, character=17), end=types.Position(line=8, character=26)
                    ),
                    text="amp.",
                )
            ],
        )
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [d.code for d in await settled(client, train)] == ["TL201", "TL202", "TL303"]
    # Edits in quick succession are checked once, for the last version only.
    for version, text in ((3, TRAIN.replace("cuda.amp", "amp")), (4, "import torch\n"), (5, TRAIN)):
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=train.as_uri(), version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [d.code for d in await settled(client, train)] == CODES
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(next_publish(client), 0.5)


async def test_hover_on_a_finding_shows_the_rule_doc(client, train):
    await initialize(client, train.parent)
    await open_document(client, train)
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=train.as_uri()),
            position=types.Position(line=13, character=25),
        )
    )
    assert hover.contents.kind == types.MarkupKind.Markdown
    assert hover.contents.value == rule_doc("TL303")  # the doc as `torchlint rule TL303` prints it
    assert "# error" not in hover.contents.value and "## Example" in hover.contents.value
    assert (hover.range.start.line, hover.range.start.character, hover.range.end.character) == (13, 17, 40)
    nothing = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=train.as_uri()),
            position=types.Position(line=0, character=3),
        )
    )
    assert nothing is None


async def test_a_syntax_error_is_a_diagnostic_and_the_server_stays(client, train):
    await initialize(client, train.parent)
    diagnostics = await open_document(client, train, "def f(:\n    pass\n")
    assert [summary(d) for d in diagnostics] == [("TL001", (0, 6, 0, 6), "SyntaxError: invalid syntax")]
    assert diagnostics[0].severity == types.DiagnosticSeverity.Error
    assert [d.code for d in await replace_text(client, train, TRAIN, version=2)] == CODES


async def test_close_clears_the_diagnostics(client, train):
    await initialize(client, train.parent)
    await open_document(client, train)
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=train.as_uri()))
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(client.diagnostics[train.as_uri()]) == []


async def test_saving_the_config_refreshes_open_documents(client, train):
    await initialize(client, train.parent)
    assert len(await open_document(client, train)) == 4
    config = train.parent / "pyproject.toml"
    config.write_text("[project]\nname = 'demo'\n[tool.torchlint]\nignore = ['TL3', 'TL201']\n")
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=config.as_uri()))
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [d.code for d in client.diagnostics[train.as_uri()]] == ["TL202"]


async def test_another_open_buffers_unsaved_text_is_what_cross_file_facts_see(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    train = tmp_path / "train.py"
    train.write_text(
        "import torch\nfrom torch.utils.data import DataLoader\nfrom engine import train_one_epoch\n\n"
        "model = torch.nn.Linear(4, 2).cuda()\nloader = DataLoader(ds, batch_size=8)\nfor epoch in range(3):\n"
        "    train_one_epoch(model, loader, opt)\n"
    )
    engine = tmp_path / "engine.py"
    engine.write_text(
        "def train_one_epoch(model, loader, opt):\n    for x in loader:\n        model(x).backward()\n        opt.step()\n"
    )
    await initialize(client, tmp_path)
    assert [d.code for d in await open_document(client, train)] == ["TL201", "TL202"]
    await open_document(client, engine, "def train_one_epoch(model, loader, opt):\n    pass\n")
    assert await replace_text(client, train, train.read_text() + "\n", version=2) == []


async def test_an_unknown_method_gets_an_error_and_the_server_stays(client, train):
    await initialize(client, train.parent)
    with pytest.raises(Exception, match="not found|Method Not Found"):
        await client.protocol.send_request_async("torchlint/noSuchMethod", {})
    assert len(await open_document(client, train)) == 4


CRASHING_SERVER = [
    sys.executable,
    "-c",
    "from torchlint.linter import Linter\n"
    "def crash(*args, **kwargs): raise RuntimeError('boom')\n"
    "Linter.check_text = Linter.check_own_file = crash\n"
    "from torchlint.lsp import serve\nserve()\n",
]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=CRASHING_SERVER))
async def crashing(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_an_exception_inside_the_linter_is_logged_and_nothing_is_published(crashing, train):
    await initialize(crashing, train.parent)
    crashing.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=train.as_uri(), language_id="python", version=1, text=TRAIN
            )
        )
    )
    message = await crashing.wait_for_notification(types.WINDOW_LOG_MESSAGE)
    assert message.type == types.MessageType.Error
    assert message.message.startswith(f"torchlint crashed on {train.as_posix()}:\nTraceback")
    assert "RuntimeError: boom" in message.message
    assert train.as_uri() not in crashing.diagnostics
    hover = await crashing.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=train.as_uri()),
            position=types.Position(line=0, character=0),
        )
    )
    assert hover is None


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _responses(output: bytes) -> dict:
    """The server's responses (messages with an id), by id."""
    found = {}
    while output:
        header, _, rest = output.partition(b"\r\n\r\n")
        fields = dict(line.split(b": ", 1) for line in header.split(b"\r\n"))
        length = int(fields[b"Content-Length"])
        message = json.loads(rest[:length])
        output = rest[length:]
        if "id" in message and "method" not in message:
            found[message["id"]] = message
    return found


async def test_malformed_requests_get_errors_and_the_server_exits_when_the_client_goes_away(tmp_path):
    """Raw bytes on stdin, as no well-behaved client sends them: a body that is not JSON is skipped, a
    request with parameters of the wrong shape is answered with an error, and stdin closing (a client that
    died, with no shutdown or exit) ends the process cleanly."""
    server = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    cut_short = b'{"jsonrpc": "2.0", "id": 9, "method": '
    server.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(cut_short), cut_short))
    for message in (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"capabilities": {}, "rootUri": tmp_path.as_uri()},
        },
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": {"textDocument": 3}},
        {"jsonrpc": "2.0", "id": 3, "method": "textDocument/codeAction", "params": None},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": "nonsense"}},
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "textDocument/hover",
            "params": {
                "textDocument": {"uri": (tmp_path / "none.py").as_uri()},
                "position": {"line": 0, "character": 0},
            },
        },
    ):
        server.stdin.write(_frame(message))
    server.stdin.flush()
    server.stdin.close()
    assert server.wait(timeout=30) == 0
    responses = _responses(server.stdout.read())
    assert sorted(responses) == [1, 2, 3, 4]
    assert responses[1]["result"]["serverInfo"]["name"] == "torchlint"
    assert "error" in responses[2] and "error" in responses[3]
    assert responses[4] == {"jsonrpc": "2.0", "id": 4, "result": None}
