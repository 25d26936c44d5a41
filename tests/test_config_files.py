"""Configuration files as ruff reads them: `.torchlint.toml` and `torchlint.toml` beside `pyproject.toml`
(the same keys, no `[tool]` table; in one folder the dotted name first, then `torchlint.toml`, then
`pyproject.toml`), a user-level `torchlint.toml` where no project configures torchlint, `extend` to build on
another file, and `TORCHLINT_*` environment variables for the options ruff reads from `RUFF_*`."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from torchlint.cli import main

DEPRECATED = "import torch\ns = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    pass\n"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(DEPRECATED)
    return tmp_path


def codes(*args: str) -> list[str]:
    result = CliRunner().invoke(
        main, ["--no-cache", "--output-format", "json", *args], catch_exceptions=False
    )
    assert result.exit_code in (0, 1), result.output
    return [d["code"] for d in json.loads(result.output)]


def error_of(*args: str) -> str:
    result = CliRunner().invoke(main, ["--no-cache", *args], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    return result.output.strip()


def settings_path(*args: str) -> str:
    result = CliRunner().invoke(main, ["--show-settings", *args], catch_exceptions=False)
    return next(line for line in result.output.splitlines() if line.startswith("Settings path:"))


def test_torchlint_toml_is_read_without_a_tool_table(repo):
    (repo / "torchlint.toml").write_text('ignore = ["TL304"]\n')
    assert codes() == ["TL303"]
    assert settings_path("train.py") == f"Settings path: {repo / 'torchlint.toml'}"


def test_in_one_folder_the_dotted_file_wins_then_torchlint_toml_then_pyproject(repo):
    (repo / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL303"]\n')
    (repo / "torchlint.toml").write_text('ignore = ["TL304"]\n')
    assert codes() == ["TL303"]
    (repo / ".torchlint.toml").write_text('select = ["TL304"]\n')
    assert codes() == ["TL304"]


def test_an_empty_torchlint_toml_still_configures_its_folder(repo):
    """As ruff's: its presence says "this folder is configured" (the defaults), so a parent's is not read."""
    (repo / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL303", "TL304"]\n')
    (repo / "sub").mkdir()
    (repo / "sub" / "train.py").write_text(DEPRECATED)
    (repo / "sub" / "torchlint.toml").write_text("")
    assert codes("sub") == ["TL304", "TL303"]


def test_the_nearest_folder_with_any_configuration_governs(repo):
    (repo / "torchlint.toml").write_text('ignore = ["TL304"]\n')
    (repo / "sub").mkdir()
    (repo / "sub" / "train.py").write_text(DEPRECATED)
    (repo / "sub" / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL303"]\n')
    assert codes("sub/train.py") == ["TL304"]
    assert codes("train.py") == ["TL303"]


def test_a_torchlint_toml_with_an_unknown_key_is_an_error_naming_it(repo):
    (repo / "torchlint.toml").write_text('selcet = ["TL3"]\n')
    assert error_of().startswith(f"error: {repo / 'torchlint.toml'}: selcet: unknown key")


def test_the_user_config_applies_where_no_project_configures_torchlint(repo):
    user = os.environ["XDG_CONFIG_HOME"]
    os.makedirs(os.path.join(user, "torchlint"))
    with open(os.path.join(user, "torchlint", "torchlint.toml"), "w") as handle:
        handle.write('ignore = ["TL304"]\n')
    assert codes() == ["TL303"]
    assert codes("--isolated") == ["TL304", "TL303"]
    (repo / "torchlint.toml").write_text('ignore = ["TL303"]\n')  # a project's own wins, whole
    assert codes() == ["TL304"]


def test_extend_builds_on_another_file_and_adds_extend_select(repo):
    (repo / "shared").mkdir()
    (repo / "shared" / "base.toml").write_text('select = ["TL303"]\nextend-select = ["TL101"]\n')
    (repo / "pyproject.toml").write_text(
        '[tool.torchlint]\nextend = "shared/base.toml"\nextend-select = ["TL304"]\n'
    )
    assert codes() == ["TL304", "TL303"]
    (repo / "pyproject.toml").write_text(
        '[tool.torchlint]\nextend = "shared/base.toml"\nselect = ["TL304"]\n'
    )
    assert codes() == ["TL304"]  # a key of the extending file replaces the base's


@pytest.mark.parametrize(
    "files, message",
    [
        (
            {"torchlint.toml": 'extend = "missing.toml"\n'},
            "extend: 'missing.toml': no such configuration file",
        ),
        ({"torchlint.toml": 'extend = "a.toml"\n', "a.toml": 'extend = "torchlint.toml"\n'}, "(a cycle)"),
        ({"torchlint.toml": "extend = 3\n"}, "extend: expected a path to another configuration file, got 3"),
        (
            {"torchlint.toml": 'extend = "a.toml"\n', "a.toml": 'select = ["TL999"]\n'},
            "a.toml: select: unknown rule code 'TL999'",
        ),
    ],
)
def test_a_broken_extend_is_an_error_naming_the_file(repo, files, message):
    for name, text in files.items():
        (repo / name).write_text(text)
    error = error_of()
    assert error.startswith("error: ") and message in error


def test_torchlint_output_format_from_the_environment(repo, monkeypatch):
    monkeypatch.setenv("TORCHLINT_OUTPUT_FORMAT", "concise")
    result = CliRunner().invoke(main, ["--no-cache", "train.py"], catch_exceptions=False)
    assert result.output.splitlines()[0].startswith("train.py:2:5: TL304 ")
    result = CliRunner().invoke(main, ["--no-cache", "--output-format", "json", "train.py"])
    assert json.loads(result.output)[0]["code"] == "TL304"  # the command line wins


def test_torchlint_no_cache_from_the_environment_writes_no_cache(repo, monkeypatch):
    monkeypatch.setenv("TORCHLINT_NO_CACHE", "1")
    CliRunner().invoke(main, ["train.py"], catch_exceptions=False)
    assert not (repo / ".torchlint_cache").exists()
    monkeypatch.delenv("TORCHLINT_NO_CACHE")
    CliRunner().invoke(main, ["train.py"], catch_exceptions=False)
    assert (repo / ".torchlint_cache").exists()


def test_the_shipped_json_schema_is_the_one_the_settings_make():
    """`torchlint.schema.json` (for editors: taplo, Even Better TOML) is regenerated with
    `torchlint config --schema > torchlint.schema.json` whenever a setting or a rule option changes."""
    from support import REPO

    result = CliRunner().invoke(main, ["config", "--schema"], catch_exceptions=False)
    assert result.output == (REPO / "torchlint.schema.json").read_text(encoding="utf-8")
    schema = json.loads(result.output)
    from torchlint.workspace.settings import KEY_DOCS

    assert list(schema["properties"]) == list(KEY_DOCS)
    assert schema["properties"]["rule-options"]["properties"]["TL401"]["properties"]["min-depth"] == {
        "type": "integer",
        "default": 4,
    }


def test_the_schema_accepts_a_real_configuration_and_rejects_a_typo():
    """Checked with a small validator of the schema's own subset (type, enum, pattern, items,
    properties, additionalProperties), so that no JSON-schema package is needed."""
    import re

    from support import REPO

    schema = json.loads((REPO / "torchlint.schema.json").read_text(encoding="utf-8"))

    def valid(value, shape) -> bool:
        kinds = {"array": list, "object": dict, "string": str, "boolean": bool, "integer": int}
        if "enum" in shape and value not in shape["enum"]:
            return False
        if "type" in shape and not isinstance(value, kinds[shape["type"]]):
            return False
        if "pattern" in shape and not re.search(shape["pattern"], value):
            return False
        if isinstance(value, list):
            return all(valid(item, shape.get("items", {})) for item in value)
        if isinstance(value, dict):
            props, extra = shape.get("properties", {}), shape.get("additionalProperties", True)
            for key, item in value.items():
                if key in props:
                    if not valid(item, props[key]):
                        return False
                elif extra is False or (isinstance(extra, dict) and not valid(item, extra)):
                    return False
        return True

    good = {
        "select": ["ALL"],
        "ignore": ["TL304"],
        "per-file-ignores": {"tests/**": ["TL3"]},
        "torch-version": "2.1",
        "device": "cuda",
        "rule-options": {"TL401": {"min-depth": 8}},
        "extend": "../shared.toml",
    }
    assert valid(good, schema)
    for bad in ({"selcet": ["TL3"]}, {"select": ["TL3000"]}, {"device": "gpu"}, {"torch-version": 2.1}):
        assert not valid(bad, schema), bad
