"""Jupyter notebooks (issue 32): checked, fixed and reported as ruff does, cell by cell.

The notebooks here are written as Jupyter writes them (`json.dumps(indent=1, sort_keys=True)`, sources as
lists of lines, outputs with images), and one in a compact hand-written layout, to show that only the changed
cells' `source` values are rewritten.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from support import FIXTURES

from torchlint.cli import main
from torchlint.workspace.notebook import Notebook, join_cells, split_cells

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

SETUP = [
    "%matplotlib inline\n",
    "import torch\n",
    "from torch.utils.data import DataLoader, TensorDataset\n",
    "!nvidia-smi",
]
LOADER = [
    "model = torch.nn.Linear(10, 1).cuda()\n",
    "opt = torch.optim.Adam(model.parameters(), fused=True)\n",
    "data = TensorDataset(torch.randn(64, 10), torch.randn(64, 1))\n",
    "loader = DataLoader(data, batch_size=8)",
]
LOOP = [
    "for epoch in range(3):\n",
    "    for x, y in loader:\n",
    "        x, y = x.cuda(), y.cuda()\n",
    "        loss = torch.nn.functional.mse_loss(model(x), y)\n",
    "        opt.zero_grad()\n",
    "        loss.backward()\n",
    "        opt.step()",
]


def code(number: int, source: list[str], outputs: list | None = None) -> dict:
    return {
        "cell_type": "code",
        "execution_count": number,
        "metadata": {"scrolled": True},
        "outputs": outputs or [],
        "source": source,
    }


def notebook(*code_sources: list[str], language: str = "python", nbformat: int = 4) -> str:
    cells: list[dict] = [{"cell_type": "markdown", "metadata": {}, "source": ["# Train\n", "A notebook."]}]
    image = {
        "data": {"image/png": PNG, "text/plain": ["<Figure>"]},
        "metadata": {},
        "output_type": "display_data",
    }
    cells += [code(n, source, [image] if n == 1 else []) for n, source in enumerate(code_sources, 1)]
    document = {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3"}, "language_info": {"name": language}},
        "nbformat": nbformat,
        "nbformat_minor": 5,
    }
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(main, ["--no-cache", *args], input=input, catch_exceptions=False)


TL202 = (
    "TL202 `DataLoader` feeds GPU training without `pin_memory=True`: every host-to-device copy of a batch "
    "is synchronous"
)


# -- reading --------------------------------------------------------------------------------------------


def test_magics_are_masked_on_their_own_line_so_nothing_moves():
    python = join_cells(["%matplotlib inline\nimport torch\n!ls -l", "x = 1", "%%bash\necho hi"])
    assert python.splitlines() == [
        "pass  # torchlint-magic: %matplotlib inline",
        "import torch",
        "pass  # torchlint-magic: !ls -l",
        "# ---- torchlint: notebook cell boundary ----",
        "x = 1",
        "# ---- torchlint: notebook cell boundary ----",
        "# torchlint-magic: %%bash",
        "# torchlint-magic: echo hi",
    ]


def test_a_cell_that_is_python_is_never_masked():
    """A line starting with `%` inside brackets is Python (a modulo), not a magic."""
    cell = "total = (steps\n    % every)\nmodel?"
    assert join_cells(["x = (a\n     % b)\n"]) == "x = (a\n     % b)\n"
    assert join_cells([cell]).splitlines()[:2] == ["total = (steps", "    % every)"]
    assert join_cells([cell]).splitlines()[2] == "pass  # torchlint-magic: model?"


def test_a_timed_cell_stays_python_and_every_magic_comes_back_on_the_way_out():
    cells = ["%%time\nfor x in data:\n    !echo $x\n    step(x)", "y = 2\n"]
    python = join_cells(cells)
    assert "    pass  # torchlint-magic: !echo $x" in python.splitlines()
    assert split_cells(python, cells) == cells
    assert split_cells(python.replace("step(x)", "step(x, fast=True)"), cells) == [
        "%%time\nfor x in data:\n    !echo $x\n    step(x, fast=True)",
        "y = 2\n",
    ]


def test_a_fix_that_moves_a_cell_boundary_cannot_be_split_back():
    python = join_cells(["a = 1", "b = 2"])
    assert split_cells(python.replace("\n#", "\n    #"), ["a = 1", "b = 2"]) is None


def test_findings_are_located_per_cell_as_ruff_shows_them(project):
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    result = invoke("--output-format", "concise", "train.ipynb")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"train.ipynb:cell 3:4:10: {TL202}"


def test_full_output_shows_the_cell_s_own_line(project):
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    result = invoke("train.ipynb")
    assert result.stdout.splitlines()[:4] == [
        f"train.ipynb:cell 3:4:10: {TL202}",
        "  |",
        "4 | loader = DataLoader(data, batch_size=8)",
        "  |          ^^^^^^^^^^ TL202",
    ]


def test_the_fix_diff_under_help_is_numbered_in_the_cell_and_stays_in_it(project):
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    result = invoke("--unsafe-fixes", "--select", "TL202", "train.ipynb")
    assert result.stdout.splitlines()[5:12] == [
        "  = help (unsafe fix): Set `pin_memory=True`",
        "  |",
        "3 | data = TensorDataset(torch.randn(64, 10), torch.randn(64, 1))",
        "  - loader = DataLoader(data, batch_size=8)",
        "4 + loader = DataLoader(data, batch_size=8, pin_memory=True)",
        "  |",
        "  = note: This is an unsafe fix and may change runtime behavior",
    ]


def test_json_names_the_cell_and_rows_inside_it(project):
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    (project / "plain.py").write_text("import torch\nwith torch.cuda.amp.autocast():\n    pass\n")
    found = json.loads(invoke("--output-format", "json", ".").stdout)
    assert [(f["filename"], f["cell"], f["location"], f["noqa_row"]) for f in found] == [
        ("plain.py", None, {"row": 2, "column": 6}, 2),
        ("train.ipynb", 3, {"row": 4, "column": 10}, 4),
    ]
    assert found[1]["fix"]["edits"][0]["location"] == {"row": 4, "column": 39}


def test_line_annotating_formats_put_a_notebook_finding_on_line_one_and_say_the_cell(project):
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    github = invoke("--output-format", "github", "train.ipynb").stdout.splitlines()[0]
    assert github.startswith("::warning file=train.ipynb,line=1,col=1,endLine=1,endColumn=1,")
    assert github.endswith("::cell 3:4:10: " + TL202)
    pylint = invoke("--output-format", "pylint", "train.ipynb").stdout.splitlines()[0]
    assert pylint == "train.ipynb:cell 3:4: [TL202] " + TL202.removeprefix("TL202 ")


def test_the_project_s_modules_are_read_across_cells_and_files(project):
    """The model is defined in a module beside the notebook and trained in a later cell."""
    (project / "model.py").write_text(
        "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.body = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU())\n\n"
        "    def forward(self, x):\n        return self.body(x)\n"
    )
    cells = (
        ["import torch\n", "from model import Net"],
        ["net = Net().cuda()\n", "opt = torch.optim.SGD(net.parameters(), lr=0.1)"],
        [
            "for x in batches:\n",
            "    opt.zero_grad()\n",
            "    net(x.cuda()).sum().backward()\n",
            "    opt.step()",
        ],
    )
    (project / "train.ipynb").write_text(notebook(*cells))
    result = invoke("--output-format", "concise", "--select", "TL101", "train.ipynb")
    assert result.stdout.splitlines()[0].startswith("train.ipynb:cell 3:1:7: TL101 `net` is trained")


def test_noqa_in_a_cell_suppresses_its_finding(project):
    loader = [*LOADER[:-1], "loader = DataLoader(data, batch_size=8)  # noqa: TL202"]
    (project / "train.ipynb").write_text(notebook(SETUP, loader, LOOP))
    assert "TL202" not in invoke("--output-format", "concise", "train.ipynb").stdout


# -- broken notebooks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"cells": [\n  {"cell_type": "code",, }]}', "not a notebook: invalid JSON (line 2, column 24)"),
        (notebook(["x = 1"], nbformat=3), "not a notebook torchlint reads: nbformat 3, not 4"),
        ("[1, 2]", "not a notebook: no `cells` (is it nbformat 4?)"),
        ("\x00\x01binary", "not a notebook: invalid JSON (line 1, column 1)"),
    ],
)
def test_a_broken_notebook_is_a_finding_naming_it_and_the_others_are_still_checked(project, text, message):
    (project / "broken.ipynb").write_text(text)
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    result = invoke("--output-format", "concise", ".")
    assert result.exit_code == 1
    first = result.stdout.splitlines()[0]
    assert first.startswith("broken.ipynb:") and f"TL002 broken.ipynb: {message}" in first
    assert f"train.ipynb:cell 3:4:10: {TL202}" in result.stdout


def test_a_notebook_in_another_language_is_not_checked_and_says_so(project):
    (project / "analysis.ipynb").write_text(notebook(["x <- 1"], language="R"))
    result = invoke("--output-format", "concise", "analysis.ipynb")
    assert "TL002 analysis.ipynb: not checked: a notebook in R, not Python" in result.stdout
    assert "All checks passed" not in result.output


def test_a_cell_that_does_not_parse_is_a_syntax_error_in_that_cell(project):
    (project / "train.ipynb").write_text(notebook(["import torch"], ["def f(:\n", "    pass"]))
    result = invoke("--output-format", "concise", "train.ipynb")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0].startswith("train.ipynb:cell 3:1:")
    assert "TL001" in result.stdout.splitlines()[0]


# -- fixing ---------------------------------------------------------------------------------------------


def test_fix_rewrites_only_the_changed_cells_and_keeps_everything_else_byte_for_byte(project):
    original = notebook(SETUP, LOADER, LOOP)
    path = project / "train.ipynb"
    path.write_text(original)
    result = invoke("--fix", "--unsafe-fixes", "--select", "TL2", "train.ipynb")
    assert result.exit_code == 0, result.output
    fixed = path.read_text()
    expected = original.replace(
        '"loader = DataLoader(data, batch_size=8)"',
        '"loader = DataLoader(data, batch_size=8, pin_memory=True)"',
    ).replace(
        '"        x, y = x.cuda(), y.cuda()\\n"',
        '"        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)\\n"',
    )
    assert fixed == expected
    before, after = json.loads(original), json.loads(fixed)
    assert [c.get("outputs") for c in before["cells"]] == [c.get("outputs") for c in after["cells"]]
    assert invoke("--fix", "--unsafe-fixes", "--select", "TL2", "train.ipynb").exit_code == 0
    assert path.read_text() == fixed  # a second run changes nothing


def test_fix_keeps_a_compact_layout_a_string_source_and_ascii_escapes(project):
    original = (
        '{"nbformat": 4, "nbformat_minor": 2, "metadata": {"title": "caf\\u00e9"}, "cells": ['
        '{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": '
        '"import torch\\nfrom torch.utils.data import DataLoader\\nmodel = torch.nn.Linear(2, 2).cuda()\\n'
        'opt = torch.optim.SGD(model.parameters(), lr=1)\\nloader = DataLoader(ds, batch_size=4)  # caf\\u00e9"}, '
        '{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": '
        '["for x in loader:\\n", "    opt.zero_grad()\\n", "    model(x.cuda()).sum().backward()\\n", '
        '"    opt.step()\\n"]}]}'
    )
    path = project / "train.ipynb"
    path.write_text(original)
    assert invoke("--fix", "--unsafe-fixes", "--select", "TL202", "train.ipynb").exit_code == 0
    assert path.read_text() == original.replace(
        "loader = DataLoader(ds, batch_size=4)  # caf\\u00e9",
        "loader = DataLoader(ds, batch_size=4, pin_memory=True)  # caf\\u00e9",
    )


def test_diff_shows_one_diff_per_changed_cell(project):
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    result = invoke("--diff", "--unsafe-fixes", "--select", "TL202", "train.ipynb")
    assert result.exit_code == 1
    assert result.stdout == (
        "--- train.ipynb:cell 3\n"
        "+++ train.ipynb:cell 3\n"
        "@@ -1,4 +1,4 @@\n"
        " model = torch.nn.Linear(10, 1).cuda()\n"
        " opt = torch.optim.Adam(model.parameters(), fused=True)\n"
        " data = TensorDataset(torch.randn(64, 10), torch.randn(64, 1))\n"
        "-loader = DataLoader(data, batch_size=8)\n"
        "\\ No newline at end of file\n"
        "+loader = DataLoader(data, batch_size=8, pin_memory=True)\n"
        "\\ No newline at end of file\n"
    )


def test_add_noqa_writes_into_the_cell(project):
    path = project / "train.ipynb"
    path.write_text(notebook(SETUP, LOADER, LOOP))
    assert invoke("--add-noqa", "--select", "TL202", "train.ipynb").exit_code == 0
    cell = json.loads(path.read_text())["cells"][2]
    assert cell["source"][-1] == "loader = DataLoader(data, batch_size=8)  # noqa: TL202"
    assert invoke("--select", "TL202", "train.ipynb").exit_code == 0


def test_stdin_reads_a_notebook_by_its_filename_and_fixes_it(project):
    text = notebook(SETUP, LOADER, LOOP)
    checked = invoke("--output-format", "concise", "--stdin-filename", "train.ipynb", "-", input=text)
    assert checked.stdout.splitlines()[0] == f"train.ipynb:cell 3:4:10: {TL202}"
    fixed = invoke(
        "--fix", "--unsafe-fixes", "--select", "TL202", "--stdin-filename", "train.ipynb", "-", input=text
    )
    assert (
        json.loads(fixed.stdout)["cells"][2]["source"][-1]
        == "loader = DataLoader(data, batch_size=8, pin_memory=True)"
    )


def test_stdin_json_that_is_no_notebook_is_a_finding_not_a_pass(project):
    result = invoke("--output-format", "concise", "--stdin-filename", "x.ipynb", "-", input="import torch\n")
    assert result.exit_code == 1
    assert "TL002 x.ipynb: not a notebook: invalid JSON" in result.stdout
    assert "All checks passed" not in result.output


# -- which files ----------------------------------------------------------------------------------------


def test_extend_exclude_or_include_turn_notebooks_off_in_walks(project):
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    (project / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["*.ipynb"]\n')
    assert "train.ipynb" not in invoke("--show-files").stdout
    (project / "pyproject.toml").write_text('[tool.torchlint]\ninclude = ["*.py"]\n')
    assert "train.ipynb" not in invoke("--show-files").stdout
    assert invoke("--output-format", "concise", "train.ipynb").exit_code == 1  # named: always checked
    (project / "pyproject.toml").write_text(
        '[tool.torchlint]\ninclude = ["*.py"]\nextend-include = ["nb/*.ipynb"]\n'
    )
    (project / "nb").mkdir()
    (project / "nb" / "eda.ipynb").write_text(notebook(["x = 1"]))
    assert invoke("--show-files").stdout.splitlines() == [str(project / "nb" / "eda.ipynb")]


def test_force_exclude_drops_a_named_notebook_as_any_file(project):
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    (project / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["*.ipynb"]\n')
    result = invoke("--force-exclude", "train.ipynb")
    assert result.exit_code == 0
    assert "TL202" not in result.stdout


# -- the bundled fixture --------------------------------------------------------------------------------


def _run_cells(path) -> subprocess.CompletedProcess:
    """Run a notebook's code cells as IPython would, without IPython: magics are masked lines."""
    source = Notebook.parse(path.read_text(encoding="utf-8")).python()
    return subprocess.run(
        [sys.executable, "-c", source],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=120,
        env={"CUDA_VISIBLE_DEVICES": "", "PATH": "", "PYTHONWARNINGS": "ignore"},
    )


@pytest.mark.slow
def test_the_fixture_notebook_still_trains_after_fix(tmp_path):
    pytest.importorskip("torch")
    folder = tmp_path / "notebook"
    folder.mkdir()
    for name in ("train.ipynb", "model.py"):
        (folder / name).write_bytes((FIXTURES / "notebook" / name).read_bytes())
    before = _run_cells(folder / "train.ipynb")
    assert before.returncode == 0, before.stderr[-2000:]
    result = CliRunner().invoke(
        main,
        ["--no-cache", "--fix", "--unsafe-fixes", "--ignore", "TL101", str(folder)],
        catch_exceptions=False,
    )
    assert "fixed" in result.output
    after = _run_cells(folder / "train.ipynb")
    assert after.returncode == 0, after.stderr[-2000:]
    assert "last loss" in after.stdout


def test_a_fix_that_crosses_a_cell_boundary_is_not_written(project):
    """The fixed module is split at the boundary lines; one moved by a fix leaves the file as it was."""
    from torchlint.fix.write import WriteRefused, write_source
    from torchlint.workspace.source import SourceFile

    path = project / "train.ipynb"
    path.write_text(notebook(["a = 1"], ["b = 2"]))
    source = SourceFile.read(path)
    moved = source.text.replace("\n# ----", "\n    # ----")
    with pytest.raises(WriteRefused, match="a fix moved code across notebook cells"):
        write_source(source, moved)
    assert path.read_text() == notebook(["a = 1"], ["b = 2"])


def test_verify_says_it_runs_scripts_not_notebooks(project):
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    result = CliRunner().invoke(main, ["verify", "train.ipynb"])
    assert result.exit_code == 2
    assert (
        "verify runs scripts, not notebooks: export it first (`jupyter nbconvert --to script" in result.output
    )


def test_automagic_lines_are_masked_and_python_that_looks_like_them_is_not():
    """IPython runs `pip install timm` and `cd data` without `%`; `time = 5` and `ls` alone are Python."""
    python = join_cells(["pip install timm\ncd data\ntime = 5\nls\nrun(x)"])
    assert python.splitlines() == [
        "pass  # torchlint-magic: pip install timm",
        "pass  # torchlint-magic: cd data",
        "time = 5",
        "ls",
        "run(x)",
    ]


def test_jupyter_checkpoint_copies_are_not_walked(project):
    """`.ipynb_checkpoints/` holds Jupyter's autosaved copies: checked, every finding would show twice and
    `--fix` would write the copies (excluded by default, as ruff does)."""
    text = notebook(SETUP, LOADER, LOOP)
    (project / "train.ipynb").write_text(text)
    (project / ".ipynb_checkpoints").mkdir()
    (project / ".ipynb_checkpoints" / "train-checkpoint.ipynb").write_text(text)
    assert invoke("--show-files").stdout.splitlines() == [str(project / "train.ipynb")]


def test_sarif_offers_no_fix_for_a_notebook_finding(project):
    """SARIF replacements are lines of the artifact, and a notebook's lines are its JSON's: a tool applying
    a cell-relative region would corrupt the file."""
    (project / "train.ipynb").write_text(notebook(SETUP, LOADER, LOOP))
    (project / "plain.py").write_text("import torch\nwith torch.cuda.amp.autocast():\n    pass\n")
    sarif = json.loads(invoke("--output-format", "sarif", "--unsafe-fixes", ".").stdout)
    results = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: r
        for r in sarif["runs"][0]["results"]
    }
    assert "fixes" in next(r for uri, r in results.items() if uri.endswith("plain.py"))
    assert "fixes" not in next(r for uri, r in results.items() if uri.endswith("train.ipynb"))


def test_a_cell_holding_the_boundary_line_itself_is_refused_not_misplaced(project):
    """The joined module is split at torchlint's boundary lines: a cell that holds one would shift every
    later cell's positions and fixes, so the notebook is a TL002 finding instead."""
    from torchlint.positions import CELL_BOUNDARY

    (project / "odd.ipynb").write_text(notebook(["a = 1\n", CELL_BOUNDARY + "\n", "b = 2"], ["c = 3"]))
    result = invoke("--output-format", "concise", "odd.ipynb")
    assert result.stdout.splitlines()[0] == (
        "odd.ipynb:1:1: TL002 odd.ipynb: not checked: cell 2 holds torchlint's cell boundary line"
    )
