"""The subcommands a ruff user reaches for: `rule --all`, `linter`, `config [KEY]`, `clean`, `version`."""

from __future__ import annotations

import json

from click.testing import CliRunner
from support import RULE_DOCS

from torchlint import __version__
from torchlint.cli import main
from torchlint.rules.base import registered_rules

RULES = registered_rules()


def invoke(*args: str, **kwargs):
    return CliRunner().invoke(main, list(args), catch_exceptions=False, **kwargs)


def test_rule_all_prints_every_doc_in_code_order():
    result = invoke("rule", "--all")
    assert result.exit_code == 0
    from torchlint.docs import rule_doc

    docs = [(rule_doc(code) or "").rstrip("\n") for code in RULES]  # the docs as readers get them
    assert result.stdout == "\n\n".join(docs) + "\n"
    assert [line for line in result.stdout.splitlines() if line.startswith("# TL")] == [
        (RULE_DOCS / f"{code}.md").read_text(encoding="utf-8").splitlines()[0] for code in RULES
    ]


def test_rule_as_json_has_ruffs_fields():
    from torchlint.docs import rule_doc

    entry = json.loads(invoke("rule", "TL003", "--output-format", "json").stdout)
    assert entry == {
        "name": "unused-noqa",
        "code": "TL003",
        "linter": "torchlint",
        "summary": entry["summary"],
        "message_formats": [],  # raised by the pipeline, which words it (a rule's own are its templates)
        "fix": "Fix is always available.",
        "fix_availability": "Always",
        "explanation": rule_doc("TL003"),  # without the examples' test markers
        "severity": "warning",
        "url": "https://docs.example/torchlint/rules/TL003.md",
    }
    assert entry["summary"].startswith("Finds the torchlint codes in a `# noqa: ...` comment")
    every = json.loads(invoke("rule", "--all", "--output-format", "json").stdout)
    assert [e["code"] for e in every] == list(RULES)
    assert next(e for e in every if e["code"] == "TL505")["message_formats"] == [
        "`{callee}(...)` updates parameters on the GPU without `fused=True`: torch's default multi-tensor "
        "{optimizer} launches several kernels per step where the fused one launches one per group of tensors"
    ]
    assert {e["fix"] for e in every} == {
        "Fix is not available.",
        "Fix is sometimes available.",
        "Fix is always available.",
    }


def test_rule_needs_a_code_or_all():
    for args in ([], ["TL303", "--all"]):
        result = invoke("rule", *args)
        assert (result.exit_code, result.stderr) == (2, "error: `torchlint rule` takes a CODE or --all\n")


def test_linter_lists_the_families_with_their_prefixes_and_rules():
    lines = invoke("linter").stdout.splitlines()
    assert lines[:2] == [
        "TL0 torchlint (TL001, TL002, TL003)",
        "TL1 compile (TL101, TL102, TL103, TL104, TL105, TL106, TL107)",
    ]
    assert (
        "TL6 distributed (TL601, TL602)" in lines
        and "TL5 tuning guide (TL501, TL502, TL503, TL504, TL505, TL506, TL507, TL508)" in lines
    )
    families = json.loads(invoke("linter", "--output-format", "json").stdout)
    assert [f["prefix"] for f in families] == ["TL0", "TL1", "TL2", "TL3", "TL4", "TL5", "TL6"]
    assert sorted(code for f in families for code in f["rules"]) == sorted(RULES)


def test_config_lists_the_keys_and_explains_one():
    keys = invoke("config").stdout.splitlines()
    assert keys[0] == "select" and "torch-version" in keys and "device" in keys
    result = invoke("config", "unsafe-fixes")
    assert result.stdout == (
        "Let `--fix` apply unsafe fixes, as if `--unsafe-fixes` were given.\n\nDefault value: false\n"
        "Type: true or false\n"
    )
    unknown = invoke("config", "ignor")
    assert unknown.exit_code == 2
    assert unknown.stderr.startswith("error: unknown setting 'ignor' (known: select, extend-select, ")


def test_every_config_key_is_explained():
    from torchlint.workspace.settings import _KEYS, KEY_DOCS

    assert set(KEY_DOCS) == set(_KEYS)


def test_clean_removes_the_caches_below_and_nothing_else(project, tmp_path_factory):
    (project / "train.py").write_text("import torch\n")
    (project / "sub").mkdir()
    (project / "sub" / "pyproject.toml").write_text("")
    (project / "sub" / "a.py").write_text("import torch\n")
    assert invoke("-q", ".").exit_code == 0
    assert invoke("-q", "sub").exit_code == 0
    assert (project / ".torchlint_cache").is_dir() and (project / "sub" / ".torchlint_cache").is_dir()
    custom = tmp_path_factory.mktemp("custom")
    assert invoke("--cache-dir", str(custom), "-q", ".").exit_code == 0
    keep = tmp_path_factory.mktemp("keep")
    (keep / "precious.txt").write_text("not a cache")
    result = invoke("clean", "--cache-dir", str(keep))
    assert result.exit_code == 0
    assert result.stderr == "Removing cache at: .torchlint_cache\nRemoving cache at: sub/.torchlint_cache\n"
    assert not (project / ".torchlint_cache").exists() and not (project / "sub" / ".torchlint_cache").exists()
    assert (keep / "precious.txt").exists()  # no CACHEDIR.TAG of ours: not a cache
    custom_clean = invoke("clean", env={"TORCHLINT_CACHE_DIR": str(custom)})
    assert custom_clean.stderr == f"Removing cache at: {custom}\n"
    assert not custom.exists()
    assert (project / "train.py").exists()


def test_version_subcommand():
    assert invoke("version").stdout == f"torchlint {__version__}\n"
    assert json.loads(invoke("version", "--output-format", "json").stdout) == {"version": __version__}
