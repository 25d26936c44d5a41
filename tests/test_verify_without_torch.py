"""`torchlint verify` where torch is not installed: one line naming what to install, exit 2, no traceback.

The linter never needs torch, so an install without the `verify` extra is normal; the script's runs would
fail inside torchlint's own bootstrap (`import torch` in the hooks) with a traceback that reads like a bug.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

# `sys.modules["torch"] = None` is how Python marks a module as absent: find_spec answers None, as it does
# where torch was never installed.
WITHOUT_TORCH = textwrap.dedent(
    """
    import sys
    sys.modules["torch"] = None
    sys.argv = ["torchlint", "verify", "train.py"]
    from torchlint.cli import entry
    entry()
    """
)


def test_verify_without_torch_says_what_to_install_and_exits_two(tmp_path):
    (tmp_path / "train.py").write_text("import torch\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"error: torch is not installed in {sys.executable}, which runs the script: install it there "
        "(`pip install 'torchlint[verify]'` or `pip install torch`), then run verify again\n"
    )
