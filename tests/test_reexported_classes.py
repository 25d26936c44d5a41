"""Classes a package re-exports (`from pkg import Model`, where `pkg/__init__.py` imports it from a module of
its own) are the project's classes like any other: found by the semantic model, and followed by the rules
that read them. Each case here is a finding the ecosystem check showed moving once they were (x-transformers,
Real-Time-Voice-Cloning, pytorch-a2c-ppo-acktr-gail), with the sibling that must keep its outcome.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from support import project_facts, settings

from torchlint.linter import Linter


def _write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


def _codes(root: Path, name: str, select: str) -> list[tuple[str, int]]:
    path = root / name
    found = Linter().check_text(str(path), path.read_text(), settings(select=(select,)))
    return [(d.code, d.location.line) for d in found]


def test_a_class_a_package_re_exports_resolves_to_its_definition(tmp_path):
    files = {
        "pkg/__init__.py": "from pkg.layers import Decoder\nfrom .wrappers import Wrapper as Wrapped\n",
        "pkg/layers.py": "class Decoder:\n    pass\n",
        "pkg/wrappers.py": "class Wrapper:\n    pass\n",
        "pkg/cycle.py": "from pkg.cycle import Loop\n",
        "train.py": "from pkg import Decoder, Wrapped\nfrom pkg.cycle import Loop\n"
        "a = Decoder()\nb = Wrapped()\nc = Loop()\n",
    }
    facts = project_facts(tmp_path, files, "train.py")
    source = facts.source
    calls = {source.code(call.node.func): call for call in source.calls}
    decoder = source.resolve_class(calls["Decoder"].node.func, calls["Decoder"].scope)
    wrapped = source.resolve_class(calls["Wrapped"].node.func, calls["Wrapped"].scope)
    assert decoder is not None and decoder[0].path.endswith("layers.py") and decoder[1].name == "Decoder"
    assert wrapped is not None and wrapped[0].path.endswith("wrappers.py") and wrapped[1].name == "Wrapper"
    assert source.resolve_class(calls["Loop"].node.func, calls["Loop"].scope) is None  # a cycle: unknown


LIBRARY = """\
import torch
from torch import nn
from torch.amp import autocast


class Rotary(nn.Module):
    @autocast("cuda", enabled=False)
    def forward(self, t):
        return t.float().sin()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rotary = Rotary()
        self.out = nn.Linear(512, 512)

    def forward(self, x):
        return self.out(self.rotary(x))

    def compute_loss(self, x):
        return self(x).mean()
"""

SCRIPT = """\
import torch

from lib import Model

model = Model().cuda()
optimizer = torch.optim.Adam(model.parameters(), fused=True)
for x in loader:
    loss = model.compute_loss(x.cuda())
    loss.backward()
    optimizer.step()
"""


def test_a_library_that_switches_autocast_off_for_one_part_decides_nothing_for_its_callers(tmp_path):
    """x-transformers keeps its rotary embedding in float32 with `@autocast("cuda", enabled=False)`: a part
    kept out of the caller's autocast, which the script never enabled; a library that enables autocast
    itself still decides."""
    _write(tmp_path, {"lib/__init__.py": "from lib.model import Model\n", "lib/model.py": LIBRARY})
    (tmp_path / "train.py").write_text(SCRIPT)
    assert _codes(tmp_path, "train.py", "TL301") == [("TL301", 8)]
    enabling = LIBRARY.replace(
        "        return self(x).mean()",
        '        with autocast("cuda", dtype=torch.bfloat16):\n            return self(x).mean()',
    )
    (tmp_path / "lib/model.py").write_text(enabling)
    assert _codes(tmp_path, "train.py", "TL301") == []


BATCHES = """\
import numpy as np
from torch.utils.data import DataLoader


class SpeakerBatch:
    def __init__(self, speakers):
        self.data = np.array([s.frames for s in speakers])


class SpeakerLoader(DataLoader):
    def __init__(self, dataset, speakers_per_batch, num_workers=0, pin_memory=False):
        super().__init__(
            dataset=dataset,
            batch_size=speakers_per_batch,
            num_workers=num_workers,
            collate_fn=self.collate,
            pin_memory=pin_memory,
        )

    def collate(self, speakers):
        return SpeakerBatch(speakers)
"""

LOADER_SCRIPT = """\
import torch

from data import SpeakerLoader

device = torch.device("cuda")
loader = SpeakerLoader(dataset, 64, num_workers=4)
for batch in loader:
    loss = model(torch.from_numpy(batch.data).to(device)).mean()
    loss.backward()
    optimizer.step()
"""


def test_a_loader_whose_batches_are_objects_pinning_skips_is_not_asked_to_pin(tmp_path):
    """Real-Time-Voice-Cloning: the loader subclass collates into a `SpeakerBatch` of numpy arrays, which
    the DataLoader's pinning returns as it is; a batch class with its own `pin_memory()` is pinned."""
    _write(
        tmp_path, {"data/__init__.py": "from data.loaders import SpeakerLoader\n", "data/loaders.py": BATCHES}
    )
    (tmp_path / "train.py").write_text(LOADER_SCRIPT)
    assert _codes(tmp_path, "train.py", "TL202") == []
    pinnable = BATCHES.replace(
        "        self.data = np.array([s.frames for s in speakers])\n",
        "        self.data = torch.stack([s.frames for s in speakers])\n\n"
        "    def pin_memory(self):\n        self.data = self.data.pin_memory()\n        return self\n",
    ).replace("import numpy as np\n", "import torch\n")
    (tmp_path / "data/loaders.py").write_text(pinnable)
    assert _codes(tmp_path, "train.py", "TL202") == [("TL202", 6)]
