"""TL106 (likely graph break in compiled code) in the shapes real training code takes: a script that
compiles its model, `main()` with argparse, a trainer class, the model in another file, `model.compile()`,
`@torch.compile` on a step function; and what must stay silent: a model never compiled, tests on Python
values, `is_compiling()` guards, code outside the forward, test files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from support import lint, said, settings

from torchlint.linter import Linter

MODEL = """\
import logging

import torch
from torch import nn

logger = logging.getLogger(__name__)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(32, 32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.body(x)
        print(x.shape)
        return self.head(x)
"""

LOOP = """
optimizer = torch.optim.AdamW(model.parameters())
for inputs, targets in loader:
    loss = nn.functional.cross_entropy(model(inputs.cuda()), targets.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _found(source: str, path: str = "train.py") -> list[tuple[int, str]]:
    diagnostics = lint(source, select=("TL106",), path=path)
    return [(d.location.line, said(d)) for d in diagnostics]


def _lines(source: str, path: str = "train.py") -> list[tuple[int, int]]:
    return [(d.location.line, d.location.column) for d in lint(source, select=("TL106",), path=path)]


# -- found --------------------------------------------------------------------------------------------------


def test_a_script_that_compiles_its_model_reports_the_print_in_the_forward_with_the_compile_line():
    source = MODEL + "\n\nmodel = Net().cuda()\nmodel = torch.compile(model)\n" + LOOP
    [(line, message)] = _found(source)
    assert line == 17
    assert message == (
        "`print(...)` in the forward of `Net`, which is compiled at line 22: `print` cannot go in a graph, so "
        "Dynamo likely breaks the graph here and the compiled model runs as several graphs with Python in "
        "between (no automatic fix: remove it, move it out of the compiled code, or run it only in eager mode "
        "(`if not torch.compiler.is_compiling():`); see "
        "https://docs.pytorch.org/docs/stable/compile/programming_model.graph_breaks_index.html)"
    )


def test_every_kind_of_break_is_found_at_the_line_dynamo_reports():
    source = """\
    import logging
    import warnings

    import torch
    import torch.nn.functional as F
    from torch import nn

    log = logging.getLogger("model")


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.logger = logging.getLogger(__name__)

        def forward(self, x, mask):
            x = self.fc(x)
            logging.info("step")
            log.warning("x %s", x.shape)
            self.logger.debug("y")
            warnings.warn("slow path")
            n = mask.sum()
            if n > 0:
                x = x * mask
            while x.abs().max() > 10:
                x = x / 2
            x = x if x.mean() > 0 else -x
            if not torch.isfinite(x).all() or torch.equal(x, mask):
                x = F.relu(x)
            counts = (x > 0).sum(1).tolist()
            scale = float(x.norm())
            torch._dynamo.graph_break()
            return x * scale * counts[0] * x.sum().item()


    model = torch.compile(Net().cuda())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, mask, y in loader:
        F.mse_loss(model(x, mask), y).backward()
        optimizer.step()
    """
    found = lint(source, select=("TL106",), path="train.py")
    assert [(d.location.line, d.location.column, d.message.split(" in the forward")[0]) for d in found] == [
        (19, 9, "`logging.info(...)`"),
        (20, 9, "`log.warning(...)`"),
        (21, 9, "`self.logger.debug(...)`"),
        (22, 9, "`warnings.warn(...)`"),
        (24, 12, "`if n > 0`"),
        (26, 15, "`while x.abs().max() > 10`"),
        (28, 18, "`if x.mean() > 0`"),
        (29, 16, "`if torch.isfinite(x).all()`"),
        (29, 43, "`if torch.equal(x, mask)`"),
        (31, 18, "`.tolist()`"),
        (32, 17, "`float(x.norm())`"),
        (33, 9, "`torch._dynamo.graph_break()`"),
        (34, 40, "`.item()`"),
    ]


def test_main_with_argparse_and_a_conditional_compile_is_flagged():
    source = """\
    import argparse

    import torch
    from torch import nn


    class Classifier(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 2))

        def forward(self, x):
            out = self.net(x)
            if out.isnan().any():
                raise ValueError(f"NaN in output: {out.sum().item()}")
            return out


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--compile", action="store_true")
        args = parser.parse_args()
        model = Classifier(64).cuda()
        if args.compile:
            model.compile()
        optimizer = torch.optim.Adam(model.parameters())
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        main()
    """
    [(line, message)] = _found(source)
    assert line == 14  # the branch; the `.item()` in the `raise` runs only on the error path
    assert message.startswith(
        "`if out.isnan().any()` in the forward of `Classifier`, which is compiled at line 25: which branch "
        "runs depends on a tensor's value"
    )


def test_a_trainer_class_that_compiles_the_model_it_is_given_reaches_the_forward_and_its_helpers():
    source = """\
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            print("block", x.shape)
            return self.fc(x)


    class Model(nn.Module):
        def __init__(self, dim, depth):
            super().__init__()
            self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])

        def normalise(self, x):
            return x / x.norm().item()

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.normalise(x)


    class Trainer:
        def __init__(self, model, loader):
            self.model = torch.compile(model)
            self.loader = loader
            self.optimizer = torch.optim.AdamW(self.model.parameters())

        def train(self):
            for x, y in self.loader:
                loss = (self.model(x.cuda()) - y.cuda()).pow(2).mean()
                loss.backward()
                self.optimizer.step()
                print(f"loss {loss.item():.3f}")


    Trainer(Model(64, 4).cuda(), loader).train()
    """
    found = _found(source)
    assert [(line, message.split(", which")[0]) for line, message in found] == [
        (11, "`print(...)` in the forward of `Block` (run by the forward of `Model`)"),
        (21, "`.item()` in `Model.normalise` (run by the forward of `Model`)"),
    ]
    assert "which is compiled at line 31" in found[0][1]


def test_the_model_class_in_another_file_is_reported_there_with_the_compile_site(tmp_path):
    models = _net_compiled_in_train(tmp_path)
    found = Linter().check_text(str(models), models.read_text(), settings(select=("TL106",)))
    assert [(d.location.line, said(d).split(": which")[0]) for d in found] == [
        (11, "`if x.sum() > 0` in the forward of `Net`, which is compiled in train.py:6"),
    ]


def _net_compiled_in_train(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    models = tmp_path / "models.py"
    models.write_text(
        textwrap.dedent(
            """\
            import torch
            from torch import nn


            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 2)

                def forward(self, x):
                    if x.sum() > 0:
                        x = -x
                    return self.fc(x)


            class Unused(nn.Module):
                def forward(self, x):
                    print(x)
                    return x
            """
        )
    )
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            import torch

            from models import Net

            model = Net().cuda()
            model = torch.compile(model, mode="max-autotune")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
            """
        )
    )
    return models


def test_where_no_file_compiles_a_module_s_importers_are_not_worked_out(tmp_path, monkeypatch):
    """What a compile site compiles reaches a module only from a file that writes `compile`: where none
    does (yolov5), who imports the checked module is not worked out for TL106 (a scan of the project's
    imports, two levels up)."""
    from torchlint.index.project import Project

    models = _net_compiled_in_train(tmp_path)
    train = tmp_path / "train.py"
    train.write_text(train.read_text().replace('model = torch.compile(model, mode="max-autotune")\n', ""))
    asked = []
    original = Project.importers_of
    monkeypatch.setattr(
        Project, "importers_of", lambda self, path: asked.append(path) or original(self, path)
    )
    models = tmp_path / "models.py"
    assert Linter().check_text(str(models), models.read_text(), settings(select=("TL106",))) == []
    assert asked == []


def test_a_compiled_step_function_is_checked_and_so_is_a_function_compiled_by_name():
    source = """\
    import torch
    import torch.nn.functional as F


    @torch.compile(mode="reduce-overhead")
    def train_step(model, x, y):
        loss = F.cross_entropy(model(x), y)
        print("loss", loss.item())
        return loss


    def evaluate(model, x):
        out = model(x)
        if out.max() > 1:
            out = out.softmax(-1)
        return out


    evaluate_compiled = torch.compile(evaluate)


    @torch.compile
    def bare(x):
        return x.tolist()
    """
    found = _found(source)
    assert [(line, message.split(": ")[0]) for line, message in found] == [
        (8, "`print(...)` in `train_step`, which is compiled at line 5"),
        (8, "`.item()` in `train_step`, which is compiled at line 5"),
        (14, "`if out.max() > 1` in `evaluate`, which is compiled at line 19"),
        (24, "`.tolist()` in `bare`, which is compiled at line 22"),
    ]
    assert "the compiled function runs as several graphs" in found[0][1]


# -- silent -------------------------------------------------------------------------------------------------


def test_a_model_that_is_never_compiled_is_silent():
    source = MODEL + "\n\nmodel = Net().cuda()\n" + LOOP
    assert _found(source) == []


def test_tests_on_python_values_and_guards_that_keep_code_out_of_the_graph_are_silent():
    source = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, debug=False):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.debug = debug
            print("building", self)

        @torch.compiler.disable
        def report(self, x):
            print(x.mean().item())

        def forward(self, x, mask=None):
            if self.training:
                x = x * 2
            if x.dim() == 3 and x.shape[0] > 1 and x.size(1) != 8:
                x = x.flatten(1)
            if mask is None or isinstance(mask, float) or x.numel() == 0:
                mask = 1
            if not torch.compiler.is_compiling():
                print("eager", x.shape)
            if torch.jit.is_scripting():
                print("scripted")
            if self.debug:
                print(x.sum().item())
            assert (x > -100).all(), "diverged"
            self.report(x)
            y = self.fc(x * mask)
            if torch.compiler.is_compiling():
                return y
            print("eager only")
            return y


    model = torch.compile(Net().cuda())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        optimizer.step()
        print(loss.item())
        if loss.isnan().any():
            break
    """
    assert _found(source) == []


def test_a_not_is_scripting_guard_still_runs_under_dynamo():
    source = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def forward(self, x):
            if not torch.jit.is_scripting():
                print(x.shape)
            return x


    model = torch.compile(Net())
    """
    assert _lines(source) == [(8, 13)]


def test_a_model_built_by_a_library_or_an_unknown_factory_is_silent():
    source = """\
    import torch
    from torch import nn
    from transformers import AutoModel


    class Head(nn.Module):
        def forward(self, x):
            print(x)
            return x


    backbone = torch.compile(AutoModel.from_pretrained("bert-base-uncased"))
    other = torch.compile(make_model())
    """
    assert _found(source) == []


def test_the_same_model_in_a_test_file_is_silent():
    source = MODEL + "\n\nmodel = torch.compile(Net())\n" + LOOP
    assert _found(source, path="tests/test_model.py") == []


# -- classes found on the ecosystem (bench/ecosystem) ---------------------------------------------------------


def test_the_forward_of_a_custom_autograd_function_applied_in_a_compiled_forward_is_checked():
    """RWKV-LM's ROSA layers: `ROSA_1bit.apply(...)` runs the Function's forward under Dynamo, which breaks
    at the `.tolist()` inside it (measured on torch 2.13: the break is reported on that line)."""
    source = """\
    import torch
    from torch import nn


    class Rosa(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            bits = (x > 0).long()
            return torch.tensor(match(bits[0].tolist()), device=x.device)

        @staticmethod
        def backward(ctx, grad):
            return grad


    class RosaLayer(nn.Module):
        def forward(self, x):
            return Rosa.apply(x)


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rosa = RosaLayer()

        def forward(self, x):
            return x + self.rosa(x)


    model = torch.compile(Model().cuda())
    """
    assert [(line, message.split(", which")[0]) for line, message in _found(source)] == [
        (9, "`.tolist()` in the forward of `Rosa` (run by the forward of `Model`)"),
    ]


def test_a_method_compiled_through_self_and_a_model_built_by_a_classmethod_are_followed():
    """tdmpc2 compiles `self._update = torch.compile(self._update)`; llm.c compiles
    `LLaMA.from_pretrained_llama3_meta(...)`, a classmethod that builds the model."""
    source = """\
    import torch
    from torch import nn


    class Agent(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.q = nn.Linear(8, 1)
            if cfg.compile:
                self._update = torch.compile(self._update, mode="reduce-overhead")

        def _td_target(self, reward):
            if reward.max() > 1:
                reward = reward.clamp(max=1)
            return reward

        def _update(self, obs, reward):
            target = self._td_target(reward)
            return (self.q(obs) - target).pow(2).mean()


    class LLaMA(nn.Module):
        def forward(self, idx):
            print("tokens", idx.shape)
            return idx

        @classmethod
        def from_pretrained(cls, path):
            return cls()


    model = LLaMA.from_pretrained("weights")
    model = torch.compile(model)
    """
    assert [(line, message.split(": ")[0]) for line, message in _found(source)] == [
        (
            13,
            "`if reward.max() > 1` in `Agent._td_target` (run by `Agent._update`), which is compiled at line 10",
        ),
        (24, "`print(...)` in the forward of `LLaMA`, which is compiled at line 33"),
    ]


def test_a_function_compiled_in_another_file_by_its_module_name_and_what_it_calls_there(tmp_path):
    """litgpt's generate scripts compile `generate_base.next_token`, and `global next_token; next_token =
    torch.compile(next_token)` in the file that defines it."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    base = tmp_path / "pkg" / "base.py"
    base.write_text(
        textwrap.dedent(
            """\
            import torch


            def sample(logits, top_k=None):
                if top_k is not None:
                    logits = logits.topk(top_k).values
                probs = logits.softmax(-1)
                if probs.sum() == 0:
                    return probs.argmax(-1)
                return torch.multinomial(probs, 1)


            def next_token(model, x):
                return sample(model(x)[..., -1, :])


            def main(model, x, compile):
                if compile:
                    global next_token
                    next_token = torch.compile(next_token)
                return next_token(model, x)
            """
        )
    )
    (tmp_path / "tp.py").write_text(
        textwrap.dedent(
            """\
            import torch

            import pkg.base as generate_base

            generate_base.next_token = torch.compile(generate_base.next_token, mode="reduce-overhead")
            """
        )
    )
    found = Linter().check_text(str(base), base.read_text(), settings(select=("TL106",)))
    assert [(d.location.line, said(d).split(": which")[0]) for d in found] == [
        (8, "`if probs.sum() == 0` in `sample` (run by `next_token`), which is compiled at line 20"),
    ]


def test_debug_facts_shows_the_compiled_code_and_its_likely_breaks(tmp_path):
    from click.testing import CliRunner

    from torchlint.cli import main

    script = tmp_path / "train.py"
    script.write_text(MODEL + "\n\nmodel = torch.compile(Net().cuda())\n" + LOOP)
    output = CliRunner().invoke(main, ["debug", "facts", str(script)]).output
    assert (
        "compiled code here (likely graph breaks, TL106):\n"
        "  line 15: the forward of `Net`\n"
        "    line 17: print `print(...)`\n"
    ) in output


@pytest.mark.slow
def test_verify_confirms_each_finding_at_the_line_where_dynamo_breaks(tmp_path):
    """`torchlint verify` links each runtime graph break to the static findings at its line: TL106 sits on
    that line (the `print` call, the `.item()`, the test of the branch)."""
    pytest.importorskip("torch")
    script = textwrap.dedent(
        """\
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.hidden = nn.Linear(8, 16)
                self.out = nn.Linear(16, 1)

            def forward(self, x):
                h = self.hidden(x)
                print("hidden", h.shape)
                scale = h.mean().item()
                if h.sum() > 0:
                    h = h * 2
                return self.out(h) * scale


        torch.manual_seed(0)
        model = torch.compile(Net(), backend="eager")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for step in range(8):
            loss = model(torch.randn(16, 8)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """
    )
    (tmp_path / "train.py").write_text(script, encoding="utf-8")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "torchlint", "verify", "--json", str(report), "train.py", "--steps", "3"]
        + ["--warmup", "2", "--select", "TL106"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert report.is_file(), done.stdout + done.stderr
    summary = json.loads(report.read_text(encoding="utf-8"))["variants"][0]["compile"]
    assert [(b["row"], b["static_findings_there"]) for b in summary["graph_breaks"]] == [
        (13, ["TL106"]),
        (14, ["TL106"]),
        (15, ["TL106"]),
    ]
