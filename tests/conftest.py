"""`support` on the path, and the one fixture most test files share."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_sessionstart(session):
    """The processes the suite starts (the command line, the Language Server, pre-commit's hooks, the
    verifier's runs) import this checkout's modules. Where the environment writes no bytecode
    (`PYTHONDONTWRITEBYTECODE`, as on the CI machine) each of them compiled every module it imports
    from source, about a quarter of a second per process; compiled once here, as an installed wheel's
    modules are, they are read instead."""
    import compileall

    compileall.compile_dir(Path(__file__).parent.parent / "torchlint", quiet=1)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project of its own (a pyproject.toml), as the working directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    return tmp_path


@pytest.fixture(autouse=True)
def no_user_config(tmp_path_factory, monkeypatch):
    """No test reads the configuration of the user who runs the suite (`~/.config/torchlint/`): its own
    empty config home, which a test may fill."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config-home")))


DOCS_URL = "https://docs.example/torchlint/rules/{code}.md"


@pytest.fixture(autouse=True)
def docs_url(monkeypatch):
    """Findings' `url` from a fixed template, so that recorded outputs do not name this checkout's folder
    (by default it is the installed doc's `file:` URL; tests/test_docs_url.py checks that)."""
    monkeypatch.setenv("TORCHLINT_DOCS_URL", DOCS_URL)


@pytest.fixture
def parsed(monkeypatch) -> list[str]:
    """The names of the files whose facts the project index builds (one LibCST parse each)."""
    from support import record_calls

    from torchlint.index.project import Project

    return record_calls(monkeypatch, Project, "_build", lambda self, path: path.name)
