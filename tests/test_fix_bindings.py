"""Fixes that rebind, delete or insert a name check that binding everywhere it can be seen (reliability
report, turn 3: N1, N3, N4, N5).

- N1: `model = torch.compile(model)` written inside a function where `model` is a module-level name makes it
  local to that function (UnboundLocalError): no fix unless the name is already bound there (or declared
  `global`).
- N3: a name a star import may bind is not free: a fix neither adds an import of it nor makes a new variable
  of it (a project module's star exports are read, its `__all__` honoured; an unreadable one may bind any
  name).
- N4: a module-level name a fix removes (`compiled = torch.compile(model)` becoming `model.compile()`) is kept
  as `compiled = model` when something else may read it: another project file, `__all__`, `globals()`.
- N5: TL101's `torch.compile` fix (which prefixes `state_dict` keys) follows the model into the functions it is
  handed to, in this file and others: one that saves or loads its `state_dict`, or one that cannot be followed,
  withholds the fix.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from support import fix, lint, said, settings

from torchlint.linter import Linter

SEQUENTIAL = """\
import torch
import torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)
"""
TRAIN = """\

def main():
    opt = setup()
    for x, y in loader:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
"""


def write_project(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))


def check_file(root: Path, checked: str, select: tuple[str, ...]) -> list:
    path = root / checked
    return Linter().check_text(str(path), path.read_text(), settings(select=select))


def fix_file(root: Path, checked: str, select: tuple[str, ...]) -> str:
    path = root / checked
    text, _, _ = Linter().fix_text(str(path), path.read_text(), settings(select=select), True)
    return text


def only(found: list, code: str):
    (finding,) = [d for d in found if d.code == code]
    return finding


# -- N1: a rebinding inside a function of a name bound outside it ------------------------------------------


def test_sequential_compile_in_a_function_on_a_module_level_model_gets_no_fix():
    """N1 (TL105): `model = torch.compile(model)` in `setup()` would make `model` local to it."""
    source = (
        SEQUENTIAL + "\n\ndef setup():\n    model.compile()\n    return torch.optim.SGD(model.parameters())\n"
    )
    finding = only(lint(source + TRAIN, select=("TL105",)), "TL105")
    assert finding.fix is None
    assert said(finding).endswith(
        "(no automatic fix: `model` is bound at module level: assigning it inside `setup` would make it a "
        "local variable of `setup`)"
    )
    assert fix(source + TRAIN, select=("TL105",)) == textwrap.dedent(source + TRAIN)


def test_a_dropped_torch_compile_in_a_function_on_a_module_level_sequential_gets_no_fix():
    """N1 (TL103): the same for a standalone `torch.compile(model)` of an `nn.Sequential`."""
    source = (
        SEQUENTIAL
        + "\n\ndef setup():\n    torch.compile(model)\n    return torch.optim.SGD(model.parameters())\n"
    )
    finding = only(lint(source + TRAIN, select=("TL103",)), "TL103")
    assert finding.fix is None
    assert "(no automatic fix: `model` is bound at module level" in said(finding)


def test_a_rebinding_in_an_enclosing_function_s_name_gets_no_fix():
    """N1: a nested function's rebinding of its enclosing function's model would shadow it too."""
    source = """\
    import torch
    from torch import nn

    def outer():
        model = nn.Sequential(nn.Linear(8, 8))
        def inner():
            model.compile()
        inner()
        return model
    """
    finding = only(lint(source, select=("TL105",)), "TL105")
    assert finding.fix is None
    assert "`model` is bound in `outer`: assigning it inside `inner`" in said(finding)


def test_a_model_declared_global_or_bound_in_the_same_function_is_rebound():
    """N1: `global model` makes the assignment rebind the module's model; a local model is local anyway."""
    declared = SEQUENTIAL + "\n\ndef setup():\n    global model\n    model.compile()\n"
    assert "    global model\n    model = torch.compile(model)\n" in fix(declared, select=("TL105",))
    local = (
        "import torch\nfrom torch import nn\n\ndef setup():\n    seq = nn.Sequential()\n    seq.compile()\n"
    )
    assert "    seq = torch.compile(seq)\n" in fix(local, select=("TL105",))


def test_tl101_compiles_a_module_level_sequential_where_it_is_bound_not_in_the_function_that_places_it():
    """N1 (TL101): the placement in `main()` is no place to rebind the module's model; the statement goes
    after the module-level build (the compiled wrapper is moved by `.to()` like the module)."""
    source = """\
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))

    def main():
        model.to("cuda")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    """
    fixed = fix(source, select=("TL101",))
    assert fixed == textwrap.dedent(source).replace(
        "nn.Linear(8, 2))\n", "nn.Linear(8, 2))\nmodel = torch.compile(model)\n"
    )


# -- N3: names a star import may bind ----------------------------------------------------------------------

CHECKPOINTED = """\
import torch
from torch import nn
from utils import *


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(8)])

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


model = Net()
optimizer = torch.optim.AdamW(model.parameters())
for x in loader:
    model(x).sum().backward()
    optimizer.step()
    checkpoint({"model": model.state_dict()}, 1)
"""


def test_checkpointing_fix_is_withheld_where_a_star_imported_project_module_defines_checkpoint(tmp_path):
    """N3 (TL401): `from utils import *` binds the project's own `checkpoint(state, step)`."""
    utils = "import torch\n\ndef checkpoint(state, step):\n    torch.save(state, f'{step}.pt')\n"
    write_project(tmp_path, {"utils.py": utils, "main.py": CHECKPOINTED})
    finding = only(check_file(tmp_path, "main.py", ("TL401",)), "TL401")
    assert finding.fix is None
    assert said(finding).endswith("(no automatic fix: `from utils import *` binds `checkpoint`)")


def test_a_star_import_whose_all_leaves_out_checkpoint_does_not_block_the_fix(tmp_path):
    """N3: the star-imported module's `__all__` decides what it binds."""
    utils = "__all__ = ['save']\n\ndef checkpoint(state, step):\n    pass\n\ndef save():\n    pass\n"
    write_project(tmp_path, {"utils.py": utils, "main.py": CHECKPOINTED})
    fixed = fix_file(tmp_path, "main.py", ("TL401",))
    assert "from torch.utils.checkpoint import checkpoint\n" in fixed
    assert "x = checkpoint(blk, x, use_reentrant=False)" in fixed
    # listed in `__all__`: bound again
    write_project(tmp_path, {"utils.py": utils.replace("['save']", "['save', 'checkpoint']")})
    assert only(check_file(tmp_path, "main.py", ("TL401",)), "TL401").fix is None


def test_a_star_import_that_cannot_be_read_may_bind_any_name():
    """N3: `from somepackage import *` (not a project file) may bind `checkpoint`: no fix."""
    finding = only(lint(CHECKPOINTED, select=("TL401",)), "TL401")
    assert finding.fix is None
    assert said(finding).endswith(
        "(no automatic fix: `from utils import *` may bind `checkpoint` (its module cannot be read))"
    )


def test_a_star_import_of_a_module_without_the_name_leaves_the_fix(tmp_path):
    """N3: a project module that binds neither `checkpoint` (nor a private `_checkpoint`, which `*` skips)."""
    utils = "import torch\n\ndef _checkpoint(state):\n    pass\n\ndef save(state):\n    pass\n"
    write_project(tmp_path, {"utils.py": utils, "main.py": CHECKPOINTED})
    assert "from torch.utils.checkpoint import checkpoint\n" in fix_file(tmp_path, "main.py", ("TL401",))


SCALED = """\
import torch
from prep import *

for x, y in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""


def test_grad_scaler_fix_is_withheld_where_a_star_import_binds_scaler(tmp_path):
    """N3 (TL302): `from prep import *` provides `scaler = 2.0`: a module-level loop would silently get a
    GradScaler in its place, and a function reading `scaler` before its loop an UnboundLocalError."""
    write_project(tmp_path, {"prep.py": "scaler = 2.0\n", "main.py": SCALED})
    finding = only(check_file(tmp_path, "main.py", ("TL302",)), "TL302")
    assert finding.fix is None
    assert said(finding).endswith("(no automatic fix: `from prep import *` binds `scaler`)")
    in_function = """\
import torch
from prep import *

def train():
    print(scaler)
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
"""
    write_project(tmp_path, {"main.py": in_function})
    assert only(check_file(tmp_path, "main.py", ("TL302",)), "TL302").fix is None


def test_grad_scaler_fix_stays_where_the_star_import_binds_torch_to_torch(tmp_path):
    """N3: a star import that binds `torch` to the torch module itself clashes with nothing."""
    write_project(tmp_path, {"prep.py": "import torch\n\nlr = 0.1\n", "main.py": SCALED})
    fixed = fix_file(tmp_path, "main.py", ("TL302",))
    assert 'scaler = torch.amp.GradScaler("cuda")\nfor x, y in loader:\n' in fixed


def test_a_new_variable_is_not_made_of_a_name_read_where_nothing_binds_it():
    """N3: `scaler` read but bound nowhere in the file (a builtin, an injected global): not free."""
    source = SCALED.replace("from prep import *\n", "").replace(
        "optimizer.step()", "optimizer.step()\n    log(scaler)"
    )
    finding = only(lint(source, select=("TL302",)), "TL302")
    assert finding.fix is None
    assert said(finding).endswith("(no automatic fix: `scaler` is read where nothing in this file binds it)")


# -- N4: a module-level name the fix removes -----------------------------------------------------------------

UNUSED = """\
import torch

model = Net().cuda()
compiled = torch.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    criterion(model(x), y).backward()
    optimizer.step()
"""
KEPT = "model.compile()\ncompiled = model\noptimizer"


def test_a_compiled_name_another_project_file_imports_is_kept(tmp_path):
    """N4 (TL103): `from main import compiled` in evaluate.py must still find it after the fix."""
    write_project(
        tmp_path, {"main.py": UNUSED, "evaluate.py": "from main import compiled\n\ncompiled.eval()\n"}
    )
    assert KEPT in fix_file(tmp_path, "main.py", ("TL103",))
    # nobody imports it: the name goes
    (tmp_path / "evaluate.py").write_text("import main\n")
    assert "model.compile()\noptimizer" in fix_file(tmp_path, "main.py", ("TL103",))


def test_a_compiled_name_exported_or_read_through_globals_is_kept():
    """N4: `__all__ = ["compiled"]` (a star import of the module) and `globals()["compiled"]`."""
    exported = UNUSED.replace("import torch\n", 'import torch\n\n__all__ = ["compiled"]\n')
    assert KEPT in fix(exported, select=("TL103",))
    dynamic = UNUSED + 'print(globals()["compiled"])\n'
    assert KEPT in fix(dynamic, select=("TL103",))
    assert "model.compile()\noptimizer" in fix(UNUSED, select=("TL103",))


def test_a_compiled_local_read_through_locals_is_kept():
    """N4: in a function, `locals()` may read the local the fix removes."""
    source = """\
    import torch

    def main():
        model = Net().cuda()
        compiled = torch.compile(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            criterion(model(x), y).backward()
            optimizer.step()
        return locals()
    """
    assert "    model.compile()\n    compiled = model\n" in fix(source, select=("TL103",))


def test_the_sequential_form_of_tl103_says_that_state_dict_keys_change():
    """N5 (consistency): TL103's `seq = torch.compile(seq)` renames the keys, as TL105's title says."""
    source = SEQUENTIAL + "torch.compile(model)\n"
    finding = only(lint(source, select=("TL103",)), "TL103")
    assert finding.fix.title == "Use `model = torch.compile(model)` (its `state_dict` keys gain `_orig_mod.`)"


# -- N5: the state_dict saved or loaded through a helper -----------------------------------------------------

SAVED_BY_HELPER = """\
import torch
from torch import nn
{imports}
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
{call}
"""


def test_a_sequential_saved_through_a_helper_in_another_file_gets_no_fix(tmp_path):
    """N5 (TL101): `save(model, path)` from utils.py saves `m.state_dict()`: the keys must stay."""
    main = SAVED_BY_HELPER.format(imports="from utils import save\n", call='save(model, "ckpt.pt")')
    utils = "import torch\n\ndef save(m, path):\n    torch.save(m.state_dict(), path)\n"
    write_project(tmp_path, {"main.py": main, "utils.py": utils})
    finding = only(check_file(tmp_path, "main.py", ("TL101",)), "TL101")
    assert finding.fix is None
    assert "`save(...)` (utils.py) saves or loads its `state_dict`" in said(finding)
    # through a second helper, and with `load_state_dict`
    utils = "def save(m, path):\n    _write(m, path)\n\ndef _write(net, path):\n    net.load_state_dict({})\n"
    write_project(tmp_path, {"utils.py": utils})
    assert only(check_file(tmp_path, "main.py", ("TL101",)), "TL101").fix is None
    # a helper that reads only the parameters leaves the fix
    write_project(
        tmp_path, {"utils.py": "def save(m, path):\n    print(sum(p.numel() for p in m.parameters()))\n"}
    )
    assert "model = torch.compile(model)" in fix_file(tmp_path, "main.py", ("TL101",))


def test_a_sequential_saved_through_a_helper_in_the_same_file_gets_no_fix():
    """N5: the same-file helper, and a callee that cannot be followed (unknown, so no fix)."""
    helper = "def save(m, path):\n    torch.save(m.state_dict(), path)\n"
    source = SAVED_BY_HELPER.format(imports=helper, call='save(model, "ckpt.pt")')
    finding = only(lint(source, select=("TL101",)), "TL101")
    assert finding.fix is None
    assert "`save(...)` saves or loads its `state_dict`" in said(finding)
    unknown = SAVED_BY_HELPER.format(imports="from torchinfo import summary\n", call="summary(model)")
    finding = only(lint(unknown, select=("TL101",)), "TL101")
    assert finding.fix is None
    assert "it is handed to `summary(...)`, which torchlint cannot follow" in said(finding)
    plain = SAVED_BY_HELPER.format(imports="", call="print(model)")
    assert "model = torch.compile(model)" in fix(plain, select=("TL101",))


def test_a_lazy_import_is_not_added_to_a_function_that_reads_the_star_imported_module_before_it(tmp_path):
    """N3 (sibling, TL303): `import torch` put before a function's own `from torch.cuda.amp import ...`
    would make `torch`, which the function read earlier from `from utils import *`, local to it."""
    lazy = """\
    from utils import *


    def train():
        x = torch.zeros(1)
        from torch.cuda.amp import autocast
        with autocast():
            return x
    """
    write_project(tmp_path, {"utils.py": "import torch\n", "main.py": lazy})
    assert fix_file(tmp_path, "main.py", ("TL303",)) == textwrap.dedent(lazy)
    write_project(tmp_path, {"main.py": lazy.replace("torch.zeros(1)", "1")})
    fixed = fix_file(tmp_path, "main.py", ("TL303",))
    assert "    x = 1\n    import torch\n    with torch.amp.autocast" in fixed


def test_vars_of_an_object_is_not_a_read_of_the_module_s_names():
    """N4: `vars(args)` reads the arguments' attributes, not the module's names: `compiled` goes."""
    source = UNUSED + "print(vars(args))\n"
    assert "model.compile()\noptimizer" in fix(source, select=("TL103",))
