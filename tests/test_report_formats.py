"""Each output format, on the same three findings, against what the format's spec says it must hold.

The expectations are written from the specs (SARIF 2.1.0, GitLab code quality, ruff's JUnit and pylint
layouts, JSON Lines), not pasted from the output; the SARIF output is also validated against the official
schema (tests/data/sarif-schema-2.1.0.json, the OASIS 2.1.0 errata01 schema)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest
from click.testing import CliRunner
from support import FIXTURES, REPO

from torchlint import __version__
from torchlint.cli import main
from torchlint.diagnostics import Applicability, Diagnostic, Edit, Fix, LineIndex, Severity
from torchlint.docs import rule_doc, rule_summary
from torchlint.report import REPORTERS
from torchlint.report.gitlab import write_gitlab
from torchlint.report.statistics import write_statistics_json

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())

TRAIN = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
DATA = (
    "from torch.utils.data import DataLoader\n"
    "a = DataLoader(ds, prefetch_factor=2)\n"
    "b = DataLoader(ds, prefetch_factor=2)\n"
)
AUTOCAST = '`torch.cuda.amp.autocast` is deprecated since torch 2.4: use `torch.amp.autocast("cuda", ...)`'
PREFETCH = "`prefetch_factor` needs workers"


def _located(d: Diagnostic, text: str) -> Diagnostic:
    return LineIndex(text).locate(d)


def findings() -> tuple[list[Diagnostic], dict[str, LineIndex]]:
    """TL303 with a safe fix in src/train.py (3:6-3:29, the edit 3:12-3:30), and two identical TL204
    errors without a fix in src/data.py (2:5-2:15 and 3:5-3:15)."""
    start = TRAIN.index("torch.cuda")
    edit = Edit(TRAIN.index("cuda.amp"), TRAIN.index("()") + 1, 'amp.autocast("cuda"')
    fix = Fix("Replace with `torch.amp.autocast`", Applicability.SAFE, (edit,))
    autocast = Diagnostic(
        "TL303", "deprecated-amp-autocast", AUTOCAST, Severity.WARNING, "src/train.py", start, start + 23, fix
    )
    loaders = [
        Diagnostic(
            "TL204",
            "dataloader-invalid-worker-options",
            PREFETCH,
            Severity.ERROR,
            "src/data.py",
            DATA.index("DataLoader", at),
            DATA.index("DataLoader", at) + 10,
        )
        for at in (DATA.index("a ="), DATA.index("b ="))
    ]
    diagnostics = [_located(d, DATA) for d in loaders] + [_located(autocast, TRAIN)]
    return diagnostics, {"src/data.py": LineIndex(DATA), "src/train.py": LineIndex(TRAIN)}


def render(name: str, diagnostics=None, sources=None) -> str:
    if diagnostics is None:
        diagnostics, sources = findings()
    out = io.StringIO()
    REPORTERS[name](diagnostics, sources or {}, out)
    return out.getvalue()


# -- pylint -------------------------------------------------------------------------------------------------


def test_pylint_is_path_line_code_message():
    assert render("pylint") == (
        f"src/data.py:2: [TL204] {PREFETCH}\nsrc/data.py:3: [TL204] {PREFETCH}\nsrc/train.py:3: [TL303] {AUTOCAST}\n"
    )
    assert render("pylint", [], {}) == ""


# -- json-lines ---------------------------------------------------------------------------------------------


def test_json_lines_is_one_json_object_per_line_with_the_json_fields():
    lines = render("json-lines").splitlines()
    assert len(lines) == 3
    assert [json.loads(line) for line in lines] == json.loads(render("json"))
    assert json.loads(lines[2])["fix"]["edits"] == [
        {
            "content": 'amp.autocast("cuda"',
            "location": {"row": 3, "column": 12},
            "end_location": {"row": 3, "column": 30},
        }
    ]
    assert render("json-lines", [], {}) == ""


# -- gitlab -------------------------------------------------------------------------------------------------


def test_gitlab_code_quality_has_the_required_fields():
    issues = json.loads(render("gitlab"))
    fingerprints = [issue.pop("fingerprint") for issue in issues]
    assert issues == [
        {
            "description": f"TL204 {PREFETCH}",
            "check_name": "TL204",
            "severity": "major",
            "location": {"path": "src/data.py", "lines": {"begin": 2, "end": 2}},
        },
        {
            "description": f"TL204 {PREFETCH}",
            "check_name": "TL204",
            "severity": "major",
            "location": {"path": "src/data.py", "lines": {"begin": 3, "end": 3}},
        },
        {
            "description": f"TL303 {AUTOCAST}",
            "check_name": "TL303",
            "severity": "minor",
            "location": {"path": "src/train.py", "lines": {"begin": 3, "end": 3}},
        },
    ]
    assert len(set(fingerprints)) == 3, "identical findings in one file still get distinct fingerprints"
    assert all(len(f) == 64 and int(f, 16) >= 0 for f in fingerprints)
    assert render("gitlab", [], {}) == "[]\n"


def test_gitlab_fingerprints_are_stable_when_lines_move():
    diagnostics, sources = findings()
    before = [issue["fingerprint"] for issue in json.loads(render("gitlab", diagnostics, sources))]
    shifted = "\n\n" + DATA
    for d in diagnostics[:2]:
        d.start, d.end = d.start + 2, d.end + 2
        LineIndex(shifted).locate(d)
    out = io.StringIO()
    write_gitlab(diagnostics, {"src/data.py": LineIndex(shifted), **sources}, out)
    moved = json.loads(out.getvalue())
    assert [issue["location"]["lines"]["begin"] for issue in moved] == [4, 5, 3]
    assert [issue["fingerprint"] for issue in moved] == before


# -- junit --------------------------------------------------------------------------------------------------


def test_junit_has_a_suite_per_file_and_a_failing_case_per_finding():
    text = render("junit")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites ')
    root = ET.fromstring(text)
    assert (root.tag, root.attrib) == (
        "testsuites",
        {"name": "torchlint", "tests": "3", "failures": "3", "errors": "0"},
    )
    suites = list(root)
    assert [(s.tag, s.attrib) for s in suites] == [
        (
            "testsuite",
            {
                "name": "src/data.py",
                "tests": "2",
                "disabled": "0",
                "errors": "0",
                "failures": "2",
                "package": "org.torchlint",
            },
        ),
        (
            "testsuite",
            {
                "name": "src/train.py",
                "tests": "1",
                "disabled": "0",
                "errors": "0",
                "failures": "1",
                "package": "org.torchlint",
            },
        ),
    ]
    cases = [(case.attrib, [(f.tag, f.attrib, f.text) for f in case]) for s in suites for case in s]
    assert cases == [
        (
            {"name": "org.torchlint.TL204", "classname": "src/data", "line": "2", "column": "5"},
            [("failure", {"message": PREFETCH}, f"line 2, col 5, {PREFETCH}")],
        ),
        (
            {"name": "org.torchlint.TL204", "classname": "src/data", "line": "3", "column": "5"},
            [("failure", {"message": PREFETCH}, f"line 3, col 5, {PREFETCH}")],
        ),
        (
            {"name": "org.torchlint.TL303", "classname": "src/train", "line": "3", "column": "6"},
            [("failure", {"message": AUTOCAST}, f"line 3, col 6, {AUTOCAST}")],
        ),
    ]


def test_junit_of_a_clean_run_is_one_passing_case():
    assert render("junit", [], {}) == (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<testsuites name="torchlint" tests="1" failures="0" errors="0">\n'
        '  <testsuite name="torchlint" tests="1" disabled="0" errors="0" failures="0" package="org.torchlint">\n'
        '    <testcase name="No errors found" classname="torchlint" />\n'
        "  </testsuite>\n"
        "</testsuites>\n"
    )


# -- sarif --------------------------------------------------------------------------------------------------


def _sarif_rule(code: str, name: str, severity: str) -> dict:
    summary = rule_summary(code)
    assert summary is not None
    return {
        "id": code,
        "name": name,
        "helpUri": f"https://docs.example/torchlint/rules/{code}.md",
        "properties": {"severity": severity},
        "shortDescription": {"text": summary.short},
        "fullDescription": {"text": summary.full},
        "help": {"text": rule_doc(code), "markdown": rule_doc(code)},
    }


def _region(start_line, start_column, end_line, end_column) -> dict:
    return {
        "startLine": start_line,
        "startColumn": start_column,
        "endLine": end_line,
        "endColumn": end_column,
    }


def _location(path: str, region: dict) -> dict:
    return {
        "physicalLocation": {"artifactLocation": {"uri": path, "uriBaseId": "%SRCROOT%"}, "region": region}
    }


def test_sarif_has_the_tool_its_rules_and_located_results_with_fixes():
    log = json.loads(render("sarif"))
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert log["version"] == "2.1.0"
    assert log["$schema"] == SCHEMA["id"]
    [run] = log["runs"]
    assert run["tool"] == {
        "driver": {
            "name": "torchlint",
            "version": __version__,
            "semanticVersion": __version__,
            "rules": [
                _sarif_rule("TL204", "dataloader-invalid-worker-options", "error"),
                _sarif_rule("TL303", "deprecated-amp-autocast", "warning"),
            ],
        }
    }
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["results"] == [
        {
            "ruleId": "TL204",
            "ruleIndex": 0,
            "level": "error",
            "message": {"text": PREFETCH},
            "locations": [_location("src/data.py", _region(2, 5, 2, 15))],
        },
        {
            "ruleId": "TL204",
            "ruleIndex": 0,
            "level": "error",
            "message": {"text": PREFETCH},
            "locations": [_location("src/data.py", _region(3, 5, 3, 15))],
        },
        {
            "ruleId": "TL303",
            "ruleIndex": 1,
            "level": "warning",
            "message": {"text": AUTOCAST},
            "locations": [_location("src/train.py", _region(3, 6, 3, 29))],
            "fixes": [
                {
                    "description": {"text": "Replace with `torch.amp.autocast`"},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"},
                            "replacements": [
                                {
                                    "deletedRegion": _region(3, 12, 3, 30),
                                    "insertedContent": {"text": 'amp.autocast("cuda"'},
                                }
                            ],
                        }
                    ],
                    "properties": {"applicability": "safe"},
                }
            ],
        },
    ]


def test_sarif_paths_outside_the_working_directory_are_file_uris_and_names_are_escaped():
    d = _located(
        Diagnostic("TL001", "syntax-error", "SyntaxError: x", Severity.ERROR, "/tmp/a b.py", 0, 0), ""
    )
    [result] = json.loads(render("sarif", [d], {}))["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "file:///tmp/a%20b.py"}
    d.path = "dir/a b#1.py"
    [result] = json.loads(render("sarif", [d], {}))["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "dir/a%20b%231.py",
        "uriBaseId": "%SRCROOT%",
    }


def test_rule_summary_reads_the_docs_what_it_does():
    summary = rule_summary("TL001")
    assert summary is not None
    assert summary.short == (
        "Reports a file that CPython cannot parse, with CPython's own message and position (what "
        "`python file.py` would say), so a broken file is never silently skipped."
    )
    assert summary.markdown.startswith("# TL001 syntax-error\n")
    assert rule_summary("TL999") is None


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_sarif_of_every_fixture_and_of_a_clean_run_validate_against_the_schema(project):
    validator = jsonschema.Draft4Validator(SCHEMA)
    result = invoke("--no-cache", "--output-format", "sarif", str(FIXTURES))
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    validator.validate(log)
    results = log["runs"][0]["results"]
    assert len(results) > 10 and any("fixes" in r for r in results)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in results)
    clean = invoke("--output-format", "sarif", ".")
    assert clean.exit_code == 0
    validator.validate(json.loads(clean.stdout))
    assert json.loads(clean.stdout)["runs"][0]["results"] == []


# -- through the command line ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REPORTERS))
def test_every_format_is_a_choice_and_machine_formats_print_no_summary(project, name):
    (project / "train.py").write_text(TRAIN)
    result = invoke("--output-format", name, "train.py")
    assert result.exit_code == 1
    summary = "Found 1 finding.\n[*] 1 fixable with the `--fix` option.\n"
    assert result.stdout.endswith(summary) == (name in ("full", "concise", "grouped"))


def test_output_file_gets_the_report_and_stdout_stays_quiet(project):
    (project / "train.py").write_text(TRAIN)
    result = invoke("--output-format", "concise", "-o", "reports/ci/torchlint.txt", "train.py")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", "")
    assert (project / "reports" / "ci" / "torchlint.txt").read_text() == (
        f"train.py:3:6: TL303 {AUTOCAST}\nFound 1 finding.\n[*] 1 fixable with the `--fix` option.\n"
    )
    assert invoke("--output-format", "sarif", "--output-file", "out.sarif", "train.py").stdout == ""
    jsonschema.Draft4Validator(SCHEMA).validate(json.loads((project / "out.sarif").read_text()))


def test_an_output_file_that_cannot_be_written_exits_two(project):
    (project / "train.py").write_text(TRAIN)
    (project / "taken").write_text("a file, not a folder")
    result = invoke("-o", "taken/report.txt", "train.py")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --output-file: taken/report.txt: ")


def test_statistics_honours_json(project):
    (project / "train.py").write_text(
        TRAIN + "s = torch.cuda.amp.GradScaler()\nt = torch.cuda.amp.GradScaler()\n"
    )
    (project / "data.py").write_text(DATA.replace("prefetch_factor", "persistent_workers=True, x"))
    result = invoke("--statistics", "--output-format", "json", ".")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == [
        {
            "code": "TL204",
            "name": "dataloader-invalid-worker-options",
            "count": 2,
            "fixable": False,
            "fixable_count": 0,
        },
        {"code": "TL304", "name": "deprecated-grad-scaler", "count": 2, "fixable": True, "fixable_count": 2},
        {"code": "TL303", "name": "deprecated-amp-autocast", "count": 1, "fixable": True, "fixable_count": 1},
    ]
    rows = (
        "2\tTL204\t[ ] dataloader-invalid-worker-options\n"
        "2\tTL304\t[*] deprecated-grad-scaler\n"
        "1\tTL303\t[*] deprecated-amp-autocast\n"
    )
    assert (
        invoke("--statistics", ".").stdout
        == rows + "Found 5 findings.\n[*] 3 fixable with the `--fix` option.\n"
    )
    assert invoke("--statistics", "-q", ".").stdout == rows
    out = io.StringIO()
    write_statistics_json([], out)
    assert out.getvalue() == "[]\n"


def test_the_schema_shipped_is_the_official_one():
    assert (
        SCHEMA["id"]
        == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    )
    assert SCHEMA["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    assert (REPO / "tests" / "data" / "sarif-schema-2.1.0.json").stat().st_size == 112768


# -- grouped and azure -------------------------------------------------------------------------------------


def test_grouped_is_the_findings_under_their_file_with_aligned_positions():
    diagnostics, sources = findings()
    late = _located(
        Diagnostic("TL303", "deprecated-amp-autocast", AUTOCAST, Severity.WARNING, "src/data.py", 0, 0),
        DATA,
    )
    late.location = late.location.__class__(12, 10)
    assert render("grouped", [*diagnostics[:2], late, diagnostics[2]], sources) == (
        "src/data.py:\n"
        f"   2:5  TL204 {PREFETCH}\n"
        f"   3:5  TL204 {PREFETCH}\n"
        f"  12:10 TL303 {AUTOCAST}\n"
        "\n"
        "src/train.py:\n"
        f"  3:6 TL303 [*] {AUTOCAST}\n"
        "\n"
    )
    assert render("grouped", [], {}) == ""


def test_azure_is_one_logging_command_per_finding(project):
    root = Path.cwd()
    assert render("azure") == (
        f"##vso[task.logissue type=error;sourcepath={root}/src/data.py;linenumber=2;columnnumber=5;code=TL204;]"
        f"{PREFETCH}\n"
        f"##vso[task.logissue type=error;sourcepath={root}/src/data.py;linenumber=3;columnnumber=5;code=TL204;]"
        f"{PREFETCH}\n"
        f"##vso[task.logissue type=warning;sourcepath={root}/src/train.py;linenumber=3;columnnumber=6;"
        f"code=TL303;]{AUTOCAST}\n"
    )
    d = _located(Diagnostic("TL001", "syntax-error", "x", Severity.ERROR, "/tmp/a;b].py", 0, 0), "")
    assert "sourcepath=/tmp/a%3Bb%5D.py;" in render("azure", [d], {})


# -- colour ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "choice, environ, tty, expected",
    [
        ("auto", {}, True, True),
        ("auto", {}, False, False),
        ("auto", {"NO_COLOR": "1"}, True, False),
        ("auto", {"NO_COLOR": ""}, True, True),  # only a non-empty NO_COLOR counts (no-color.org)
        ("auto", {"FORCE_COLOR": "1"}, False, True),
        ("auto", {"TERM": "dumb"}, True, False),
        ("always", {"NO_COLOR": "1"}, False, True),
        ("never", {"FORCE_COLOR": "1"}, True, False),
    ],
)
def test_colour_follows_the_choice_the_terminal_and_no_color(choice, environ, tty, expected):
    from torchlint.report.style import wants_color

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    assert wants_color(choice, Stream(), environ) is expected


def test_color_always_colours_the_text_formats_and_never_the_machine_ones(project):
    (project / "train.py").write_text(TRAIN)
    concise = invoke("--color", "always", "--output-format", "concise", "train.py").stdout
    assert concise.splitlines()[0] == f"\x1b[1mtrain.py\x1b[0m:3:6: \x1b[1;31mTL303\x1b[0m {AUTOCAST}"
    full = invoke("--color", "always", "train.py").stdout
    assert "\x1b[1;31mTL303\x1b[0m \x1b[36m[*]\x1b[0m" in full
    assert "\x1b[" not in invoke("--color", "never", "train.py").stdout
    assert "\x1b[" not in invoke("train.py").stdout  # auto, and the test's stream is no terminal
    assert "\x1b[" not in invoke("--color", "always", "--output-format", "json", "train.py").stdout


def test_a_withheld_fix_is_a_note_apart_from_a_message_that_stays_the_same(project):
    """Issue 29 (rules declare their voice): `(no automatic fix: ...)` no longer changes the message; the
    full format shows it as a note, JSON as `note`, the concise format not at all."""
    from click.testing import CliRunner

    from torchlint.cli import main

    (project / "train.py").write_text(
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n"
        "model = DDP(torch.nn.Linear(8, 1).cuda())\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in loader:\n    optimizer.zero_grad()\n    model(x.cuda()).sum().backward()\n    optimizer.step()\n"
    )
    run = CliRunner()
    message = (
        "`model` is trained (by `torch.optim.SGD(...)`) but never compiled: `torch.compile` usually makes each "
        "training step faster on the GPU"
    )
    note = "no automatic fix: it is built and wrapped in one statement; compile the inner module before wrapping it"
    concise = run.invoke(main, ["--no-cache", "--select", "TL101", "--output-format", "concise", "train.py"])
    assert concise.stdout.splitlines()[0] == f"train.py:4:13: TL101 {message}"
    full = run.invoke(main, ["--no-cache", "--select", "TL101", "train.py"])
    assert f"  = note: {note}" in full.stdout.splitlines()
    [found] = json.loads(
        run.invoke(main, ["--no-cache", "--select", "TL101", "--output-format", "json"]).stdout
    )
    assert (found["message"], found["note"]) == (message, note)


def test_grouped_marks_only_what_fix_would_apply(project):
    """`[*]` in `grouped` follows the fix policy, as in `full`: an `unfixable` rule's safe fix is not marked."""
    from click.testing import CliRunner

    from torchlint.cli import main

    (project / "train.py").write_text("import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n")
    run = CliRunner()
    marked = run.invoke(main, ["--no-cache", "--output-format", "grouped", "train.py"]).stdout
    assert "  3:6 TL303 [*] `torch.cuda.amp.autocast` is deprecated" in marked
    (project / "pyproject.toml").write_text('[tool.torchlint]\nunfixable = ["TL303"]\n')
    unmarked = run.invoke(main, ["--no-cache", "--output-format", "grouped", "train.py"]).stdout
    assert "  3:6 TL303 `torch.cuda.amp.autocast` is deprecated" in unmarked
