"""The README's blocks that install or configure torchlint, taken from its text and run (issue 33).

How the installs run without the network. Each command runs through bash exactly as the README prints it,
in a copy of this working tree named `torchlint` (the Install section's `./torchlint`), in an environment
that keeps pip away from every index: PIP_CONFIG_FILE=/dev/null and PIP_NO_INDEX=1 (nothing is downloaded,
torch included), PIP_NO_BUILD_ISOLATION=0 (pip's inverted spelling of `--no-build-isolation`: hatchling is
not fetched into a build environment), and PYTHONPATH set to a folder of links to this test environment's
installed distributions, torchlint's and pip's own files left out. The venvs the commands create therefore
find torchlint's dependencies (libcst, click, pathspec; torch and pygls for the extras; hatchling and
editables to build) already installed, as on a machine that has them, and torchlint itself only where the
command installed it: every test checks that the torchlint that ran is the one in the venv the command
installed into. What this cannot check is pip downloading the dependencies from an index. One venv (the
quick start's `.venv`) serves every install; torchlint is uninstalled from it before each, so that each
install is seen to happen.

The pre-commit hooks from a repository are run by tests/test_pre_commit.py (the real `pre-commit try-repo`);
here the README's `repo: local` block runs with the real `pre-commit run`. GitHub Actions cannot run here:
the workflow's `run:` steps run in order, as the job would.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from readme_blocks import Block, blocks_in
from support import REPO

import torchlint

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the dependency torchlint reads TOML with
    import tomli as tomllib

VERSION = torchlint.__version__
DEPRECATED = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
PIPX_OFFLINE = (
    "pipx cannot install without an index: before any install it upgrades its shared libraries' pip from one "
    "(pipx 1.18 asks for pip>=26.1), and this test lets pip reach none; the line installs the same checkout "
    "as the pip lines, which run"
)


def commands(block: Block) -> list[str]:
    """A bash block's commands, one a line (bash itself drops the trailing `# comments`)."""
    return [line for line in block.text.splitlines() if line.strip()]


def run_bash(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def copy_of_this_working_tree(target: Path) -> Path:
    """Tracked files and untracked ones git does not ignore: the checkout a user has, with today's changes."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():  # a file deleted but not yet staged is listed too
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target / name)
    return target


def own_top_level_names(distribution: str) -> set[str]:
    files = importlib.metadata.distribution(distribution).files or []
    return {f.parts[0] for f in files if f.parts[0] != ".."}


def installed_dependencies(target: Path) -> Path:
    """Links to this environment's site-packages entries but torchlint's (its editable hook included: the
    venvs must get torchlint from the command under test) and pip's (each venv runs its own)."""
    site_packages = Path(sysconfig.get_paths()["purelib"])
    left_out = own_top_level_names("torchlint") | own_top_level_names("pip")
    for entry in site_packages.iterdir():
        if entry.name not in left_out:
            (target / entry.name).symlink_to(entry)
    return target


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    return copy_of_this_working_tree(tmp_path_factory.mktemp("user") / "torchlint")


@pytest.fixture(scope="module")
def offline(tmp_path_factory) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PIP_", "PYTHON"))}
    return {
        **env,
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",
        "PYTHONPATH": str(installed_dependencies(tmp_path_factory.mktemp("installed"))),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # its `python3`
        "TORCHLINT_NO_CACHE": "1",
    }


@pytest.fixture(scope="module")
def venv(checkout, offline) -> Path:
    """The quick start's `.venv` in the checkout (made here when the quick-start test did not run first)."""
    if not (checkout / ".venv" / "bin" / "pip").exists():
        run_bash("python3 -m venv .venv", checkout, offline)
    return checkout / ".venv"


@pytest.fixture
def activated(venv, offline) -> dict[str, str]:
    """The venv first on PATH, as `source .venv/bin/activate` leaves it, and no torchlint in it yet."""
    env = {**offline, "PATH": f"{venv / 'bin'}{os.pathsep}{offline['PATH']}"}
    run_bash("python -m pip uninstall -y -q torchlint", venv.parent, env)
    return env


def torchlint_module(venv: Path, env: dict[str, str]) -> Path:
    found = run_bash(f"{venv}/bin/python -c 'import torchlint; print(torchlint.__file__)'", venv, env)
    assert found.returncode == 0, found.stderr
    return Path(found.stdout.strip())


# -- Quick start ----------------------------------------------------------------------------------------


def test_the_first_quick_start_installs_the_checkout_and_finds_the_fixtures_findings(checkout, offline):
    [command] = commands(blocks_in("Quick start", "bash")[0])
    result = run_bash(command, checkout, offline)
    assert result.returncode == 1, result.stderr  # "It exits 1 because the fixtures contain findings"
    assert f"Successfully installed torchlint-{VERSION}\n" in result.stdout
    assert re.search(r"^Found \d+ findings\.$", result.stdout, re.MULTILINE)
    assert torchlint_module(checkout / ".venv", offline).is_relative_to(checkout / ".venv")


def test_the_second_quick_start_is_the_ci_command_and_installs_the_checkout_editable(checkout, offline):
    pytest.importorskip("editables", reason="the test extras' `editables` builds the editable install")
    [command] = commands(blocks_in("Quick start", "bash")[1])
    assert command in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command.endswith(" && .venv/bin/python -m pytest -q")
    # The suite is collected, not run: every test module imports with what the block installed, while a run
    # takes minutes and would hold this test again.
    result = run_bash(f"{command} -p no:cacheprovider --collect-only", checkout, offline)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^\d+ tests collected in ", result.stdout, re.MULTILINE)
    assert torchlint_module(checkout / ".venv", offline) == checkout / "torchlint" / "__init__.py"


# -- Install --------------------------------------------------------------------------------------------

INSTALL_LINES = commands(blocks_in("Install", "bash")[0])


def extras_requirements(line: str) -> list[str]:
    """The distributions the extras a line asks for (`'./torchlint[lsp,verify]'`) require."""
    extras = re.search(r"\[([\w,-]+)\]", line)
    optional = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    names = extras.group(1).split(",") if extras else []
    return [re.match(r"[\w.-]+", requirement).group() for name in names for requirement in optional[name]]


@pytest.mark.parametrize("line", INSTALL_LINES, ids=[" ".join(line.split()[:2]) for line in INSTALL_LINES])
def test_each_install_line_installs_a_torchlint_that_runs_with_its_rule_docs(line, checkout, venv, activated):
    if line.startswith("pipx "):
        assert "./torchlint " in line  # the checkout the pip lines install, which run
        pytest.skip(PIPX_OFFLINE)
    result = run_bash(line, checkout.parent, activated)
    assert result.returncode == 0, result.stdout + result.stderr
    assert shutil.which("torchlint", path=activated["PATH"]) == str(venv / "bin" / "torchlint")
    assert torchlint_module(venv, activated).is_relative_to(venv)  # a real install, not the editable copy
    rule = run_bash("torchlint rule TL303", checkout.parent, activated)
    assert rule.stdout.startswith("# TL303 deprecated-amp-autocast\n"), rule.stderr
    for requirement in extras_requirements(line):
        assert f"Requirement already satisfied: {requirement}" in result.stdout


# -- pre-commit -----------------------------------------------------------------------------------------


def pre_commit_configs() -> list[dict]:
    return [yaml.safe_load(b.text) for b in blocks_in("pre-commit", "yaml")]


def test_the_pre_commit_block_names_a_hook_this_repository_ships():
    shipped = {hook["id"] for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    [remote] = [c["repos"][0] for c in pre_commit_configs() if c["repos"][0]["repo"] != "local"]
    assert {hook["id"] for hook in remote["hooks"]} <= shipped


def git_repository_with_a_finding(work: Path) -> Path:
    """A training script with a finding, and the same script in a folder the config excludes."""
    (work / "generated").mkdir(parents=True)
    (work / "pyproject.toml").write_text("[tool.torchlint]\nextend-exclude = ['generated/']\n")
    (work / "train.py").write_text(DEPRECATED)
    (work / "generated" / "gen.py").write_text(DEPRECATED)
    return work


def test_the_local_pre_commit_hook_runs_the_installed_torchlint_on_the_staged_files(tmp_path):
    [local] = [b.text for b in blocks_in("pre-commit", "yaml") if "repo: local" in b.text]
    work = git_repository_with_a_finding(tmp_path / "work")
    (work / ".pre-commit-config.yaml").write_text(local)
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    env = {
        **{k: v for k, v in os.environ.items() if k != "PRE_COMMIT"},
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "TORCHLINT_NO_CACHE": "1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^torchlint\.+Failed$", result.stdout, re.MULTILINE)
    assert "\ntrain.py:3:6: TL303 [*] `torch.cuda.amp.autocast` is deprecated" in result.stdout
    assert "gen.py" not in result.stdout  # `--force-exclude` in the entry


# -- GitHub Actions -------------------------------------------------------------------------------------


def workflow() -> dict:
    [block] = blocks_in("GitHub Actions", "yaml")
    return yaml.safe_load(block.text)


def test_the_workflow_installs_a_checkout_as_the_install_section_does_and_uploads_what_it_wrote():
    steps = workflow()["jobs"]["torchlint"]["steps"]
    runs = [step["run"] for step in steps if "run" in step]
    install = re.fullmatch(r"pip install (\S+)", runs[0])
    assert install and install.group(1).endswith("/torchlint")
    assert any(line.startswith("pip install '") and "/torchlint[" in line for line in INSTALL_LINES)
    sarif_step = next(step for step in steps if "--output-format sarif" in step.get("run", ""))
    upload = steps[-1]
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert f"--output-file {upload['with']['sarif_file']} " in sarif_step["run"]
    assert sarif_step["if"] == upload["if"] == "always()"  # the SARIF goes up when findings fail the job


def test_the_workflow_run_steps_install_annotate_and_write_sarif(tmp_path, checkout, activated):
    repository = git_repository_with_a_finding(tmp_path / "repository")
    (repository / "tools").mkdir()
    (repository / "tools" / "torchlint").symlink_to(checkout)  # a link out of the tree: never walked
    steps = [step["run"] for step in workflow()["jobs"]["torchlint"]["steps"] if "run" in step]
    install, annotate, sarif = (run_bash(step, repository, activated) for step in steps)
    assert install.returncode == 0, install.stdout + install.stderr
    assert shutil.which("torchlint", path=activated["PATH"]) == str(checkout / ".venv" / "bin" / "torchlint")
    assert annotate.returncode == 1, annotate.stderr
    assert annotate.stdout.startswith(
        "::warning file=train.py,line=3,col=6,endLine=3,endColumn=29,title=torchlint (TL303)::TL303 "
    )
    assert annotate.stdout.count("\n") == 1
    assert sarif.returncode == 0, sarif.stderr
    written = json.loads((repository / "torchlint.sarif").read_text())
    assert written["version"] == "2.1.0"
    assert [r["ruleId"] for r in written["runs"][0]["results"]] == ["TL303"]


# -- Configuration --------------------------------------------------------------------------------------


def configuration_block() -> str:
    [block] = blocks_in("Configuration", "toml")
    return block.text


def as_torchlint_toml(pyproject_text: str) -> str:
    """The same settings at top level, as the README says a `torchlint.toml` holds them."""
    text = re.sub(r"^\[tool\.torchlint\]\n", "", pyproject_text, flags=re.MULTILINE)
    return text.replace("[tool.torchlint.", "[")


def as_shown(key: str, value) -> str:
    """How `--show-settings` prints a setting's value."""
    if key == "torch-version":
        return repr(tuple(int(part) for part in value.split(".")))
    if key == "per-file-ignores":
        return repr(tuple((glob, tuple(codes)) for glob, codes in value.items()))
    return repr(tuple(value) if isinstance(value, list) else value)


@pytest.fixture(params=["pyproject.toml", "torchlint.toml"])
def configured(request, tmp_path) -> Path:
    """A project configured by the README's block: a script with findings, and the same findings where the
    settings silence them (tests/, generated/, an API the declared torch lacks, an ignored rule)."""
    text = configuration_block()
    (tmp_path / request.param).write_text(
        text if request.param == "pyproject.toml" else as_torchlint_toml(text)
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "generated").mkdir()
    train = (
        DEPRECATED
        + "\n\n@torch.cuda.amp.custom_fwd\ndef f(x):\n    return x\n\n\nscaler = torch.cuda.amp.GradScaler()\n"
    )
    (tmp_path / "train.py").write_text(train)
    (tmp_path / "tests" / "test_amp.py").write_text(DEPRECATED)
    (tmp_path / "generated" / "gen.py").write_text(DEPRECATED)
    return tmp_path


def torchlint_in(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchlint", "--no-cache", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_key_of_the_configuration_block_is_read_as_written(configured):
    settings = tomllib.loads(configuration_block())["tool"]["torchlint"]
    shown = torchlint_in(configured, "--show-settings", "train.py")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1] == f"Settings path: {next(configured.glob('*.toml'))}"
    assert [key for key, value in settings.items() if f"{key} = {as_shown(key, value)}" not in lines] == []
    assert "TL304" not in next(line for line in lines if line.startswith("enabled rules = "))


def test_the_configuration_block_silences_what_it_says(configured):
    assert torchlint_in(configured, "--output-format", "concise", "-q", ".").stdout == (
        "train.py:3:6: TL303 `torch.cuda.amp.autocast` is deprecated since torch 2.4: use "
        '`torch.amp.autocast("cuda", ...)`\n'
    )
    without = torchlint_in(configured, "--isolated", "--output-format", "concise", "-q", ".").stdout
    assert [line.split(": ")[0:2] for line in without.splitlines()] == [
        ["generated/gen.py:3:6", "TL303 `torch.cuda.amp.autocast` is deprecated since torch 2.4"],
        ["tests/test_amp.py:3:6", "TL303 `torch.cuda.amp.autocast` is deprecated since torch 2.4"],
        ["train.py:3:6", "TL303 `torch.cuda.amp.autocast` is deprecated since torch 2.4"],
        ["train.py:7:2", "TL303 `torch.cuda.amp.custom_fwd` is deprecated since torch 2.4"],
        ["train.py:12:10", "TL304 `torch.cuda.amp.GradScaler` is deprecated since torch 2.4"],
    ]


RUFF_FIX = [sys.executable, "-m", "ruff", "check", "--no-cache", "--fix", "--extend-select", "RUF100,RUF102"]


def test_the_ruff_block_keeps_ruff_from_deleting_torchlint_noqa_comments(tmp_path):
    [block] = blocks_in("Next to ruff", "toml")
    suppressed = "import torch\n\nscaler = torch.cuda.amp.GradScaler()  # noqa: TL304\n"

    def after_ruff_fix(config: str) -> str:
        (tmp_path / "pyproject.toml").write_text(config)
        (tmp_path / "train.py").write_text(suppressed)
        subprocess.run(RUFF_FIX, cwd=tmp_path, capture_output=True)
        return (tmp_path / "train.py").read_text()

    assert after_ruff_fix("[project]\nname = 'demo'\n") == suppressed.replace("  # noqa: TL304", "")
    assert after_ruff_fix(block.text) == suppressed
