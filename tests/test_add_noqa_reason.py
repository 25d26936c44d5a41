"""`--add-noqa[=REASON]`, as ruff's: the reason, attached with `=`, follows the codes of each directive
written; the flag alone works as it always did, and the word after it is still a path."""

from __future__ import annotations

from click.testing import CliRunner

from torchlint.cli import main
from torchlint.noqa import add_noqa

DEPRECATED = "import torch\n\nwith torch.cuda.amp.autocast():\n    pass\n"
SCALER = "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n"


def invoke(*args: str):
    return CliRunner().invoke(main, ["--no-cache", *args], catch_exceptions=False)


def test_the_reason_follows_the_codes_of_each_directive_written(project):
    (project / "train.py").write_text(DEPRECATED)
    (project / "amp.py").write_text(SCALER)
    result = invoke("--add-noqa=TODO: move to torch.amp", ".")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "Added 2 noqa directives.\n")
    assert (project / "train.py").read_text() == (
        "import torch\n\nwith torch.cuda.amp.autocast():  # noqa: TL303 TODO: move to torch.amp\n    pass\n"
    )
    assert (project / "amp.py").read_text() == (
        "import torch\n\nscaler = torch.cuda.amp.GradScaler()  # noqa: TL304 TODO: move to torch.amp\n"
    )


def test_the_flag_alone_writes_no_reason_and_the_next_word_is_a_path(project):
    (project / "train.py").write_text(DEPRECATED)
    (project / "other.py").write_text(DEPRECATED)
    result = invoke("--add-noqa", "train.py")
    assert (result.exit_code, result.stderr) == (0, "Added 1 noqa directive.\n")
    assert (project / "train.py").read_text() == (
        "import torch\n\nwith torch.cuda.amp.autocast():  # noqa: TL303\n    pass\n"
    )
    assert (project / "other.py").read_text() == DEPRECATED
    assert invoke("check", "--add-noqa", "other.py").stderr == "Added 1 noqa directive.\n"


def test_an_empty_reason_is_no_reason(project):
    (project / "train.py").write_text(DEPRECATED)
    assert invoke("--add-noqa=", "train.py").exit_code == 0
    assert (project / "train.py").read_text().endswith("autocast():  # noqa: TL303\n    pass\n")


def test_a_directive_gaining_a_code_keeps_its_text_and_gets_the_reason_only_where_nothing_follows(project):
    (project / "train.py").write_text(
        "import torch\n\n"
        "with torch.cuda.amp.autocast():  # noqa: E501\n    pass\n"
        "with torch.cuda.amp.autocast():  # noqa: E501 - a long line\n    pass\n"
        "with torch.cuda.amp.autocast():  # noqa: E501  # type: ignore\n    pass\n"
    )
    result = invoke("--add-noqa=legacy", "train.py")
    assert (result.exit_code, result.stderr) == (0, "Added 3 noqa directives.\n")
    assert (project / "train.py").read_text() == (
        "import torch\n\n"
        "with torch.cuda.amp.autocast():  # noqa: E501, TL303 legacy\n    pass\n"
        "with torch.cuda.amp.autocast():  # noqa: E501, TL303 - a long line\n    pass\n"
        "with torch.cuda.amp.autocast():  # noqa: E501, TL303  # type: ignore\n    pass\n"
    )


def test_a_second_run_adds_nothing_and_the_reason_suppresses_nothing_else(project):
    (project / "train.py").write_text(DEPRECATED)
    invoke("--add-noqa=TODO: fix", "train.py")
    written = (project / "train.py").read_text()
    again = invoke("--add-noqa=TODO: fix", "train.py")
    assert (again.exit_code, again.stderr, (project / "train.py").read_text()) == (0, "", written)
    check = invoke("train.py")
    assert (check.exit_code, check.output) == (0, "All checks passed!\n")


def test_a_reason_on_several_lines_is_refused_and_nothing_is_written(project):
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("--add-noqa=line1\nline2", "train.py")
    assert result.exit_code == 2
    assert "Invalid value for '--add-noqa': the reason cannot contain newline characters" in result.stderr
    assert (project / "train.py").read_text() == DEPRECATED


def test_the_reason_keeps_the_conflicts_of_the_flag(project):
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("--add-noqa=why", "--fix", "train.py")
    assert (result.exit_code, result.stderr) == (
        2,
        "error: --add-noqa cannot be combined with --fix, --fix-only, --diff or standard input\n",
    )


def test_a_path_after_a_double_dash_is_never_the_option(project):
    (project / "train.py").write_text(DEPRECATED)
    result = invoke("--add-noqa", "--", "train.py")
    assert (result.exit_code, result.stderr) == (0, "Added 1 noqa directive.\n")


def test_help_shows_the_value_as_optional():
    assert "--add-noqa[=REASON]" in CliRunner().invoke(main, ["check", "--help"]).output


def test_add_noqa_writes_the_reason_after_new_codes_only():
    text = "a = 1\nb = 2  # noqa: E501\nc = 3  # noqa: E501 why\n"
    changed, count = add_noqa(text, {1: {"TL303"}, 2: {"TL304", "TL303"}, 3: {"TL303"}}, "later")
    assert count == 3
    assert changed == (
        "a = 1  # noqa: TL303 later\nb = 2  # noqa: E501, TL303, TL304 later\nc = 3  # noqa: E501, TL303 why\n"
    )
    assert add_noqa(text, {1: {"TL303"}}) == (text.replace("a = 1", "a = 1  # noqa: TL303"), 1)
