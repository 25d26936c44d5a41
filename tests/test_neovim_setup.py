"""The Neovim set-ups of docs/editors.md, run in a real headless Neovim against this checkout's `torchlint
lsp`. Each snippet is read from the doc itself, so that a set-up the doc shows cannot stop working unseen;
the diagnostics Neovim ends up holding must be the ones `torchlint check` reports for the same file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
from support import FIXTURES, REPO

NVIM = shutil.which("nvim")
pytestmark = pytest.mark.skipif(
    NVIM is None, reason="Neovim (`nvim`) is not installed: `apt-get install neovim` runs these tests"
)
SCRIPTS = Path(sysconfig.get_path("scripts"))  # this environment's `torchlint`, which Neovim must start
TRAIN = FIXTURES / "image_classifier" / "train.py"
TRAIN_CODES = ["TL101", "TL205", "TL205", "TL303", "TL303", "TL304"]
SEVERITIES = {"error": 1, "warning": 2}  # vim.diagnostic.severity

# Opens each file named on the command line in turn, waits until torchlint's diagnostics for it arrive,
# then writes them, the language clients running and Neovim's messages (what a failure needs) as JSON.
COLLECT = """
local function torchlint_diagnostics(bufnr)
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.source == "torchlint" then
      table.insert(found, {
        code = d.code or d.user_data.lsp.code,
        range = { d.lnum, d.col, d.end_lnum, d.end_col },
        message = d.message,
        severity = d.severity,
      })
    end
  end
  return found
end

local files = {}
for index, path in ipairs(vim.fn.argv()) do
  if index > 1 then
    vim.cmd("edit " .. vim.fn.fnameescape(path))
  end
  local bufnr = vim.api.nvim_get_current_buf()
  vim.wait(15000, function() return #torchlint_diagnostics(bufnr) > 0 end, 20)
  files[vim.fn.fnamemodify(path, ":p")] = torchlint_diagnostics(bufnr)
end
local clients = {}
for _, client in ipairs((vim.lsp.get_clients or vim.lsp.get_active_clients)()) do
  table.insert(clients, { name = client.name, root_dir = client.config.root_dir })
end
local report = { files = files, clients = clients, messages = vim.fn.execute("messages") }
vim.fn.writefile({ vim.fn.json_encode(report) }, vim.env.TORCHLINT_NVIM_OUT)
vim.cmd("qall!")
"""


def nvim_version() -> tuple[int, int]:
    first = subprocess.run([NVIM, "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = re.match(r"NVIM v(\d+)\.(\d+)", first).groups()
    return int(major), int(minor)


def editors_lua_block(containing: str) -> str:
    """The one Lua block of docs/editors.md that holds `containing`: the set-up exactly as users copy it."""
    text = (REPO / "docs" / "editors.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```lua\n(.*?)```", text, re.S) if containing in b]
    assert len(blocks) == 1, f"docs/editors.md should have one Lua block with {containing!r}"
    return blocks[0]


BEFORE_0_11 = editors_lua_block("vim.lsp.start_client")
SINCE_0_11 = editors_lua_block('vim.lsp.enable("torchlint")')


def neovim_session(setup: str, files: list[Path], scratch: Path) -> dict:
    """Neovim started on `files` with `setup` as its whole configuration, no plugin, nothing of the user's
    (config, data, state and cache folders of its own), and this checkout's torchlint first on PATH."""
    init, out = scratch / "init.lua", scratch / "collected.json"
    init.write_text(setup)
    (scratch / "collect.lua").write_text(COLLECT)
    env = {
        **os.environ,
        "PATH": f"{SCRIPTS}{os.pathsep}{os.environ.get('PATH', '')}",
        "TORCHLINT_NVIM_OUT": str(out),
        **{f"XDG_{kind}_HOME": str(scratch / kind.lower()) for kind in ("CONFIG", "DATA", "STATE", "CACHE")},
    }
    command = [NVIM, "--headless", "-i", "NONE", "--noplugin", "-u", str(init), *map(str, files)]
    command += ["-c", f"luafile {scratch / 'collect.lua'}"]
    run = subprocess.run(command, env=env, cwd=scratch, capture_output=True, text=True, timeout=60)
    written = out.read_text() if out.exists() else ""
    assert written.strip(), f"Neovim wrote nothing (exit {run.returncode}): {run.stdout}{run.stderr}"
    return json.loads(written)


def cli_diagnostics(path: Path) -> list[tuple]:
    """`torchlint check --output-format json` on `path`, as Neovim holds diagnostics: 0-based lines and
    columns (the file is ASCII, so characters and bytes agree) and vim.diagnostic's severities."""
    run = subprocess.run(
        [SCRIPTS / "torchlint", "check", "--no-cache", "--output-format", "json", str(path)],
        capture_output=True,
        text=True,
        cwd=path.parent,
    )
    assert (run.returncode, run.stdout.startswith("[")) == (1, True), run.stderr
    return sorted(
        (
            f["code"],
            (f["location"]["row"] - 1, f["location"]["column"] - 1)
            + (f["end_location"]["row"] - 1, f["end_location"]["column"] - 1),
            f["message"],
            SEVERITIES[f["severity"]],
        )
        for f in json.loads(run.stdout)
    )


def neovim_diagnostics(session: dict, path: Path) -> list[tuple]:
    found = session["files"][str(path)] or []  # json_encode writes an empty table as []
    return sorted((d["code"], tuple(d["range"]), d["message"], d["severity"]) for d in found)


def training_project(root: Path, markers: dict[str, str]) -> Path:
    """The fixture training script at root/src/train.py, below `markers` (path -> "file" or "dir")."""
    for marker, kind in markers.items():
        (root / marker).parent.mkdir(parents=True, exist_ok=True)
        if kind == "dir":
            (root / marker).mkdir()
        else:
            (root / marker).write_text("[project]\nname = 'demo'\n")
    (root / "src").mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(TRAIN, root / "src" / "train.py"))


@pytest.fixture
def scratch(tmp_path):
    (tmp_path / "nvim").mkdir()
    return tmp_path / "nvim"


def test_the_setup_before_0_11_shows_the_diagnostics_of_torchlint_check(tmp_path, scratch):
    train = training_project(tmp_path / "project", {"pyproject.toml": "file"})
    session = neovim_session(BEFORE_0_11, [train], scratch)
    expected = cli_diagnostics(train)
    assert [d[0] for d in expected] == TRAIN_CODES
    assert neovim_diagnostics(session, train) == expected, session["messages"]
    assert session["clients"] == [{"name": "torchlint", "root_dir": str(tmp_path / "project")}]


@pytest.mark.parametrize(
    ("markers", "root"),
    [
        ({".git": "dir"}, "project"),
        ({".git": "dir", "src/pyproject.toml": "file"}, "project/src"),
    ],
    ids=["a git checkout", "the nearest marker"],
)
def test_the_setup_before_0_11_roots_the_server_at_the_project(tmp_path, scratch, markers, root):
    train = training_project(tmp_path / "project", markers)
    session = neovim_session(BEFORE_0_11, [train], scratch)
    assert neovim_diagnostics(session, train) != [], session["messages"]
    assert session["clients"] == [{"name": "torchlint", "root_dir": str(tmp_path / root)}]


def test_the_setup_before_0_11_runs_one_server_for_the_files_of_one_project(tmp_path, scratch):
    train = training_project(tmp_path / "project", {"pyproject.toml": "file"})
    other = Path(shutil.copy(FIXTURES / "compile_cpu" / "train.py", train.parent / "other.py"))
    session = neovim_session(BEFORE_0_11, [train, other], scratch)
    assert [d[0] for d in neovim_diagnostics(session, other)] == ["TL101", "TL301", "TL501", "TL505"], (
        session["messages"]
    )
    assert neovim_diagnostics(session, train) == cli_diagnostics(train)
    assert session["clients"] == [{"name": "torchlint", "root_dir": str(tmp_path / "project")}]


@pytest.mark.skipif(
    NVIM is not None and nvim_version() < (0, 11),
    reason="the set-up for Neovim 0.11+ (vim.lsp.config) needs Neovim 0.11+; the installed one is older",
)
def test_the_setup_since_0_11_shows_the_diagnostics_of_torchlint_check(tmp_path, scratch):
    train = training_project(tmp_path / "project", {"pyproject.toml": "file"})
    session = neovim_session(SINCE_0_11, [train], scratch)
    assert neovim_diagnostics(session, train) == cli_diagnostics(train), session["messages"]
    assert session["clients"] == [{"name": "torchlint", "root_dir": str(tmp_path / "project")}]
