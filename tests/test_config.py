"""[tool.torchlint] is read from the nearest pyproject.toml that has it, and validated strictly."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from torchlint.cli import main

DEPRECATED = "import torch\ns = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    pass\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(DEPRECATED)
    return tmp_path


def write_config(folder, body: str) -> None:
    (folder / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.torchlint]\n" + body)


def findings(*args: str) -> list[tuple[str, str]]:
    result = CliRunner().invoke(main, ["--output-format", "json", *args], catch_exceptions=False)
    return [(d["filename"], d["code"]) for d in json.loads(result.output)]


def error_of(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 2
    return result.output.strip()


def test_select_and_ignore_from_pyproject(project):
    write_config(project, 'select = ["TL3"]\nignore = ["TL304"]\n')
    assert findings() == [("train.py", "TL303")]


@pytest.mark.parametrize(
    "body",
    [
        '[tool]\ntorchlint.ignore = ["TL304"]\n',
        '[tool."torchlint"]\nignore = ["TL304"]\n',
        'tool = { torchlint = { ignore = ["TL304"] } }\n',
    ],
)
def test_every_toml_spelling_of_the_table_is_read(project, body):
    (project / "pyproject.toml").write_text(body)
    assert findings() == [("train.py", "TL303")]


def test_an_unreadable_pyproject_is_an_error_naming_it(project, monkeypatch):
    from torchlint.workspace.fs import FileSystem

    (project / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL304"]\n')
    read_bytes = FileSystem.read_bytes

    def denied(self, path):
        if str(path).endswith("pyproject.toml"):
            raise PermissionError(13, "Permission denied")
        return read_bytes(self, path)

    monkeypatch.setattr(FileSystem, "read_bytes", denied)
    assert (
        error_of("--no-cache", ".")
        == "error: " + str(project / "pyproject.toml") + ": cannot read: Permission denied"
    )


def test_cli_select_replaces_config_select_and_ignore_adds(project):
    write_config(project, 'select = ["TL304"]\n')
    assert findings("--select", "TL303") == [("train.py", "TL303")]
    assert error_of("--ignore", "TL304").startswith("error: no rule is enabled for any file")  # none left


def test_more_specific_selector_wins(project):
    write_config(project, 'select = ["TL303"]\nignore = ["TL3"]\n')
    assert findings() == [("train.py", "TL303")]


def test_per_file_ignores_with_globs(project):
    write_config(project, '[tool.torchlint.per-file-ignores]\n"legacy/*.py" = ["TL3"]\n')
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text(DEPRECATED)
    assert findings() == [("train.py", "TL304"), ("train.py", "TL303")]


def test_nearest_pyproject_with_the_table_governs_each_file(project):
    write_config(project, 'ignore = ["TL304"]\n')
    sub = project / "sub"
    sub.mkdir()
    write_config(sub, 'ignore = ["TL303"]\n')
    (sub / "train.py").write_text(DEPRECATED)
    other = project / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text("[project]\nname = 'other'\n")  # no table: the parent's applies
    (other / "train.py").write_text(DEPRECATED)
    assert findings() == [("other/train.py", "TL303"), ("sub/train.py", "TL304"), ("train.py", "TL303")]


def test_config_option_overrides_for_every_file(project):
    write_config(project, 'ignore = ["TL304"]\n')
    (project / "strict.toml").write_text('select = ["TL304"]\n')
    assert findings("--config", "strict.toml") == [("train.py", "TL304")]


def test_torch_version_silences_rules_whose_replacement_is_newer(project):
    write_config(project, 'torch-version = "2.2"\n')
    assert findings() == [("train.py", "TL303")]


@pytest.mark.parametrize(
    "file, declaration",
    [
        ("requirements.txt", "numpy\ntorch==2.2.1\ntorchvision==0.17\n"),
        ("requirements/base.txt", "torch>=2.2,<2.5  # tested range\n"),
        ("environment.yml", "dependencies:\n  - python=3.10\n  - pytorch=2.2.0=py3.10_cuda12.1_0\n"),
        (
            "pyproject.toml",
            '[project]\nname = "demo"\n\n[project.optional-dependencies]\ngpu = ["torch==2.2.*"]\n',
        ),
        ("pyproject.toml", '[tool.poetry.dependencies]\ntorch = "^2.2"\n'),
        ("setup.py", "setup(name='demo', install_requires=['torch~=2.2.0', 'lion-pytorch==0.2'])\n"),
    ],
)
def test_a_torch_the_project_pins_in_its_dependency_files_is_its_torch_version(project, file, declaration):
    (project / file).parent.mkdir(exist_ok=True)
    (project / file).write_text(declaration)
    (project / ".git").mkdir()
    assert findings() == [("train.py", "TL303")]  # TL304's replacement needs torch 2.3
    assert findings("--isolated") == [("train.py", "TL303")]  # declared, not configured: read anyway
    assert sorted(findings("--torch-version", "2.4")) == [("train.py", "TL303"), ("train.py", "TL304")]


def test_a_lower_bound_alone_or_another_package_declares_no_torch_version(project):
    (project / ".git").mkdir()
    (project / "requirements.txt").write_text("torch>=1.8\nopen-clip-torch==2.20.0\ndiffusers[torch]==0.32\n")
    assert sorted(findings()) == [("train.py", "TL303"), ("train.py", "TL304")]


def test_a_readme_requirement_counts_when_no_dependency_file_versions_torch(project):
    (project / ".git").mkdir()
    (project / "README.md").write_text("# Demo\n\n## Requirements\n- Python 3.10\n- PyTorch 2.2\n")
    assert findings() == [("train.py", "TL303")]  # as a pin of torch 2.2 in requirements.txt would
    (project / "requirements.txt").write_text("torch>=1.8\n")  # a lower bound: the current torch, not 2.2
    assert sorted(findings()) == [("train.py", "TL303"), ("train.py", "TL304")]


def test_exclude_and_extend_exclude(project):
    (project / "generated").mkdir()
    (project / "generated" / "a.py").write_text(DEPRECATED)
    (project / "build").mkdir()
    (project / "build" / "b.py").write_text(DEPRECATED)
    assert {f for f, _ in findings()} == {"train.py", "generated/a.py"}
    write_config(project, 'extend-exclude = ["generated"]\n')
    assert {f for f, _ in findings()} == {"train.py"}
    write_config(project, 'exclude = ["train.py"]\n')
    assert {f for f, _ in findings()} == {"generated/a.py", "build/b.py"}


@pytest.mark.parametrize(
    "body, message",
    [
        ("select = [", "invalid TOML"),
        ('selct = ["TL3"]\n', "tool.torchlint.selct: unknown key"),
        ('select = "TL3"\n', "tool.torchlint.select: expected list of rule codes, got 'TL3'"),
        ('select = ["TL999"]\n', "tool.torchlint.select: unknown rule code 'TL999'"),
        ('ignore = ["XX1"]\n', "tool.torchlint.ignore: 'XX1' is not a rule code or prefix"),
        ('device = "tpu"\n', "tool.torchlint.device: expected one of 'auto', 'cuda', 'cpu', got 'tpu'"),
        (
            "torch-version = 2.1\n",
            'tool.torchlint.torch-version: expected a version string like "2.1", got 2.1',
        ),
        ("respect-gitignore = 1\n", "tool.torchlint.respect-gitignore: expected true or false, got 1"),
        (
            "[tool.torchlint.rule-options.TL999]\nx = 1\n",
            "tool.torchlint.rule-options.TL999: unknown rule code",
        ),
        (
            "[tool.torchlint.rule-options.TL303]\nx = 1\n",
            "tool.torchlint.rule-options.TL303.x: unknown option (options of TL303: none)",
        ),
        ('[tool.torchlint.per-file-ignores]\n"a.py" = "TL3"\n', "per-file-ignores.'a.py': expected a list"),
    ],
)
def test_config_errors_exit_two_naming_file_key_and_expectation(project, body, message):
    write_config(project, body)
    output = error_of()
    assert output.startswith(f"error: {project / 'pyproject.toml'}: ")
    assert message in output


def test_missing_config_file_exits_two(project):
    assert "nope.toml: config file does not exist" in error_of("--config", "nope.toml")


def test_a_broken_config_is_a_clear_error_not_a_traceback(tmp_path, monkeypatch):
    """Reliability repro M7: an exclude pattern .gitignore syntax rejects, and a pyproject.toml that is not
    UTF-8, each name the file (exit 2); a bad line in a .gitignore is skipped, as git does."""
    from click.testing import CliRunner

    from torchlint.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nexclude = ["\\\\"]\n')
    result = CliRunner().invoke(main, ["check", "--no-cache", "."])
    assert result.exit_code == 2
    assert "pyproject.toml: tool.torchlint.exclude: invalid pattern '\\\\'" in result.output
    (tmp_path / "pyproject.toml").write_bytes(b"\xff[tool.torchlint]\n")
    result = CliRunner().invoke(main, ["check", "--no-cache", "."])
    assert result.exit_code == 2 and "pyproject.toml: not UTF-8 text, which TOML requires" in result.output
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("\\\\\nb.py\n")
    (tmp_path / "b.py").write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    result = CliRunner().invoke(main, ["check", "--no-cache", "."])
    assert (result.exit_code, result.output.strip()) == (0, "All checks passed!")


def test_a_symlink_loop_is_reported_as_unreadable(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from torchlint.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "l1.py").symlink_to("l2.py")
    (tmp_path / "l2.py").symlink_to("l1.py")
    result = CliRunner().invoke(main, ["check", "--no-cache", "l1.py"])
    assert (
        result.exit_code == 1
        and "TL002 l1.py: cannot read: Too many levels of symbolic links" in result.output
    )


@pytest.mark.parametrize(
    "spec, oldest",
    [
        ("==1.10.2", (1, 10)),
        (">=1.10.1, < 1.13.0", (1, 10)),
        ("<1.13", (1, 12)),
        ("<2.0", (1, 99)),
        ("^1.5.1", (1, 5)),
        ("=1.4.0", (1, 4)),
        ("1.7.0", (1, 7)),
        (">=1.7", None),
        ("!=1.8", None),
    ],
)
def test_the_oldest_torch_a_specifier_allows(spec, oldest):
    from torchlint.workspace.declared_torch import lowest_allowed

    assert lowest_allowed(spec) == oldest
