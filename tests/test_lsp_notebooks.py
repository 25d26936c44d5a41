"""`torchlint lsp` on Jupyter notebooks, driven by a real LSP client as VS Code drives it (LSP 3.17's
`notebookDocument/*`): the notebook's Python cells are checked as one module, each cell's diagnostics are
published on the cell's own URI with ranges counted in that cell, edits of a cell re-check the notebook,
quick fixes and the notebook's fix-all come back as edits of the cells they change, and closing clears."""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsp_client import SERVER, apply_edits, next_publish, record_publishes, settled, until_published
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from torchlint.docs import rule_doc

pytestmark = pytest.mark.asyncio

MARKDOWN, CODE = types.NotebookCellKind.Markup, types.NotebookCellKind.Code
IMPORTS = "%matplotlib inline\nimport torch\nfrom torch.utils.data import DataLoader\n"
SETUP = (
    "model = torch.nn.Linear(4, 2).cuda()\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)\n"
    "scaler = torch.cuda.amp.GradScaler()\n"
    "loader = DataLoader(dataset, batch_size=32)"
)
LOOP = (
    "%%time\n"
    "for x, y in loader:\n"
    "    x, y = x.cuda(), y.cuda()\n"
    "    with torch.cuda.amp.autocast():\n"
    "        loss = model(x).sum()\n"
    "    scaler.scale(loss).backward()\n"
    "    scaler.step(optimizer)\n"
    "    scaler.update()"
)
# (kind, language, text) of each cell, as VS Code sends them (no final line break in a cell).
NOTEBOOK = [
    (MARKDOWN, "markdown", "# Train a tiny model"),
    (CODE, "python", IMPORTS),
    (CODE, "python", SETUP),
    (CODE, "python", LOOP),
]
GRAD_SCALER = (
    '`torch.cuda.amp.GradScaler` is deprecated since torch 2.4: use `torch.amp.GradScaler("cuda", ...)`'
)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def notebook(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    return tmp_path / "train.ipynb"


def cell_uri(path, index: int) -> str:
    """A cell's URI as VS Code makes them (the notebook's path, the cell's handle in the fragment)."""
    return f"vscode-notebook-cell:{path.as_posix()}#W{index}sZmlsZQ%3D%3D"


async def initialize(client: LanguageClient, root) -> types.InitializeResult:
    """initialize + initialized with VS Code's capabilities and its notebook support."""
    capabilities = client_capabilities("visual-studio-code")
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities(execution_summary_support=True)
    )
    return await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        )
    )


async def open_notebook(client: LanguageClient, path, cells=NOTEBOOK) -> list[types.PublishDiagnosticsParams]:
    """notebookDocument/didOpen, then every publish until each code cell has had its full check's."""
    published = record_publishes(client)
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=path.as_uri(),
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    types.NotebookCell(kind=kind, document=cell_uri(path, i))
                    for i, (kind, _, _) in enumerate(cells)
                ],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri=cell_uri(path, i), language_id=language, version=1, text=text)
                for i, (_, language, text) in enumerate(cells)
            ],
        )
    )
    code = [index for index, (kind, _, _) in enumerate(cells) if kind == CODE]
    for index in code:
        await until_published(published, cell_uri(path, index))
    if code:
        await settled(client, cell_uri(path, code[0]))
    return published


def change_cell(client: LanguageClient, path, index: int, text: str, version: int) -> None:
    """notebookDocument/didChange replacing one cell's text (how VS Code sends an edit in a cell)."""
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(uri=path.as_uri(), version=version),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(
                                uri=cell_uri(path, index), version=version
                            ),
                            changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                        )
                    ]
                )
            ),
        )
    )


async def actions_in_cell(
    client: LanguageClient, path, index: int, line: int, character: int, only: list[str] | None = None
) -> list[types.CodeAction]:
    position = types.Position(line=line, character=character)
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=cell_uri(path, index)),
            range=types.Range(start=position, end=position),
            context=types.CodeActionContext(diagnostics=[], only=only),
        )
    )
    return list(result or [])


def summary(diagnostic: types.Diagnostic) -> tuple:
    r = diagnostic.range
    return (diagnostic.code, (r.start.line, r.start.character, r.end.line, r.end.character))


def cells_edited(edit: types.WorkspaceEdit, path, cells=NOTEBOOK) -> dict[int, str]:
    """The text of each cell the edit changes, by index (as the client applies it)."""
    by_uri = {cell_uri(path, i): i for i in range(len(cells))}
    return {
        by_uri[uri]: apply_edits(cells[by_uri[uri]][2], list(edits)) for uri, edits in edit.changes.items()
    }


async def test_each_code_cell_gets_its_own_diagnostics_with_ranges_in_the_cell(client, notebook):
    result = await initialize(client, notebook.parent)
    [selector] = result.capabilities.notebook_document_sync.notebook_selector
    assert (selector.notebook, [c.language for c in selector.cells]) == ("jupyter-notebook", ["python"])
    published = await open_notebook(client, notebook)
    # Every code cell is published (the one with nothing to show gets an empty list), the markdown cell
    # and the notebook's own URI never.
    assert sorted({p.uri for p in published}) == [cell_uri(notebook, i) for i in (1, 2, 3)]
    assert list(client.diagnostics[cell_uri(notebook, 1)]) == []
    assert [summary(d) for d in client.diagnostics[cell_uri(notebook, 2)]] == [
        ("TL304", (2, 9, 2, 34)),
        ("TL201", (3, 9, 3, 19)),
        ("TL202", (3, 9, 3, 19)),
    ]
    # Below the masked `%%time` line, as in the cell.
    assert [summary(d) for d in client.diagnostics[cell_uri(notebook, 3)]] == [("TL303", (3, 9, 3, 32))]
    first = client.diagnostics[cell_uri(notebook, 2)][0]
    assert (first.message, first.source, first.data["name"]) == (
        GRAD_SCALER,
        "torchlint",
        "deprecated-grad-scaler",
    )


async def test_editing_a_cell_checks_the_notebook_again(client, notebook):
    await initialize(client, notebook.parent)
    published = await open_notebook(client, notebook)
    published.clear()
    change_cell(
        client, notebook, 2, SETUP.replace("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")'), 2
    )
    await until_published(published, cell_uri(notebook, 2))
    assert [summary(d) for d in await settled(client, cell_uri(notebook, 2))] == [
        ("TL201", (3, 9, 3, 19)),
        ("TL202", (3, 9, 3, 19)),
    ]
    assert [d.code for d in client.diagnostics[cell_uri(notebook, 3)]] == ["TL303"]
    # Lines added to an earlier cell move nothing in the later ones: their ranges stay in their cell.
    published.clear()
    change_cell(client, notebook, 1, "# the data\n\n" + IMPORTS, 3)
    await until_published(published, cell_uri(notebook, 3))
    assert [summary(d) for d in await settled(client, cell_uri(notebook, 3))] == [("TL303", (3, 9, 3, 32))]


async def test_running_a_cell_changes_its_metadata_and_checks_nothing_again(client, notebook):
    await initialize(client, notebook.parent)
    published = await open_notebook(client, notebook)
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(uri=notebook.as_uri(), version=2),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    data=[
                        types.NotebookCell(
                            kind=CODE,
                            document=cell_uri(notebook, 2),
                            execution_summary=types.ExecutionSummary(execution_order=1, success=True),
                        )
                    ]
                )
            ),
        )
    )
    opened = len(published)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(next_publish(client), 0.5)
    assert len(published) == opened


async def test_deleting_a_cell_clears_its_diagnostics(client, notebook):
    await initialize(client, notebook.parent)
    published = await open_notebook(client, notebook)
    published.clear()
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(uri=notebook.as_uri(), version=2),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    structure=types.NotebookDocumentCellChangeStructure(
                        array=types.NotebookCellArrayChange(start=3, delete_count=1),
                        did_close=[types.TextDocumentIdentifier(uri=cell_uri(notebook, 3))],
                    )
                )
            ),
        )
    )
    await until_published(published, cell_uri(notebook, 3))
    assert list(client.diagnostics[cell_uri(notebook, 3)]) == []
    # The loader of the third cell no longer feeds a training loop: its findings went with the loop.
    await until_published(published, cell_uri(notebook, 2))
    assert [d.code for d in await settled(client, cell_uri(notebook, 2))] == ["TL304"]


async def test_a_quick_fix_in_a_cell_edits_that_cell(client, notebook):
    await initialize(client, notebook.parent)
    await open_notebook(client, notebook)
    actions = await actions_in_cell(client, notebook, 2, 2, 20)
    assert [(a.title, a.kind) for a in actions] == [
        ("TL304: Replace with `torch.amp.GradScaler`", "quickfix"),
        ("Disable TL304 for this line", "quickfix"),
        ("torchlint: Fix all safe fixes", "notebook.source.fixAll.torchlint"),
    ]
    assert [summary(d) for d in actions[0].diagnostics] == [("TL304", (2, 9, 2, 34))]
    assert cells_edited(actions[0].edit, notebook) == {
        2: SETUP.replace("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")')
    }
    assert cells_edited(actions[1].edit, notebook) == {
        2: SETUP.replace("GradScaler()\n", "GradScaler()  # noqa: TL304\n")
    }
    # In the cell whose first line is a magic, the fix leaves the magic as it was.
    [fix] = [a for a in await actions_in_cell(client, notebook, 3, 3, 20) if a.title.startswith("TL303:")]
    assert cells_edited(fix.edit, notebook) == {
        3: LOOP.replace("torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda")')
    }
    assert await actions_in_cell(client, notebook, 0, 0, 0) == []  # the markdown cell


async def test_a_fix_that_needs_an_import_also_edits_the_cell_with_the_imports(client, notebook):
    await initialize(client, notebook.parent)
    cells = [
        (CODE, "python", "%matplotlib inline\nfrom torch.cuda.amp import GradScaler\n"),
        (CODE, "python", "scaler = GradScaler()"),
    ]
    await open_notebook(client, notebook, cells)
    [fix, _, _] = await actions_in_cell(client, notebook, 1, 0, 12)
    assert cells_edited(fix.edit, notebook, cells) == {
        0: "import torch\n%matplotlib inline\n",
        1: 'scaler = torch.amp.GradScaler("cuda")',
    }


async def test_the_notebook_fix_all_edits_every_cell_it_fixes(client, notebook):
    await initialize(client, notebook.parent)
    await open_notebook(client, notebook)
    # `source.fixAll`, which an editor asks of every cell, is not offered in a cell.
    assert await actions_in_cell(client, notebook, 2, 0, 0, only=["source.fixAll"]) == []
    [offered] = await actions_in_cell(client, notebook, 1, 0, 0, only=["notebook.source.fixAll"])
    assert offered.edit is None  # VS Code resolves it
    resolved = await client.code_action_resolve_async(offered)
    assert cells_edited(resolved.edit, notebook) == {
        2: SETUP.replace("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")'),
        3: LOOP.replace("torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda")'),
    }


async def test_hover_in_a_cell_shows_the_rule_doc(client, notebook):
    await initialize(client, notebook.parent)
    await open_notebook(client, notebook)
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=cell_uri(notebook, 3)),
            position=types.Position(line=3, character=15),
        )
    )
    assert hover.contents.value == rule_doc("TL303")
    assert (hover.range.start.line, hover.range.start.character, hover.range.end.character) == (3, 9, 32)


async def test_ranges_and_edits_count_utf16_units_in_the_cell(client, notebook):
    await initialize(client, notebook.parent)
    cells = [
        (CODE, "python", "import torch\n"),
        (CODE, "python", 'print("🔥"); scaler = torch.cuda.amp.GradScaler()'),
    ]
    await open_notebook(client, notebook, cells)
    [diagnostic] = client.diagnostics[cell_uri(notebook, 1)]
    assert summary(diagnostic) == ("TL304", (0, 22, 0, 47))  # the emoji is two UTF-16 units
    [fix, _, _] = await actions_in_cell(client, notebook, 1, 0, 30)
    assert cells_edited(fix.edit, notebook, cells) == {
        1: 'print("🔥"); scaler = torch.amp.GradScaler("cuda")'
    }


async def test_closing_the_notebook_clears_every_cell(client, notebook):
    await initialize(client, notebook.parent)
    published = await open_notebook(client, notebook)
    published.clear()
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=notebook.as_uri()),
            cell_text_documents=[types.TextDocumentIdentifier(uri=cell_uri(notebook, i)) for i in range(4)],
        )
    )
    for index in (1, 2, 3):
        await until_published(published, cell_uri(notebook, index))
        assert list(client.diagnostics[cell_uri(notebook, index)]) == []
