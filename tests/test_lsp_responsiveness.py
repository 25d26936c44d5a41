"""`torchlint lsp` answers requests while it checks (report case N11) and follows the protocol's lifecycle
(N12). Checks run on one worker thread, off the event loop: a hover on a small file is answered while a
big buffer is being checked, and a check that a newer version (or a refresh) superseded never publishes.
The lifecycle: errors for requests before `initialize` and after `shutdown`, `exit`'s code, and a `file:`
URI that cannot be a path. Order of events is asserted, never wall-clock time."""

from __future__ import annotations

import asyncio
import threading

import pytest
import pytest_lsp
from lsp_client import (
    SERVER,
    actions_at,
    initialize,
    open_document,
    raw_session,
    record_publishes,
    until_published,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from torchlint.docs import rule_doc
from torchlint.lsp.documents import path_of_uri
from torchlint.lsp.worker import Worker

INVALID_REQUEST, SERVER_NOT_INITIALIZED, CONTENT_MODIFIED = -32600, -32002, -32801  # LSP's error codes
SMALL = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"  # TL303 at line 2, columns 5-28
BIG_LINES = 3000  # measured here: a check of 1.7-2.6 s (idle to loaded machine), a hover takes milliseconds


def big_module(lines: int = BIG_LINES) -> str:
    """A generated module with one TL304 per line: every finding costs, so its check takes seconds."""
    return "import torch\n\n" + "".join(f"s{i} = torch.cuda.amp.GradScaler()\n" for i in range(lines))


def did_open(client: LanguageClient, path, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=path.as_uri(), language_id="python", version=version, text=text
            )
        )
    )


def did_change(client: LanguageClient, path, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def hover_params(path, line: int, character: int) -> types.HoverParams:
    return types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=path.as_uri()),
        position=types.Position(line=line, character=character),
    )


def versions(published: list, path) -> list[tuple[int | None, int]]:
    """(version, number of diagnostics) of every publish for `path`, in order."""
    return [(p.version, len(p.diagnostics)) for p in published if p.uri == path.as_uri()]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    return tmp_path


@pytest.mark.asyncio
async def test_a_hover_and_code_actions_on_a_small_file_are_answered_while_a_big_buffer_is_checked(
    client, project
):
    """N11: the big buffer's check runs off the event loop, so requests on another file are answered
    before the big buffer's diagnostics arrive; and those diagnostics are the linter's, as before."""
    await initialize(client, project)
    small, big = project / "small.py", project / "big.py"
    assert [d.code for d in await open_document(client, small, SMALL)] == ["TL303"]
    published = record_publishes(client)
    did_open(client, big, big_module())
    hover = await client.text_document_hover_async(hover_params(small, 2, 10))
    actions = await actions_at(client, small, 2, 10)
    assert versions(published, big) == []  # both answered while the big buffer was still being checked
    assert hover.contents.value == rule_doc("TL303")  # the doc as `torchlint rule TL303` prints it
    assert "# error" not in hover.contents.value and "## Example" in hover.contents.value
    assert [a.title for a in actions] == [
        "TL303: Replace with `torch.amp.autocast`",
        "Disable TL303 for this line",
        "torchlint: Fix all safe fixes",
    ]
    await until_published(published, big.as_uri())
    [diagnostics] = [p.diagnostics for p in published if p.uri == big.as_uri()]
    assert len(diagnostics) == BIG_LINES and {d.code for d in diagnostics} == {"TL304"}
    first, last = diagnostics[0].range, diagnostics[-1].range
    assert (first.start.line, first.start.character, first.end.character) == (2, 5, 30)
    assert (last.start.line, last.start.character, last.end.character) == (BIG_LINES + 1, 8, 33)


@pytest.mark.asyncio
async def test_a_check_superseded_by_a_newer_version_never_publishes(client, project):
    """N11: version 1 (thousands of findings) is still being checked when version 2 (none) arrives; a
    small buffer's version 1 waits behind it and is superseded too. Only the versions 2 are published:
    a stale result is dropped whether its check was running or still queued. A hover asked of version 1,
    which waited for its check, is answered ContentModified (its positions are the older text's)."""
    await initialize(client, project)
    big, small = project / "big.py", project / "small.py"
    published = record_publishes(client)
    did_open(client, big, big_module())
    stale_hover = asyncio.ensure_future(client.text_document_hover_async(hover_params(big, 2, 10)))
    await asyncio.sleep(0)  # the task sends the request now, before the changes below
    did_open(client, small, SMALL)
    did_change(client, small, "import torch\n", version=2)
    did_change(client, big, "import torch\n", version=2)
    with pytest.raises(JsonRpcException) as stale:
        await stale_hover
    assert stale.value.code == CONTENT_MODIFIED
    await until_published(published, big.as_uri())
    await until_published(published, small.as_uri())
    with pytest.raises(asyncio.TimeoutError):  # nothing else comes (a late version 1, say)
        await asyncio.wait_for(until_published(published, big.as_uri(), count=2), 0.3)
    assert versions(published, big) == [(2, 0)]
    assert versions(published, small) == [(2, 0)]


@pytest.mark.asyncio
async def test_a_refresh_during_a_check_publishes_only_the_new_settings_result(client, project):
    """N11: a saved config arrives while a check with the old settings is running; that check's result
    is neither published nor kept (the refresh's own check must not find it in the cache)."""
    await initialize(client, project)
    small, big = project / "small.py", project / "big.py"
    await open_document(client, small, SMALL)  # the folder's settings are now read and kept
    published = record_publishes(client)
    did_open(client, big, big_module())
    config = project / "pyproject.toml"
    config.write_text("[project]\nname = 'demo'\n[tool.torchlint]\nignore = ['TL304']\n")
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=config.as_uri()))
    )
    await until_published(published, big.as_uri())
    await until_published(published, small.as_uri())
    assert versions(published, big) == [(1, 0)]
    assert versions(published, small) == [(1, 1)]


@pytest.mark.asyncio
async def test_a_file_uri_that_cannot_be_a_path_is_logged_not_checked_and_shows_no_message(client, project):
    """N12: `%00` decodes to a NUL byte, which no file path holds. The server logs it (no message box),
    publishes nothing for it, answers a hover on it with nothing, and goes on checking other files."""
    await initialize(client, project)
    uri = (project / "a%00b.py").as_uri().replace("%2500", "%00")
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=SMALL)
        )
    )
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=2, character=10)
        )
    )
    assert hover is None
    assert [d.code for d in await open_document(client, project / "small.py", SMALL)] == ["TL303"]
    assert client.messages == []
    assert uri not in client.diagnostics
    logged = [m for m in client.log_messages if uri in m.message]
    assert [(m.type, m.message) for m in logged] == [
        (types.MessageType.Warning, f"torchlint: {uri} is not a file path that can exist; not checked")
    ]


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
EXIT = {"jsonrpc": "2.0", "method": "exit"}


def request(msg_id: int, method: str, params: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def hover(msg_id: int, uri: str) -> dict:
    return request(
        msg_id, "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 10}}
    )


def answers(messages: list[dict]) -> dict:
    """Each response's result, or its error code, by request id."""
    return {
        m["id"]: ("error", m["error"]["code"]) if "error" in m else ("result", m["result"])
        for m in messages
        if "id" in m and "method" not in m
    }


def test_requests_after_shutdown_get_invalid_request_and_exit_then_exits_0(tmp_path):
    """N12: after `shutdown`, a hover and a second `shutdown` are answered with InvalidRequest (they got
    no answer at all, and a client awaiting one waited forever); `exit` after `shutdown` exits 0."""
    uri = (tmp_path / "a.py").as_uri()
    code, messages = raw_session(
        [INITIALIZE, INITIALIZED, request(2, "shutdown"), hover(3, uri), request(4, "shutdown"), EXIT],
        close_stdin=False,
    )
    assert code == 0
    found = answers(messages)
    assert found[2] == ("result", None)
    assert (found[3], found[4]) == (("error", INVALID_REQUEST), ("error", INVALID_REQUEST))


def test_exit_without_shutdown_exits_1(tmp_path):
    """N12: the spec's exit code for an `exit` that no `shutdown` preceded is 1 (it was 0)."""
    code, messages = raw_session([INITIALIZE, INITIALIZED, EXIT], close_stdin=False)
    assert code == 1
    assert list(answers(messages)) == [1]


def test_before_initialize_requests_get_server_not_initialized_and_notifications_are_dropped(tmp_path):
    """N12: a request before `initialize` is answered ServerNotInitialized (not `result: null`), a
    notification before it is dropped (a didOpen crashed in pygls and showed a message box), and a second
    `initialize` is an InvalidRequest. Nothing is published for the dropped didOpen."""
    uri = (tmp_path / "a.py").as_uri()
    early_open = {
        "jsonrpc": "2.0",
        "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": SMALL}},
    }
    code, messages = raw_session(
        [hover(5, uri), early_open, INITIALIZE, INITIALIZED, hover(6, uri), {**INITIALIZE, "id": 7}],
        close_stdin=True,
    )
    assert code == 0  # stdin closed: the client went away
    found = answers(messages)
    assert found[5] == ("error", SERVER_NOT_INITIALIZED)
    assert found[1][0] == "result" and found[1][1]["serverInfo"]["name"] == "torchlint"
    assert found[6] == ("result", None)
    assert found[7] == ("error", INVALID_REQUEST)
    assert [m["method"] for m in messages if "method" in m] == []  # no message box, no diagnostics


def test_the_worker_runs_jobs_in_order_skips_cancelled_ones_and_hands_back_errors():
    """N11, the worker alone: jobs run one at a time in submission order; a job cancelled before it
    starts (its document changed again) never runs; an exception reaches the submitter and the worker
    goes on."""
    worker = Worker()
    gate, ran = threading.Event(), []
    first = worker.submit(gate.wait)
    skipped = worker.submit(ran.append, "skipped")
    second = worker.submit(ran.append, "second")
    failing = worker.submit(int, "not a number")
    third = worker.submit(ran.append, "third")
    assert skipped.cancel()
    gate.set()
    assert first.result(timeout=10) is True
    assert third.result(timeout=10) is None and second.done()
    assert ran == ["second", "third"]
    with pytest.raises(ValueError, match="invalid literal"):
        failing.result()


def test_the_worker_runs_the_collectors_passes_when_the_editor_pauses_or_after_many_jobs(monkeypatch):
    """`torchlint lsp` turns automatic collection off: a pass over everything the server keeps took
    160-260 ms on yolov5, inside a check, every few keystrokes. The worker runs one once no job came for
    IDLE_S after the last, or before a job once JOBS_PER_PASS ran without such a pause; none while
    collection is automatic (as in this process, unless a test turns it off)."""
    import gc

    import torchlint.lsp.worker as worker_module

    passes = []
    monkeypatch.setattr(worker_module, "IDLE_S", 0.05)
    monkeypatch.setattr(worker_module, "JOBS_PER_PASS", 3)
    monkeypatch.setattr(gc, "collect", lambda *args: passes.append("pass") or 0)
    gc.disable()
    try:
        worker = Worker()
        gate, ran = threading.Event(), []
        worker.submit(gate.wait)
        futures = [worker.submit(lambda n=n: ran.append((n, len(passes)))) for n in range(5)]
        gate.set()
        futures[-1].result(timeout=10)
        assert ran == [(0, 0), (1, 0), (2, 1), (3, 1), (4, 1)]  # before the 4th job: three ran, no pause
        for _ in range(200):
            if len(passes) == 2:
                break
            threading.Event().wait(0.01)
        assert passes == ["pass", "pass"]  # the pause after the last job
        threading.Event().wait(0.2)
        assert passes == ["pass", "pass"]  # nothing ran since: no pass
    finally:
        gc.enable()
    monkeypatch.setattr(worker_module, "IDLE_S", 0.01)
    enabled = Worker()
    enabled.submit(int, "1").result(timeout=10)
    threading.Event().wait(0.1)
    assert passes == ["pass", "pass"]  # automatic collection: the worker leaves it to the interpreter


@pytest.mark.asyncio
async def test_the_worker_hands_results_to_the_event_loop():
    """N11: `run` awaits the job on the loop (the result crosses threads through the loop's safe call)."""
    worker = Worker()
    assert await worker.run(sum, [1, 2, 3]) == 6
    assert await asyncio.gather(*(worker.run(str, n) for n in range(5))) == ["0", "1", "2", "3", "4"]


def test_an_error_outside_a_request_is_logged_not_shown_in_a_message_box(tmp_path):
    """N12: pygls turns an error it catches outside a request (here a didOpen whose parameters do not fit)
    into a `window/showMessage` box the user can do nothing about; the server logs it instead."""
    broken_open = {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": "x"}}
    code, messages = raw_session([INITIALIZE, INITIALIZED, broken_open], close_stdin=True)
    assert code == 0
    sent = [(m["method"], m["params"]) for m in messages if "method" in m]
    assert [method for method, _ in sent] == ["window/logMessage"]
    assert sent[0][1]["type"] == types.MessageType.Error.value
    assert sent[0][1]["message"].startswith("torchlint: internal error: Invalid Params")


def test_a_file_uri_with_a_nul_byte_has_no_path():
    """N12: the decoded path would hold a NUL byte, which every file system call refuses."""
    with pytest.raises(ValueError, match="is not a file path that can exist"):
        path_of_uri("file:///tmp/a%00b.py")
    assert path_of_uri("untitled:a%00b") is None  # not a file: checked on its own, as before
