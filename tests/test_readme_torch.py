"""A project that installs through its README (no torch version in any dependency file) runs on the torch
the README requires; prose that is no requirement, and lower bounds, declare nothing. The cases are the
shapes of real READMEs (swav, pygcn, tacotron2, awd-lstm-lm, kohya's sd-scripts, x-transformers)."""

from __future__ import annotations

import pytest

from torchlint.workspace.readme_torch import required_torch


@pytest.mark.parametrize(
    "readme, version",
    [
        ("## Requirements\n- Python 3.6\n- [PyTorch](http://pytorch.org) install = 1.4.0\n", (1, 4)),
        (
            "## Installation\n\n```python setup.py install```\n\n## Requirements\n\n  * PyTorch 0.4 or 0.5\n",
            (0, 4),
        ),
        ("## Setup\n6. Install [PyTorch 1.0]\n\n[pytorch 1.0]: https://github.com/pytorch/pytorch\n", (1, 0)),
        (
            "+ Install PyTorch 0.4\n\nPython 3 and PyTorch 0.4 are required for the current codebase.\n",
            (0, 4),
        ),
        (
            "Python 3 and PyTorch 0.4 are required.\nThe old release needs PyTorch 0.1.12, install it via conda.\n",
            (0, 4),
        ),
        ("To run:\n```bash\npip install torch==2.6.0 torchvision==0.21.0\n```\n", (2, 6)),
        ("```\nconda install pytorch=1.7 torchvision -c pytorch\n```\n", (1, 7)),
        ("Requirements\n============\n* **PyTorch** version: 1.10\n", (1, 10)),
        ("## Environment\n- CUDA 11.8, PyTorch 2.0.1+cu118\n", (2, 0)),  # a local label, not "or later"
    ],
)
def test_a_readme_requirement_gives_the_torch_the_project_runs_on(readme, version):
    assert required_torch(readme) == version


@pytest.mark.parametrize(
    "readme",
    [
        "## Requirements\n- PyTorch >= 1.8\n",
        "## Requirements\n- PyTorch 1.8+\n- PyTorch 2.x\n",
        "## Requirements\n- PyTorch 1.8 or later\n",
        "Requires at least PyTorch 1.8.\n",
        "## Installation\nThe scripts are tested with PyTorch 2.1.\n",
        "## Installation\nDeveloped with PyTorch 1.13 on Ubuntu.\n",
        "```python\nattn_flash = True  # set this if you have pytorch 2.0 installed\n```\n",
        "## News\n- 2023/05: support for PyTorch 2.0's compile\n",
        "It uses scaled_dot_product_attention from PyTorch 2.0.\n",
        "## Requirements\n- pytorch-lightning==1.5\n- torchvision 0.9\n",
        "## Installation\n```python setup.py install```\nPyTorch is needed.\n",
    ],
)
def test_prose_lower_bounds_and_other_packages_require_no_torch(readme):
    assert required_torch(readme) is None
