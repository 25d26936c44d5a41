"""What the Language Server tests share: a real client (pytest-lsp starts `python -m torchlint lsp` as a
subprocess and speaks the protocol to it), and the client side of applying edits, written independently of
the server's own conversion so that a wrong column cannot cancel itself out."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

SERVER = [sys.executable, "-m", "torchlint", "lsp"]


async def initialize(
    client: LanguageClient, root: Path, options: dict | None = None, editor: str = "visual-studio-code"
) -> None:
    """initialize + initialized, with the capabilities a real `editor` sends (pytest-lsp's records)."""
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities(editor),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=options,
        )
    )


async def open_document(
    client: LanguageClient, path: Path, text: str | None = None, version: int = 1
) -> list:
    """didOpen (the file's text unless `text` is given), then the diagnostics published for it."""
    text = path.read_text() if text is None else text
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=path.as_uri(), language_id="python", version=version, text=text
            )
        )
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return await settled(client, path)


async def settled(client: LanguageClient, document: Path | str) -> list:
    """The diagnostics published for a document (a path, or a notebook cell's URI) once the check of the
    version last published has ended. The server may publish a first look before the full check (when the
    file's questions reach other files), and then has queued that check: a hover is answered after it, and
    the check's publish is sent before the answer. Asked after a change, wait for its first publish before
    this: a hover alone would check the new version at once, ahead of its scheduled publish."""
    uri = document if isinstance(document, str) else document.as_uri()
    await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=0)
        )
    )
    return list(client.diagnostics[uri])


async def replace_text(client: LanguageClient, path: Path, text: str, version: int) -> list:
    """didChange with the whole text (a full-document change), then the diagnostics published."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return await settled(client, path)


async def actions_at(
    client: LanguageClient, path: Path, line: int, character: int, only: list[str] | None = None
) -> list[types.CodeAction]:
    position = types.Position(line=line, character=character)
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=path.as_uri()),
            range=types.Range(start=position, end=position),
            context=types.CodeActionContext(diagnostics=[], only=only),
        )
    )
    return list(result or [])


def offset_of(text: str, position: types.Position) -> int:
    """A client's reading of an LSP position: lines split at newlines, columns in UTF-16 code units."""
    lines = text.split("\n")
    offset = sum(len(line) + 1 for line in lines[: position.line])
    line = lines[position.line] if position.line < len(lines) else ""
    units = 0
    for index, char in enumerate(line):
        if units >= position.character:
            return offset + index
        units += 2 if ord(char) > 0xFFFF else 1
    return offset + len(line)


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """The text after a set of non-overlapping TextEdits, as an editor applies them."""
    spans = sorted(
        ((offset_of(text, e.range.start), offset_of(text, e.range.end), e.new_text) for e in edits),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def apply_action(text: str, action: types.CodeAction, uri: str) -> str:
    assert action.edit is not None and action.edit.changes is not None
    assert list(action.edit.changes) == [uri]
    return apply_edits(text, list(action.edit.changes[uri]))


class Publishes(list):
    """Every publishDiagnostics from `record_publishes`, in order, and an event set at each arrival."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = asyncio.Event()

    def add(self, params: types.PublishDiagnosticsParams) -> None:
        self.append(params)
        self.arrived.set()


def record_publishes(client: LanguageClient) -> Publishes:
    """Every publishDiagnostics the server sends from now on, in order (`client.diagnostics` keeps only
    the last one per document, which cannot tell a stale publish that was later overwritten)."""
    published = Publishes()
    features = client.protocol.fm.features
    handler = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def record(params: types.PublishDiagnosticsParams) -> None:
        published.add(params)
        handler(params)

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = record
    return published


async def until_published(published: Publishes, uri: str, count: int = 1) -> None:
    """Wait until `published` (from `record_publishes`) holds `count` publishes for `uri`. Counted from
    the record, not by waiting for the next notification: a publish handled between the count and the
    wait (the loop runs in between when the wait is a task, as `asyncio.wait_for` makes it) would be
    waited for in vain."""
    while sum(p.uri == uri for p in published) < count:
        published.arrived.clear()  # nothing can arrive between the count above and this
        await asyncio.wait_for(published.arrived.wait(), 60)


def next_publish(client: LanguageClient) -> asyncio.Future:
    """The next publishDiagnostics, its waiter registered now (`client.wait_for_notification` registers
    only once it runs, so wrapped in `asyncio.wait_for` it could miss one that arrives meanwhile)."""
    return client.protocol.wait_for_notification_async(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)


def frame(message: dict) -> bytes:
    """One JSON-RPC message as it travels over stdio."""
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def read_frames(output: bytes) -> list[dict]:
    """Every message in the server's stdout, in order."""
    found = []
    while output.strip():
        header, _, rest = output.partition(b"\r\n\r\n")
        fields = dict(line.split(b": ", 1) for line in header.split(b"\r\n"))
        length = int(fields[b"Content-Length"])
        found.append(json.loads(rest[:length]))
        output = rest[length:]
    return found


def raw_session(messages: list[dict], close_stdin: bool, timeout: float = 30) -> tuple[int, list[dict]]:
    """The server fed `messages` as raw frames (as no library client would send some of them): its exit
    code and everything it wrote. Without `close_stdin` the server must end by itself (an `exit`)."""
    server = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    server.stdin.write(b"".join(frame(message) for message in messages))
    server.stdin.flush()
    if close_stdin:
        server.stdin.close()
    try:
        code = server.wait(timeout=timeout)
    finally:
        server.kill()
        server.stdin.close()
    return code, read_frames(server.stdout.read())
