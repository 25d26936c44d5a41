"""Selection and files on the command line, as in ruff: --extend-ignore, --per-file-ignores, --exclude,
--extend-exclude, --respect-gitignore, --torch-version, --config KEY=VALUE, --isolated, --cache-dir, and
`.pyi` files in folder walks."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from torchlint.cli import main

# TL304 (needs torch 2.3) on line 2, TL303 on line 3.
TRAIN = "import torch\ns = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    pass\n"


def invoke(*args: str):
    return CliRunner().invoke(main, ["--no-cache", *args], catch_exceptions=False)


def found(*args: str) -> list[tuple[str, str]]:
    """(file, code) of every finding, as the json format gives them."""
    result = invoke("--output-format", "json", *args)
    assert result.exit_code in (0, 1), result.output
    return [(d["filename"], d["code"]) for d in json.loads(result.stdout)]


@pytest.fixture
def tree(project):
    (project / "train.py").write_text(TRAIN)
    (project / "tests").mkdir()
    (project / "tests" / "test_train.py").write_text(TRAIN)
    return project


def test_extend_ignore_adds_to_the_configs_ignore(tree):
    (tree / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL304"]\n')
    assert found("--extend-ignore", "TL303", "train.py") == []
    assert found("train.py") == [("train.py", "TL303")]


def test_per_file_ignores_replace_and_extend_per_file_ignores_add(tree):
    (tree / "pyproject.toml").write_text('[tool.torchlint.per-file-ignores]\n"tests/**" = ["TL3"]\n')
    assert found() == [("train.py", "TL304"), ("train.py", "TL303")]
    assert found("--per-file-ignores", "train.py:TL304") == [
        ("tests/test_train.py", "TL304"),
        ("tests/test_train.py", "TL303"),
        ("train.py", "TL303"),
    ]
    assert found("--extend-per-file-ignores", "train.py:TL304,TL303") == []


def test_per_file_ignores_needs_pattern_and_codes(tree):
    result = invoke("--per-file-ignores", "train.py")
    assert result.exit_code == 2
    assert "expected PATTERN:CODES (e.g. 'tests/**:TL3'), got 'train.py'" in result.stderr
    unknown = invoke("--per-file-ignores", "train.py:TL999")
    assert (unknown.exit_code, unknown.stderr) == (
        2,
        "error: --per-file-ignores: 'train.py': unknown rule code 'TL999'\n",
    )


def test_exclude_replaces_and_extend_exclude_adds(tree):
    (tree / "pyproject.toml").write_text('[tool.torchlint]\nexclude = ["tests"]\n')
    assert {f for f, _ in found()} == {"train.py"}
    assert {f for f, _ in found("--exclude", "train.py")} == {"tests/test_train.py"}
    assert found("--extend-exclude", "train.py") == []
    assert {f for f, _ in found("--exclude", "nothing,other")} == {"train.py", "tests/test_train.py"}


def test_respect_gitignore_can_be_turned_off_and_on(tree):
    (tree / ".git").mkdir()
    (tree / ".gitignore").write_text("tests/\n")
    assert {f for f, _ in found()} == {"train.py"}
    assert {f for f, _ in found("--no-respect-gitignore")} == {"train.py", "tests/test_train.py"}
    (tree / "pyproject.toml").write_text("[tool.torchlint]\nrespect-gitignore = false\n")
    assert {f for f, _ in found("--respect-gitignore")} == {"train.py"}


def test_torch_version_overrides_the_config(tree):
    (tree / "pyproject.toml").write_text('[tool.torchlint]\ntorch-version = "2.4"\n')
    assert found("train.py") == [("train.py", "TL304"), ("train.py", "TL303")]
    assert found("--torch-version", "2.2", "train.py") == [("train.py", "TL303")]  # GradScaler: 2.3
    bad = invoke("--torch-version", "two")
    assert bad.exit_code == 2
    assert """expected a version like "2.1", got 'two'""" in bad.stderr


def test_config_key_value_overrides_one_setting(tree):
    assert found("--config", 'ignore = ["TL303"]', "train.py") == [("train.py", "TL304")]
    two = found("--config", 'torch-version = "2.2"', "--config", "select = ['TL30']", "train.py")
    assert two == [("train.py", "TL303")]


@pytest.mark.parametrize(
    "value, error",
    [
        (
            "ignor = 1",
            "error: --config ignor: unknown key (known: device, exclude, exit-non-zero-on-info, extend, "
            "extend-exclude, extend-fixable, extend-include, extend-select, fixable, ignore, include, per-file-ignores, "
            "respect-gitignore, rule-options, select, torch-version, unfixable, unsafe-fixes)\n",
        ),
        ('ignore = "TL303"', "error: --config ignore: expected list of rule codes, got 'TL303'\n"),
        ('ignore = ["TL999"]', "error: --config ignore: unknown rule code 'TL999'\n"),
        ("ignore = [", "error: --config: invalid TOML: Invalid value (at end of document)\n"),
    ],
)
def test_a_bad_config_override_exits_two_naming_it(tree, value, error):
    result = invoke("--config", value)
    assert (result.exit_code, result.stderr) == (2, error)


def test_config_takes_one_file_and_still_reads_it(tree):
    (tree / "ci.toml").write_text('ignore = ["TL3"]\n')
    assert found("--config", "ci.toml") == []
    assert found("--config", "ci.toml", "--config", "extend-select = ['TL304']") == [
        ("tests/test_train.py", "TL304"),
        ("train.py", "TL304"),
    ]
    two = invoke("--config", "ci.toml", "--config", "pyproject.toml")
    assert two.exit_code == 2
    assert two.stderr == "error: --config: only one config file can be given, got ci.toml, pyproject.toml\n"


def test_isolated_reads_no_config(tree):
    (tree / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL3"]\n')
    assert found("train.py") == []
    assert found("--isolated", "train.py") == [("train.py", "TL304"), ("train.py", "TL303")]
    assert found("--isolated", "--config", "ignore = ['TL303']", "train.py") == [("train.py", "TL304")]
    refused = invoke("--isolated", "--config", "pyproject.toml")
    assert (refused.exit_code, refused.stderr) == (
        2,
        "error: --config pyproject.toml: a config file cannot be used with --isolated\n",
    )


def test_cache_dir_holds_the_cache_instead_of_the_project_root(tree, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("cache")
    runner = CliRunner()
    first = runner.invoke(main, ["--cache-dir", str(elsewhere), "-q", "train.py"])
    assert first.exit_code == 1
    assert not (tree / ".torchlint_cache").exists()
    assert (elsewhere / "results").is_dir() and (elsewhere / "runs").is_dir()
    assert (elsewhere / "CACHEDIR.TAG").is_file()
    second = runner.invoke(
        main, ["-q", "--show-phase2-count", "train.py"], env={"TORCHLINT_CACHE_DIR": str(elsewhere)}
    )
    assert second.stdout == first.stdout
    assert "(replayed)" in second.stderr


def test_folder_walks_check_stub_files(project):
    (project / "train.pyi").write_text("import torch\ndef make() -> torch.cuda.amp.GradScaler: ...\n")
    (project / "notes.txt").write_text("torch.cuda.amp.GradScaler\n")
    assert found(".") == [("train.pyi", "TL304")]
