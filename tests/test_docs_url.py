"""A finding's `url` leads somewhere real: the installed doc by default (a `file:` URL every install has),
or the team's published docs through `TORCHLINT_DOCS_URL` (a template with `{code}`)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from click.testing import CliRunner

from torchlint.cli import main
from torchlint.docs import rule_url


def test_by_default_the_url_is_the_installed_doc_itself(monkeypatch):
    monkeypatch.delenv("TORCHLINT_DOCS_URL")
    url = rule_url("TL303")
    parsed = urlparse(url)
    assert parsed.scheme == "file"
    doc = Path(url2pathname(parsed.path))
    assert doc.name == "TL303.md" and doc.read_text(encoding="utf-8").startswith("# TL303 ")


def test_a_template_names_the_published_docs(monkeypatch, tmp_path):
    monkeypatch.setenv(
        "TORCHLINT_DOCS_URL", "https://git.example.com/ml/torchlint/-/blob/main/rules/{code}.md"
    )
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\n")
    output = CliRunner().invoke(main, ["--no-cache", "--output-format", "json", "train.py"]).output
    assert [d["url"] for d in json.loads(output)] == [
        "https://git.example.com/ml/torchlint/-/blob/main/rules/TL304.md"
    ]
