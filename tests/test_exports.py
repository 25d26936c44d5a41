"""Exports: what one file tells the others, read from its bytes alone, and the cross-file questions they
answer without building other files' facts (a LibCST parse and the analyses it raises)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support import project_facts, settings

import torchlint.facts.torch.exports as export_module
import torchlint.index.project as project_module
from torchlint.facts.torch.exports import Export, ScopeExport, export_of_bytes
from torchlint.facts.torch.models import may_train
from torchlint.index.project import Project
from torchlint.linter import Linter


def export(source: str) -> Export:
    found = export_of_bytes(textwrap.dedent(source).encode())
    assert found is not None
    return found


def test_an_export_says_what_the_file_imports_defines_and_calls_per_scope():
    found = export(
        """
        import torch.nn as nn
        from .engine import train_one_epoch as run_epoch
        from models import *

        class Net(nn.Module, Mixin):
            def forward(self, x):
                return self.head(helper(x))

        def helper(x):
            def inner():
                return x.sum().backward()
            return inner

        run_epoch(model, loader)
        """
    )
    assert found.imports == ["torch.nn", ".engine", ".engine.train_one_epoch", "models", "models.*"]
    assert found.bindings == [["nn", "torch.nn"], ["run_epoch", ".engine.train_one_epoch"]]
    assert found.aliases == [["nn", "nn"], ["train_one_epoch", "run_epoch"]]
    assert found.classes == ["Net"]
    assert found.bases == [["Net", "nn.Module", "Mixin"]]
    assert sorted(found.functions) == ["forward", "helper", "inner", "nn", "run_epoch"]
    assert found.scopes == [
        ScopeExport("", False, False, ["run_epoch"]),
        ScopeExport("Net.forward", False, False, ["helper", "self.head"]),
        ScopeExport("helper", True, False, [".backward", "x.sum"]),  # `inner` is helper's: its backward too
    ]


def test_the_export_finds_imports_wherever_statements_hold_them():
    source = """
        import a
        try:
            import b
        except ImportError:
            from c import d
        else:
            import e
        finally:
            import f
        def g():
            import h
            class I:
                from j import k
        if x:
            import l
        while y:
            import m
        with n:
            import o
        match p:
            case 1:
                import q
        for r in s:
            pass
        else:
            import t
        lambda: __import__("u")
        """
    found = export(source)
    expected = ["a", "b", "c", "c.d", "e", "f", "h", "j", "j.k", "l", "m", "o", "q", "t"]
    assert sorted(found.imports) == expected
    assert found.classes == ["I"] and "g" in found.functions


@pytest.mark.parametrize(
    ("call", "backward"),
    [
        ("loss.backward()", True),
        ("self.manual_backward(loss)", True),
        ("loss_scaler(loss, optimizer)", True),  # a helper handed the loss and the optimizer
        ("step(self.opt, total_loss * 2)", True),
        ("run(**vars(opt))", False),  # `opt`: the command line's options, and no loss in the call
        ("optimizer.step()", False),
        ('print("backward")', False),
    ],
)
def test_a_scope_may_run_a_backward_pass_by_itself(call, backward):
    assert [scope.backward for scope in export(f"def f():\n    {call}\n").scopes] == [backward]


def test_a_function_handed_to_a_call_is_one_it_may_run_unless_a_parameter_shadows_it():
    found = export(
        """
        def step():
            pass

        def main():
            timer.run(step)

        def forward(x, step):
            return layer(x, step)
        """
    )
    symbols = {scope.name: scope.symbols for scope in found.scopes}
    assert symbols["main"] == ["step", "timer.run"]
    assert symbols["forward"] == ["layer"]


def test_an_export_survives_the_cache_and_a_corrupted_entry_is_refused():
    found = export("import torch\nclass A(torch.nn.Module):\n    def f(self):\n        g()\n")
    assert Export.from_json(found.to_json()) == found
    broken = found.to_json()
    broken[-1] = [["f", "yes", False, []]]
    assert Export.from_json(broken) is None
    assert Export.from_json({"imports": []}) is None


def test_a_file_cpython_does_not_parse_has_no_export():
    assert export_of_bytes(b"def (:\n") is None


# -- the questions exports answer ------------------------------------------------------------------------

MODEL = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(x, x, x)[0]
        return x + self.mlp(x)


class Net(nn.Module):
    def __init__(self, dim=64, depth=24):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
"""
TRAIN = """\
import argparse

import torch
from model import Net

parser = argparse.ArgumentParser()
parser.add_argument("--depth", type=int, default=24)
args = parser.parse_args()
model = Net(depth=args.depth).cuda()
optimizer = torch.optim.AdamW(model.parameters())
for x in range(1000):
    loss = model(torch.randn(4, 8, 64, device="cuda")).sum()
    loss.backward()
    optimizer.step()
"""
PREDICT = """\
import torch
from model import Net
from plots import show

model = Net().cuda().eval()
with torch.no_grad():
    show(model(torch.randn(4, 8, 64, device="cuda")))
"""
PLOTS = "def show(y):\n    print(y)\n"


def write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def tl401(root: Path, checked: str) -> list[tuple[str, int]]:
    path = root / checked
    found = Linter().check_text(str(path), path.read_text(), settings(select=("TL401",)))
    return [(d.code, d.location.line) for d in found]


def test_which_modules_train_a_class_builds_only_those_that_may_train(tmp_path, parsed):
    write(tmp_path, {"model.py": MODEL, "train.py": TRAIN, "predict.py": PREDICT, "plots.py": PLOTS})
    assert tl401(tmp_path, "model.py") == [("TL401", 19)]
    assert "train.py" in parsed
    assert "predict.py" not in parsed and "plots.py" not in parsed  # they run no backward pass


def test_may_train_follows_a_call_into_another_module_and_a_method_named_on_an_object(tmp_path):
    files = {
        "model.py": MODEL,
        "engine.py": "def fit(model, opt, batches):\n    for b in batches:\n        model(b).sum().backward()\n"
        "        opt.step()\n",
        "main.py": "import engine\nfrom model import Net\n\nengine.fit(Net(), None, [])\n",
        "trainer.py": "class Trainer:\n    def run(self, model):\n        model(1).backward()\n",
        "app.py": "from trainer import Trainer\n\n\ndef go(t):\n    t.run(None)\n\n\ngo(Trainer())\n",
        "passed.py": "def go(t):\n    t.run(None)\n",  # `t` of a class no code here constructs: unknown
        "pkg/__init__.py": "",
        "pkg/loop.py": "def train(m):\n    m().backward()\n",
        "script.py": "import pkg\n\npkg.loop.train(None)\n",
        "predict.py": PREDICT,
        "plots.py": PLOTS,
    }
    write(tmp_path, files)
    project = Project(tmp_path)
    requester = tmp_path / "model.py"

    def trains(name: str) -> bool:
        return may_train(project, tmp_path / name, requester)

    assert trains("main.py")  # through `engine.fit`
    assert trains("app.py")  # `t.run(...)` on a `Trainer` it constructs
    assert not trains("passed.py")  # as the analysis, which does not know the class of `t` either
    assert trains("script.py")  # `import pkg` ... `pkg.loop.train(...)`
    assert not trains("predict.py") and not trains("plots.py")


def test_a_base_class_loop_running_an_override_in_an_importer_counts(tmp_path):
    files = {
        "base.py": "class Base:\n    def fit(self, m):\n        for _ in range(9):\n            self.step(m)\n",
        "impl.py": "from base import Base\n\n\nclass Impl(Base):\n    def step(self, m):\n        m().backward()\n",
        "user.py": "from base import Base\n\n\ndef go(b):\n    b.fit(None)\n\n\ngo(Base())\n",
    }
    write(tmp_path, files)
    assert may_train(Project(tmp_path), tmp_path / "user.py", tmp_path / "base.py")


def test_finding_callers_of_a_function_here_builds_no_other_module(tmp_path, parsed):
    facts = project_facts(
        tmp_path,
        {
            "utils.py": "def log(x):\n    print(x)\n",
            "train.py": "import utils\n\n\ndef step(x):\n    utils.log(x)\n\n\nstep(1)\nutils.log(2)\n",
        },
        "train.py",
    )
    source = facts.source
    [step] = [f for f in source.functions if f.name == "step"]
    assert [source.code(call.node) for call in source.callers_of(step)] == ["step(1)"]
    assert parsed == []


def test_subclasses_are_looked_for_only_in_importers_that_derive_a_class(tmp_path, parsed):
    facts = project_facts(
        tmp_path,
        {
            "base.py": "class Base:\n    def run(self):\n        self.step()\n\n    def step(self):\n        pass\n",
            "uses.py": "from base import Base\n\nBase().run()\n",
            "derives.py": "from base import Base as Parent\n\n\nclass Child(Parent):\n    def step(self):\n"
            "        pass\n",
        },
        "base.py",
    )
    from torchlint.facts.torch.training import TrainingAnalysis

    [base] = facts.source.classes
    found = facts.source.analysis(TrainingAnalysis)._subclasses(base)
    assert [cls.name for _, cls in found] == ["Child"]
    assert parsed == ["derives.py"]


def test_the_checked_text_is_exported_not_the_bytes_on_disk(tmp_path):
    write(tmp_path, {"a.py": "def f():\n    pass\n"})
    facts = project_facts(tmp_path, {"a.py": "def f():\n    pass\n"}, "a.py")
    project = facts.source.project
    assert project.export_of(tmp_path / "a.py").scopes == [ScopeExport("f", False, False, [])]
    from torchlint.facts.syntax.module import SourceModule

    buffer = "def f():\n    loss.backward()\n"
    import libcst as cst

    project.register(
        tmp_path / "a.py", SourceModule("a.py", buffer, cst.parse_module(buffer), project, tmp_path / "a.py")
    )
    assert project.export_of(tmp_path / "a.py").scopes == [ScopeExport("f", True, False, ["loss.backward"])]


def test_a_file_s_code_is_read_once_and_only_when_a_question_needs_it(tmp_path, monkeypatch):
    write(tmp_path, {"a.py": "import b\n", "b.py": "x = 1\n"})
    seen: list[int] = []
    original = project_module._code_exports_of
    monkeypatch.setattr(
        project_module, "_code_exports_of", lambda data: seen.append(len(data)) or original(data)
    )
    project = Project(tmp_path)
    assert project.importers_of(tmp_path / "b.py") == [tmp_path / "a.py"]
    assert seen == []  # who imports a file: statements only
    for _ in range(3):
        project.export_of(tmp_path / "a.py")
    assert seen == [len("import b\n")]


@pytest.mark.parametrize("mode", ["0", "1", ""])
def test_a_tree_finds_the_same_whether_it_asks_exports_first_or_not(tmp_path, monkeypatch, mode):
    """A run over a tree builds every file's facts for its own check: it does not ask exports first
    (`TORCHLINT_ASK_EXPORTS` unset: from 8 files on; "1" and "0" force either way). The findings are the
    same."""
    from click.testing import CliRunner

    from torchlint.cli import main

    helpers = {f"helper{n}.py": f"def help{n}(x):\n    return x\n" for n in range(6)}
    write(
        tmp_path, {"model.py": MODEL, "train.py": TRAIN, "predict.py": PREDICT, "plots.py": PLOTS, **helpers}
    )
    monkeypatch.setenv("TORCHLINT_ASK_EXPORTS", mode)
    monkeypatch.chdir(tmp_path)
    args = ["check", "--no-cache", "--select", "TL401", "--output-format", "concise", "-j", "1", "."]
    result = CliRunner().invoke(main, args)
    assert result.output.splitlines()[0].startswith("model.py:19:23: TL401 ")


def test_a_call_on_a_method_s_own_object_follows_overrides_whatever_the_parameter_s_name(tmp_path):
    facts = project_facts(
        tmp_path,
        {
            "base.py": "class Base:\n    @classmethod\n    def run(cls):\n        cls.step()\n\n"
            "    @classmethod\n    def step(cls):\n        pass\n",
            "impl.py": "from base import Base\n\n\nclass Impl(Base):\n    @classmethod\n    def step(cls):\n"
            "        loss.backward()\n",
        },
        "base.py",
    )
    from torchlint.facts.torch.training import TrainingAnalysis

    source = facts.source
    [call] = [c for c in source.calls if source.code(c.node) == "cls.step()"]
    assert not source.analysis(TrainingAnalysis).runs_no_training(call, steps=False)


def test_an_answer_worked_out_for_one_file_makes_the_next_file_depend_on_what_it_read(tmp_path):
    """`call_may_run` keeps its answers for the run; a second file reusing one still depends (through the
    file it asked about) on every file the answer read, so that the result cache sees an edit there."""
    from torchlint.facts.torch.reach import call_may_run

    calls_helper = "import helper\n\nhelper.h()\n"
    write(
        tmp_path,
        {
            "a.py": calls_helper,
            "b.py": calls_helper,
            "helper.py": "import util\n\n\ndef h():\n    util.u()\n",
            "util.py": "def u():\n    pass\n",
        },
    )
    project = Project(tmp_path)
    for name in ("a.py", "b.py"):
        assert not call_may_run(project, tmp_path / name, "helper.h", tmp_path / name, steps=True)
    assert {p.name for p in project.dependencies(tmp_path / "b.py")} >= {"helper.py", "util.py"}


def test_an_export_says_which_scopes_name_a_compiler():
    found = export(
        """
        import re
        import torch

        PATTERN = re.compile("x")

        @torch.compile
        def fast(x):
            return x

        def build(model):
            return model.compile()

        def train(model):
            return torch._dynamo.optimize("inductor")(model)
        """
    )
    assert {scope.name: scope.compiles for scope in found.scopes} == {
        "": False,  # `re.compile`: a pattern
        "fast": True,  # its decorator
        "build": True,
        "train": True,
    }


@pytest.mark.parametrize(
    ("source", "compiles"),
    [
        ("import re\n\nP = re.compile('x')\n", False),
        ("# torch.compile would help\nx = 1\n", False),
        ("from torch import compile as fast\n\nfast(model)\n", True),  # bound by an import, called by name
        ("import torch\n\nc = torch.compile\n", True),  # a reference: the alias may be called later
        ("import coremltools as ct\n\nct.optimize.coreml.palettize_weights(m)\n", False),
        ("import torch._dynamo as dyn\n\n\ndef f(m):\n    return dyn.optimize('inductor')(m)\n", True),
        ("from torch._dynamo import optimize\n", True),
        ("def f(\n", True),  # no export: anything may be there
    ],
)
def test_whether_a_file_may_hold_a_compile_site_is_read_from_its_export(source, compiles):
    from torchlint.facts.torch.exports import may_compile

    assert may_compile(export_of_bytes(source.encode())) is compiles


GRAPH_BREAK_MODEL = """
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        print(x)
        return x
"""


def test_compiled_code_is_looked_for_only_in_importers_that_may_compile(tmp_path, parsed):
    facts = project_facts(
        tmp_path,
        {
            "model.py": GRAPH_BREAK_MODEL,
            "fast.py": "import torch\nfrom model import Net\n\nnet = torch.compile(Net())\n",
            "patterns.py": "import re\nfrom model import Net\n\nP = re.compile('compile')\nNet()\n",
        },
        "model.py",
    )
    from torchlint.rules.compile.graph_breaks import GraphBreakAnalysis

    bodies = facts.source.analysis(GraphBreakAnalysis).compiled_bodies
    assert [body.function.name for body in bodies] == ["forward"]
    assert sorted(parsed) == ["fast.py"]  # `patterns.py` names `compile` only as a regular expression's


@pytest.mark.parametrize("asks_exports", [True, False])
def test_a_call_of_another_file_s_class_is_a_scaler_only_where_that_file_names_one(
    tmp_path, parsed, asks_exports
):
    """Also in a run that asks no export (a whole tree): a class's files are read from the statements the
    import scan reads anyway, so `Meter()` builds no other file's facts there either."""
    facts = project_facts(
        tmp_path,
        {
            "amp.py": "import torch\n\n\nclass Wrapped:\n    def __init__(self):\n"
            "        self.inner = torch.cuda.amp.GradScaler()\n",
            "meters.py": "class Meter:\n    def __init__(self):\n        self.total = 0\n",
            "train.py": "from amp import Wrapped\nfrom meters import Meter\n\nscaler = Wrapped()\nmeter = Meter()\n",
        },
        "train.py",
    )
    from torchlint.rules.mixed_precision.precision import PrecisionAnalysis

    facts.source.project.asks_exports = asks_exports
    scalers = facts.source.analysis(PrecisionAnalysis).scalers
    assert [(scaler.name, scaler.how) for scaler in scalers] == [("scaler", "`Wrapped` (wraps a GradScaler)")]
    assert parsed == ["amp.py"]  # `meters.py` names no GradScaler: `Meter` cannot make one


def test_whether_a_module_trains_does_not_build_the_files_of_helpers_that_run_no_backward_pass(
    tmp_path, parsed
):
    from torchlint.facts.torch.models import ModelAnalysis

    files = {
        "log.py": "def log(x):\n    print(x)\n",
        "engine.py": "def fit(model, opt, batches):\n    for b in batches:\n        model(b).sum().backward()\n"
        "        opt.step()\n",
        "plot.py": "import log\n\nlog.log(1)\n",
        "main.py": "import engine\nimport log\n\nlog.log(0)\nengine.fit(None, None, [])\n",
    }
    assert not project_facts(tmp_path, files, "plot.py").source.analysis(ModelAnalysis).trains
    assert parsed == []
    assert project_facts(tmp_path, files, "main.py").source.analysis(ModelAnalysis).trains
    assert parsed == ["engine.py"]


def test_a_model_handed_to_a_function_elsewhere_is_trained_only_where_that_function_may_build_an_optimizer(
    tmp_path, parsed
):
    """`check(model)` runs `check` of helpers.py, which builds no optimizer: another function of that file
    does, but what `check` is handed is not trained by it, and helpers.py's facts are not built to learn
    that; `fit(model)` runs the function that builds one."""
    from torchlint.facts.torch.models import ModelAnalysis

    helpers = (
        "import torch\n\n\ndef check(model):\n    print(model)\n\n\ndef fit(model, batches):\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for b in batches:\n"
        "        model(b).sum().backward()\n        opt.step()\n"
    )
    script = (
        "import torch\nfrom helpers import check, fit\n\nnet = torch.nn.Linear(2, 2)\ncheck(net)\n"
        "for epoch in range(3):\n    net(torch.ones(2)).sum().backward()\n"
    )
    files = {
        "helpers.py": helpers,
        "checked.py": script,
        "trained.py": script.replace("check(net)", "fit(net, [])"),
    }
    assert project_facts(tmp_path, files, "checked.py").source.analysis(ModelAnalysis).trained == []
    assert parsed == []
    trained = project_facts(tmp_path, files, "trained.py").source.analysis(ModelAnalysis).trained
    assert [model.text for model in trained] == ["net"]
    assert parsed == ["helpers.py"]


def test_a_trainer_class_is_looked_for_only_in_files_that_may_run_a_backward_pass(tmp_path, parsed):
    engine = (
        "class Trainer:\n    def __init__(self, model):\n        self.model = model\n\n"
        "    def fit(self, opt):\n        for x in range(9):\n            self.model(x).sum().backward()\n"
        "            opt.step()\n"
    )
    run = (
        "import torch\nfrom engine import Trainer\nfrom meters import Meter\nfrom model import Net\n\n"
        "meter = Meter('loss')\nnet = Net().cuda()\nTrainer(net).fit(torch.optim.SGD(net.parameters()))\n"
    )
    meters = "class Meter:\n    def __init__(self, name):\n        self.name = name\n"
    write(tmp_path, {"model.py": MODEL, "engine.py": engine, "meters.py": meters, "run.py": run})
    assert tl401(tmp_path, "model.py") == [("TL401", 19)]
    assert "engine.py" in parsed and "run.py" in parsed
    assert "meters.py" not in parsed  # `Meter('loss')` builds nothing that trains: no backward pass there


def test_calls_of_a_function_elsewhere_are_looked_for_only_in_importers_that_name_it(tmp_path, parsed):
    facts = project_facts(
        tmp_path,
        {
            "lib.py": "VERSION = 1\n\n\ndef train_one_epoch(model, opt):\n    for x in range(9):\n"
            "        model(x).backward()\n        opt.step()\n",
            "main.py": "import lib\n\nlib.train_one_epoch(None, None)\n",
            "about.py": "import lib\n\nprint(lib.VERSION)\n",
        },
        "lib.py",
    )
    from torchlint.facts.torch.callers import CallerAnalysis
    from torchlint.facts.torch.training import TrainingAnalysis

    [loop] = facts.source.analysis(TrainingAnalysis).training_loops
    calls = facts.source.analysis(CallerAnalysis).callers_elsewhere(loop)
    assert [(module.file.name, module.code(call.node)) for module, call in calls] == [
        ("main.py", "lib.train_one_epoch(None, None)")
    ]
    assert parsed == ["main.py"]  # `about.py` never names `train_one_epoch`


AGENT = """\
import torch


class Agent:
    def __init__(self, net):
        self.net = net
        self.optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)

    def update(self, batch):
        loss = self.net(batch).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
"""
AGENT_TRAINER = """\
import torch
from agent import Agent

agent = Agent(torch.nn.Linear(4, 2).cuda())
for step in range(1000):
    agent.update(torch.randn(8, 4, device="cuda"))
"""


def test_an_optimizer_of_a_module_without_a_loop_is_weighed_by_the_importers_that_may_train(tmp_path, parsed):
    files = {
        "agent.py": AGENT,
        "train.py": AGENT_TRAINER,
        "plot.py": "from agent import Agent\n\nprint(Agent)\n",
    }
    write(tmp_path, files)
    path = tmp_path / "agent.py"
    found = Linter().check_text(str(path), path.read_text(), settings(select=("TL505",)))
    assert [(d.code, d.location.line) for d in found] == [("TL505", 7)]
    assert "train.py" in parsed and "plot.py" not in parsed  # no backward pass in `plot.py`: not built
    write(tmp_path, {**files, "plot.py": "# runs under deepspeed\nfrom agent import Agent\n"})
    assert Linter().check_text(str(path), path.read_text(), settings(select=("TL505",))) == []


def test_whether_a_file_mentions_a_word_is_read_from_its_bytes_where_they_are_its_text(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    write(
        root,
        {
            "a.py": "# deepspeed\n",
            "b.py": "s = 'é'\n",
            "c.py": "# -*- coding: latin-1 -*-\n# deepspeed\n",
            "d.py": "x = 1\n",
        },
    )
    (root / "e.py").write_bytes(b"s = '\xff'  # deepspeed\n")  # not UTF-8: its facts are never built
    project = Project(root)
    said = {name: project.mentions(root / f"{name}.py", ("deepspeed",)) for name in "abcde"}
    assert said == {"a": True, "b": False, "c": None, "d": False, "e": None}
    assert project.mentions(root / "elsewhere.py", ("deepspeed",)) is None


def test_debug_exports_says_which_scopes_may_run_a_backward_pass_or_name_a_compiler(tmp_path):
    from click.testing import CliRunner

    from torchlint.cli import main

    script = tmp_path / "train.py"
    script.write_text("import torch\n\n\n@torch.compile\ndef step(x):\n    x.backward()\n\n\nstep(1)\n")
    result = CliRunner().invoke(main, ["debug", "exports", str(script)], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.output.endswith(
        "scopes:\n  <module>: step\n  step (may run a backward pass itself) (names a compiler): x.backward\n"
    )


def test_an_export_is_read_from_the_tree_the_syntax_check_kept_where_the_bytes_parse_as_its_text():
    from torchlint.pyast import kept_ast, python_ast

    text = "import torch\n\ndef step(loss):\n    loss.backward()\n"
    tree = python_ast(text)
    assert kept_ast(text.encode()) is tree
    assert export_of_bytes(text.encode()) == export_of_bytes(text.encode() + b"\n")  # the same statements
    declared = "# -*- coding: latin-1 -*-\n" + text  # bytes obey the declaration, a text does not
    python_ast(declared)
    assert kept_ast(declared.encode()) is None
    assert kept_ast(b"\xef\xbb\xbf" + text.encode()) is None
    assert kept_ast(b"x = '\xff'\n") is None  # not UTF-8


def test_two_versions_agree_on_their_export_when_what_the_edit_touched_tells_the_same(monkeypatch):
    """The editor compares a buffer's export before and after a keystroke: only the top-level statements
    whose lines changed are walked. True is certain; False only says that the parts differ (the whole
    exports then decide); None where the trees are not kept or lines are not a node's own."""
    from torchlint.facts.torch.exports import code_exports_agree
    from torchlint.pyast import python_ast

    before = textwrap.dedent(
        """
        import torch

        def step(model, opt, x):
            loss = model(x).sum() * 1.0
            loss.backward()
            opt.step()

        def report(values):
            print(values)
        """
    )
    edits = {
        "constant": before.replace("* 1.0", "* 0.5"),
        "comment": before + "# note\n",
        "a call": before.replace("print(values)", "print(values)\n    log(values)"),
        "no backward": before.replace("    loss.backward()\n", ""),
        "a local": before.replace("print(values)", "shown = values\n    print(shown)"),
    }
    python_ast(before)
    walked = []
    original = export_module._Exporter.export
    monkeypatch.setattr(
        export_module._Exporter, "export", lambda self, tree: walked.append(1) or original(self, tree)
    )
    found = {}
    for name, after in edits.items():
        python_ast(before)  # both kept, as the editor's last two versions are
        python_ast(after)
        found[name] = code_exports_agree(before.encode(), after.encode())
    assert walked == []  # no whole file was walked
    assert found == {
        "constant": True,
        "comment": True,
        "a call": False,
        "no backward": False,
        "a local": False,
    }
    assert export_of_bytes(before.encode()) == export_of_bytes(
        edits["a local"].encode()
    )  # False, not different
    assert code_exports_agree(before.encode(), b"x = 1\rimport torch\n") is None  # a lone carriage return
    assert code_exports_agree(before.encode(), b"never_parsed = 1\n") is None
