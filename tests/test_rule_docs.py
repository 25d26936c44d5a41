"""The rule docs are tests. Every fenced python block of a rule doc is checked, each on its own:

- Example: the rule fires on exactly the lines that end in an `# error` marker (and on no other line); every
  Example block has at least one. A marker may say more, after a colon: the 1-based columns where that
  line's findings start (`# error: 12`, or `# error: 12, 30` for two findings), and the applicability every
  finding of the line carries (`# error: fix: unsafe`, `# error: 12, fix: safe`; `fix: none` = no fix).
  Without them only the line is checked. A malformed marker fails the test.
- Use instead and Not flagged (an optional section after Use instead: deliberate negatives such as
  user-controlled values or evaluation loaders): the rule does not fire, and there is no marker.
- Pairing: for a rule with a fix, Example block i, its markers stripped and fixed with unsafe fixes on, equals
  Use instead block i, for each i where both exist, but only when every finding of Example block i carries an
  applicable fix (safe or unsafe). So a doc lists its fixable Example blocks first, each with its Use instead
  block at the same position, and ends with the Example blocks that are reported without a fix.

The README's rule table is checked against `torchlint rules`, and its fix column against the docs' Examples.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from support import (
    REPO,
    RULE_DOCS,
    Marker,
    applicability,
    doc_sections,
    error_markers,
    fix,
    lint,
    python_blocks,
    strip_error_markers,
)

from torchlint.cli import main
from torchlint.docs import rule_doc
from torchlint.rules.base import registered_rules

RULES = registered_rules()
REQUIRED_SECTIONS = ["What it does", "Why it matters", "Example", "Use instead", "Fix safety", "Options"]
OPTIONAL_SECTIONS = {"Not flagged": "Use instead"}  # optional section -> the section it follows
APPLIED = {"safe", "unsafe"}  # what `fix(..., unsafe=True)` applies
# The settings a doc's examples assume, as its "What it does" says (a rule for projects on an older torch).
DOC_SETTINGS = {"TL107": {"torch_version": (2, 5)}}


def lint_doc(block: str, code: str):
    return lint(block, select=(code,), **DOC_SETTINGS.get(code, {}))


def test_every_rule_has_a_doc_and_every_doc_a_rule():
    documented = {path.stem for path in RULE_DOCS.glob("*.md")}
    assert documented == set(RULES)


@pytest.mark.parametrize("code", sorted(RULES))
def test_doc_has_title_and_all_sections_in_order(code):
    sections = doc_sections(code)
    assert sections["title"] == f"# {code} {RULES[code].name}"
    present = [s for s in sections if s != "title"]
    expected = list(REQUIRED_SECTIONS)
    for optional, after in OPTIONAL_SECTIONS.items():
        if optional in present:
            expected.insert(expected.index(after) + 1, optional)
    assert present == expected


EXAMPLE_RULES = sorted(code for code, rule in RULES.items() if rule.has_doc_examples)
FIXABLE_RULES = [code for code in EXAMPLE_RULES if RULES[code].fix_availability.value != "none"]


def blocks(code: str, section: str) -> list[str]:
    return python_blocks(doc_sections(code).get(section, ""))


def block_cases(section: str, codes=EXAMPLE_RULES) -> list:
    return [
        pytest.param(code, index, id=f"{code}-{index + 1}")
        for code in codes
        for index in range(len(blocks(code, section)))
    ]


def test_every_documented_rule_has_an_example_and_a_use_instead():
    for code in EXAMPLE_RULES:
        assert blocks(code, "Example") and blocks(code, "Use instead"), code


def found_on_marked_lines(source: str, code: str, markers: dict[int, Marker]) -> dict[int, Marker]:
    """The findings described the way the markers describe them: per line, the start columns and the
    applicability when the marker asks for them."""
    by_line: dict[int, list] = {}
    for d in lint_doc(source, code):
        by_line.setdefault(d.location.line, []).append(d)
    described = {}
    for line, found in by_line.items():
        wanted = markers.get(line, Marker())
        columns = tuple(sorted(d.location.column for d in found)) if wanted.columns else ()
        fixes = {applicability(d) for d in found}
        fix_seen = (fixes.pop() if len(fixes) == 1 else " and ".join(sorted(fixes))) if wanted.fix else None
        described[line] = Marker(columns, fix_seen)
    return described


@pytest.mark.parametrize("code, index", block_cases("Example"))
def test_example_fires_exactly_as_marked(code, index):
    example = blocks(code, "Example")[index]
    markers = error_markers(example)
    assert markers, "an Example block marks at least one line with `# error`"
    assert found_on_marked_lines(example, code, markers) == markers


@pytest.mark.parametrize("code, index", block_cases("Use instead"))
def test_use_instead_does_not_fire(code, index):
    good = blocks(code, "Use instead")[index]
    assert error_markers(good) == {}
    assert lint_doc(good, code) == []


@pytest.mark.parametrize("code, index", block_cases("Not flagged"))
def test_not_flagged_does_not_fire(code, index):
    negative = blocks(code, "Not flagged")[index]
    assert error_markers(negative) == {}
    assert lint_doc(negative, code) == []


def paired_cases() -> list:
    return [
        pytest.param(code, index, id=f"{code}-{index + 1}")
        for code in FIXABLE_RULES
        for index in range(min(len(blocks(code, "Example")), len(blocks(code, "Use instead"))))
    ]


@pytest.mark.parametrize("code, index", paired_cases())
def test_fixed_example_is_use_instead(code, index):
    example = strip_error_markers(blocks(code, "Example")[index])
    unfixed = [d for d in lint_doc(example, code) if applicability(d) not in APPLIED]
    if unfixed:
        pytest.skip(f"Example block {index + 1} has a finding without an applicable fix: not paired")
    assert fix(example, select=(code,)) == blocks(code, "Use instead")[index]


@pytest.mark.parametrize(
    "marker, expected",
    [
        ("  # error", Marker()),
        ("  # error: 5", Marker((5,))),
        ("  # error: 5, 12", Marker((5, 12))),
        ("  # error: fix: unsafe", Marker((), "unsafe")),
        ("  # error: 5, fix: none", Marker((5,), "none")),
        ("  # error: 5, 12, fix: display-only", Marker((5, 12), "display-only")),
    ],
)
def test_a_marker_gives_the_line_and_optionally_columns_and_fix(marker, expected):
    source = f"import torch\nx = f(), g(){marker}\n"
    assert error_markers(source) == {2: expected}
    assert strip_error_markers(source) == "import torch\nx = f(), g()\n"


@pytest.mark.parametrize(
    "marker",
    [
        "x = f()  # error:5",
        "x = f()  # error: 0",
        "x = f()  # error: 12 fix: safe",
        "x = f()  # error: fix: maybe",
        "x = f()  # error: fix: safe, 12",
        "x = f()  # error: 12, 5",
        "x = f()  # error: 5, 5",
        "x = f()  # error 5",
        "x = f() # error",
        "# error",
        "x = f()  # Error",
        "x = f()  # errors",
        "x = f()  # error: 5,",
    ],
)
def test_a_malformed_marker_fails(marker):
    with pytest.raises(ValueError, match="marker"):
        error_markers(f"import torch\n{marker}\n")


# -- the README's rule table ------------------------------------------------------------------------------

_ROW = re.compile(
    r"^\| \[(TL\d{3})\]\(rules/(TL\d{3})\.md\) \| ([a-z0-9-]+) \| ([a-z ]+) \| ([a-z(), ]+) \|$"
)
_FIX = re.compile(r"(always|sometimes|none)(?: \(([a-z-]+(?: or [a-z-]+)*)\))?")


def readme_table() -> list[tuple[str, ...]]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Rules\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| [")]
    rows = []
    for line in lines:
        match = _ROW.match(line)
        assert match, f"malformed README table row: {line!r}"
        code, linked, name, family, fix_column = match.groups()
        assert linked == code, line
        rows.append((code, name, family, fix_column))
    return rows


def test_readme_rule_table_matches_torchlint_rules():
    result = CliRunner().invoke(main, ["rules"])
    assert result.exit_code == 0, result.output
    header, *printed = result.output.splitlines()
    assert re.split(r"\s{2,}", header) == ["code", "name", "family", "fix"]
    expected = [tuple(re.split(r"\s{2,}", line)) for line in printed]
    readme = [
        (code, name, family, _FIX.fullmatch(fix_column).group(1))
        for code, name, family, fix_column in readme_table()
    ]
    assert readme == expected


@pytest.mark.parametrize("code, name, family, fix_column", readme_table())
def test_readme_fix_column_names_the_applicabilities_the_examples_show(code, name, family, fix_column):
    match = _FIX.fullmatch(fix_column)
    assert match, (
        f"{code}: the fix column is `none`, or `always`/`sometimes` with `(safe or unsafe)`: {fix_column!r}"
    )
    availability, listed = match.groups()
    assert (availability == "none") == (listed is None), fix_column
    shown = {
        applicability(d)
        for block in blocks(code, "Example")
        for d in lint_doc(block, code)
        if applicability(d) != "none"
    }
    if RULES[code].has_doc_examples:
        assert set(listed.split(" or ") if listed else ()) == shown


def test_torchlint_rule_prints_the_doc_from_the_package():
    written = (RULE_DOCS / "TL303.md").read_text(encoding="utf-8")
    shown = rule_doc("TL303")
    assert shown is not None and shown.splitlines()[0] == written.splitlines()[0]
    assert len(shown.splitlines()) == len(written.splitlines())  # markers removed, no line dropped
