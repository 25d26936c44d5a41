"""Issue 28, "what is trained" (TL101): a model is compiled in place only where training runs its forward;
a framework object is never a model; parameters reach the optimizer through a list filled in a loop or a
helper that returns them; a second name for the model behind DDP.

`model.compile()` wraps the module's call (`_call_impl`) only: on torch 2.13 a method that calls `self(x)`
runs the compiled call, one that calls `self.forward(x)` or the submodules directly compiles nothing
(`torch._dynamo.utils.counters` stays empty)."""

from __future__ import annotations

from support import codes_and_lines, facts_of, fix, lint, said, settings

from torchlint.linter import Linter
from torchlint.rules.compile.describe import describe

# -- 1. trained through its forward ----------------------------------------------------------------------

NET = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, x):
        return self.body(x)

    def loss(self, x, y):
        return nn.functional.cross_entropy({logits}, y)


model = Net().cuda()
{extra}optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for x, y in loader:
    optimizer.zero_grad()
    model.loss(x.cuda(), y.cuda()).backward()
    optimizer.step()
"""


def test_a_model_trained_through_a_method_that_calls_the_module_gets_the_in_place_fix():
    """`model.loss(x, y)` calls `self(x)`: the compiled call runs, so `model.compile()` compiles the step
    (found before only when the model was also handed to some call)."""
    source = NET.format(logits="self(x)", extra="")
    [finding] = lint(source, select=("TL101",))
    assert finding.location.line == 17
    assert "model.compile()\n" in fix(source, select=("TL101",))


def test_a_model_trained_through_a_method_that_bypasses_its_call_gets_no_in_place_fix():
    """`model.loss(x, y)` computes with `self.body(x)` (or `self.forward(x)`): `model.compile()` would
    compile nothing the step runs (before: that fix). Trained and never compiled is still true, so the
    finding stays, without a fix, naming the method to compile. Unrun (printing it does not run it), the
    model is not flagged, as before."""
    evaluate = "def evaluate(net):\n    return net.loss(x_val, y_val).item()\n\n\n"
    for logits in ("self.body(x)", "self.forward(x)"):
        source = NET.format(logits=logits, extra="print(model)\n")
        assert codes_and_lines(source, select=("TL101",)) == [], logits
        handed = source.replace("model = Net().cuda()\n", evaluate + "model = Net().cuda()\n")
        handed += "print(evaluate(model))\n"
        [finding] = lint(handed, select=("TL101",))
        assert finding.location.line == 21
        assert finding.fix is None
        assert "it is trained through `model.loss(...)`, which never calls the module itself" in said(finding)
        assert "`model.loss = torch.compile(model.loss)`" in said(finding)


def test_a_model_also_called_directly_keeps_the_in_place_fix():
    source = NET.format(logits="self.body(x)", extra="").replace(
        "    model.loss(x.cuda(), y.cuda()).backward()\n",
        "    model.loss(x.cuda(), y.cuda()).backward()\n    print(model(x.cuda()).shape)\n",
    )
    assert "model.compile()\n" in fix(source, select=("TL101",))


AGENT = """\
import torch
from torch import nn


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        probs = torch.distributions.Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


device = torch.device("cuda")
agent = Agent().to(device)
{extra}optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
{train}
"""

PPO_LOOP = """\
for update in range(1, num_updates + 1):
    for step in range(128):
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
        next_obs, reward, done, info = envs.step(action.cpu().numpy())
    for epoch in range(4):
        _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs, b_actions)
        loss = -(newlogprob * b_adv).mean() + ((newvalue - b_ret) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_an_agent_without_a_forward_gets_no_in_place_fix():
    """An RL agent (cleanrl's PPO shape) has no `forward`: `agent.compile()` would compile nothing (before:
    that fix, once the agent was handed to any call). Used only through its methods and handed nowhere, it
    is not flagged, as before (hkproj/pytorch-transformer train.py:199, a Transformer trained through
    `encode`/`decode`/`project`, keeps its finding without the fix)."""
    assert codes_and_lines(AGENT.format(extra="", train=PPO_LOOP), select=("TL101",)) == []
    source = AGENT.format(extra="writer.add_graph(agent, next_obs)\n", train=PPO_LOOP)
    [finding] = lint(source, select=("TL101",))
    assert finding.location.line == 22
    assert finding.fix is None
    assert "its class `Agent` defines no `forward`, so `.compile()`" in said(finding)
    assert "`agent.get_action_and_value = torch.compile(agent.get_action_and_value)`" in said(finding)


WITH_FORWARD = "    def forward(self, x):\n        return self.actor(x)\n\n    def get_value(self, x):\n"


def test_a_model_handed_to_a_function_that_runs_only_its_methods_gets_no_in_place_fix():
    """`train(agent, optimizer)` is followed: it runs `agent.get_action_and_value(...)` only, which never
    calls the agent itself. Where it calls the agent (`agent(b_obs)`), or where the function cannot be
    followed (imported from a library), the in-place fix stays."""
    train = (
        "def train(agent, optimizer):\n"
        + "".join(f"    {line}\n" for line in PPO_LOOP.splitlines())
        + "\n\ntrain(agent, optimizer)"
    )
    source = AGENT.format(extra="", train=train).replace("    def get_value(self, x):\n", WITH_FORWARD)
    [finding] = lint(source, select=("TL101",))
    assert finding.fix is None
    assert "it is trained through `agent.get_action_and_value(...)`, which never calls" in said(finding)
    called = source.replace("agent.get_action_and_value(b_obs, b_actions)", "agent(b_obs), 0, 0, 0")
    assert "agent = Agent().to(device)\nagent.compile()\n" in fix(called, select=("TL101",))
    unknown = AGENT.format(extra="", train="train(agent, optimizer)").replace(
        "    def get_value(self, x):\n", WITH_FORWARD
    )
    unknown = unknown.replace("import torch\n", "import torch\nfrom rl_lib import train\n", 1)
    assert "agent.compile()\n" in fix(unknown, select=("TL101",))


def test_a_method_reached_through_the_ddp_wrapper_is_a_method_of_the_model():
    source = NET.format(logits="self.body(x)", extra="model = DDP(model)\n").replace(
        "model.loss(", "model.module.loss("
    )
    source = "from torch.nn.parallel import DistributedDataParallel as DDP\n" + source
    [finding] = lint(source, select=("TL101",))
    assert finding.fix is None
    assert "it is trained through `model.loss(...)`" in said(finding)
    calls_itself = source.replace("self.body(x), y)", "self(x), y)")
    assert "model = Net().cuda()\nmodel.compile()\n" in fix(calls_itself, select=("TL101",))


def test_the_reason_a_model_is_not_compiled_in_place_shows_in_debug_facts():
    facts = facts_of(AGENT.format(extra="writer.add_graph(agent, next_obs)\n", train=PPO_LOOP))
    out = "\n".join(describe(facts))
    assert (
        "    not trained through its forward (no in-place compile): its class `Agent` defines no `forward`"
        in out
    )


def test_a_module_used_only_through_an_embedding_weight_is_not_trained_through_its_forward():
    """Word2vec shape: the loop reads `model.center.weight`; the module is never called, and printing it
    does not run it: nothing of it would be compiled."""
    source = """\
import torch
from torch import nn


class SkipGram(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.center = nn.Embedding(vocab, dim)
        self.context = nn.Embedding(vocab, dim)


device = torch.device("cuda")
model = SkipGram(10000, 128).to(device)
print(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for c, o in loader:
    scores = model.center.weight[c.to(device)] @ model.context.weight.T
    loss = nn.functional.cross_entropy(scores, o.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
    assert codes_and_lines(source, select=("TL101",)) == []


def test_a_method_run_only_for_its_side_effect_does_not_make_a_model_trained():
    """`model.init_weights()` alone on its line runs no training compute: the model stays unrun."""
    source = NET.format(logits="self(x)", extra="").replace(
        "    model.loss(x.cuda(), y.cuda()).backward()\n", "    model.init_weights()\n"
    )
    assert codes_and_lines(source, select=("TL101",)) == []


def test_a_model_trained_over_rpc_is_not_flagged():
    """pytorch/examples distributed/rpc/ddp_rpc/main.py:53: RPC's `DistributedOptimizer` over the RRefs of
    a model holding a `RemoteModule`; compiling such a module fails at its first call on torch 2.13
    (`InternalTorchDynamoError`: "Method `named_modules` not supported for RemoteModule")."""
    source = """\
import torch
import torch.distributed.autograd as dist_autograd
import torch.optim as optim
from torch.distributed.optim import DistributedOptimizer
from torch.distributed.rpc import RRef


def run_trainer(remote_emb_module, rank):
    model = HybridModel(remote_emb_module, rank)
    rrefs = model.remote_emb_module.remote_parameters()
    for param in model.fc.parameters():
        rrefs.append(RRef(param))
    opt = DistributedOptimizer(optim.SGD, rrefs, lr=0.05)
    for epoch in range(100):
        for indices, offsets, target in get_next_batch(rank):
            with dist_autograd.context() as context_id:
                loss = criterion(model(indices, offsets), target.cuda(rank))
                dist_autograd.backward(context_id, [loss])
                opt.step(context_id)
"""
    assert codes_and_lines(source, select=("TL101",), device="cuda") == []
    local = source.replace("DistributedOptimizer(optim.SGD, rrefs, lr=0.05)", "optim.SGD(rrefs, lr=0.05)")
    assert codes_and_lines(local, select=("TL101",), device="cuda") == [("TL101", 9)]


# -- 2. a framework object is never a model --------------------------------------------------------------

FABRIC = """\
import torch
import lightning as L


def fit(fabric, model, optimizer, loader):
    for x in loader:
        loss = model(x).sum()
        fabric.backward(loss)
        optimizer.step()


fabric = L.Fabric(accelerator="cuda")
fabric.launch()
model = GPT(config)
optimizer = fabric.setup_optimizers({optimizer})
model = fabric.setup(model)
fit(fabric, model, optimizer, loader)
"""


def test_a_fabric_handed_an_optimizer_built_in_its_call_is_not_a_model():
    """`fabric.setup_optimizers(torch.optim.AdamW(...))` made TL101 insert `fabric.compile()`, which
    crashes; also when what it is handed is not recognisably an optimizer (`make(model)`): the receiver
    is a Lightning `Fabric`."""
    for optimizer in ("torch.optim.AdamW(model.parameters(), lr=1e-3)", "make(model.parameters())"):
        source = FABRIC.format(optimizer=optimizer)
        trained = [said(d).split("`")[1] for d in lint(source, select=("TL101",))]
        assert trained == (["model"] if "AdamW" in optimizer else []), optimizer
        assert "fabric.compile()" not in fix(source, select=("TL101",))


def test_an_accelerator_is_not_a_model():
    source = """\
import torch
from accelerate import Accelerator

accelerator = Accelerator()
model = Net()
optimizer = accelerator.setup_optimizers(make(model.parameters()))
model = accelerator.prepare(model)
train(accelerator, model, optimizer)
"""
    assert codes_and_lines(source, select=("TL101",)) == []


# -- 3. parameters through a list filled in a loop, or a helper that returns them --------------------------

STEP = """\
for x, y in loader:
    x = x.to(device)
    loss = ((decoder(encoder(x)) if two else model(x)) - y.to(device)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_parameters_added_to_a_list_in_a_loop_over_modules_reach_the_optimizer():
    source = (
        """\
import torch

device = torch.device("cuda")
encoder = Encoder().to(device)
decoder = Decoder().to(device)
params = []
for m in (encoder, decoder):
    params += list(m.parameters())
optimizer = torch.optim.Adam(params, lr=1e-3)
"""
        + STEP
    )
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", 4), ("TL101", 5)]


def test_parameters_appended_or_extended_into_a_list_reach_the_optimizer():
    head = 'import torch\n\ndevice = torch.device("cuda")\nmodel = Net().to(device)\nparams = []\n'
    fills = (
        "params.extend(model.parameters())\n",
        "for m in model.modules():\n    if isinstance(m, torch.nn.Linear):\n"
        "        params += list(m.parameters())\n",
        "for name, p in model.named_parameters():\n"
        '    params.append({"params": [p], "weight_decay": 0.0 if "bias" in name else 0.1})\n',
    )
    for fill in fills:
        source = head + fill + "optimizer = torch.optim.AdamW(params, lr=1e-3)\n" + STEP
        assert codes_and_lines(source, select=("TL101",)) == [("TL101", 4)], fill


def test_each_name_the_optimizer_s_parameters_lead_through_is_searched_once(monkeypatch):
    """A long script reaches the same names along many paths (`params` filled three ways, each from
    `model`); each search of an expression, in its scope, at its depth, runs once, and the answer is the
    same (timm's train.py: 6,120 searches, 174 different)."""
    from support import record_calls

    from torchlint.facts.torch.models import ModelAnalysis

    fills = (
        "params.extend(model.parameters())\nparams.extend(model.parameters())\n"
        "params += list(model.parameters())\n"
    )
    source = (
        'import torch\n\ndevice = torch.device("cuda")\nmodel = Net().to(device)\nparams = []\n'
        + fills
        + "optimizer = torch.optim.AdamW(params, lr=1e-3)\noptimizer = torch.optim.AdamW(params, lr=1e-4)\n"
        + STEP
    )
    searches = record_calls(
        monkeypatch, ModelAnalysis, "_search_receivers", lambda self, expr, scope, depth: (id(expr), depth)
    )
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", 4)]
    assert searches and len(searches) == len(set(searches))


def test_a_list_filled_from_something_unknown_names_no_model():
    source = (
        'import torch\n\ndevice = torch.device("cuda")\nmodel = Net().to(device)\nparams = []\n'
        "for m in pick_modules(config):\n    params += list(m.parameters())\n"
        "optimizer = torch.optim.AdamW(params, lr=1e-3)\n" + STEP
    )
    assert codes_and_lines(source, select=("TL101",)) == []


def test_parameters_returned_by_a_helper_reach_the_optimizer():
    source = (
        """\
import torch


def get_params(net, frozen=()):
    return [p for name, p in net.named_parameters() if name not in frozen]


device = torch.device("cuda")
model = Net().to(device)
optimizer = torch.optim.Adam(get_params(model), lr=1e-3)
"""
        + STEP
    )
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", 9)]
    assert "model = Net().to(device)\nmodel.compile()\n" in fix(source, select=("TL101",))


# -- 4. `raw_model = model.module if ddp else model` ---------------------------------------------------------


def test_the_model_behind_a_second_name_for_ddp_is_compiled_before_it_is_wrapped():
    """nanoGPT: the optimizer comes from `raw_model.configure_optimizers(...)`; the finding and the fix are
    on `model` (tests/test_ecosystem_classes.py checks the finding, this the fixed source)."""
    source = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

device = torch.device("cuda")
model = GPT(config)
model.to(device)
if ddp:
    model = DDP(model, device_ids=[local_rank])
raw_model = model.module if ddp else model
optimizer = raw_model.configure_optimizers(weight_decay=0.1, learning_rate=6e-4)
for x in loader:
    model(x).sum().backward()
    optimizer.step()
"""
    assert fix(source, select=("TL101",)) == source.replace(
        "model.to(device)\n", "model.to(device)\nmodel.compile()\n"
    )


def test_a_model_prepared_by_an_accelerator_a_project_helper_builds_with_dynamo_is_compiled(tmp_path):
    """kohya-ss/sd-scripts (fine_tune.py, sd3_train.py, ...; found once parameters filled into lists were
    followed): `accelerator = train_util.prepare_accelerator(args)` builds `Accelerator(dynamo_backend=...)`
    behind `--torch_compile`, and `accelerator.prepare(model)` wraps the model: the author decided."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "train_util.py").write_text(
        "from accelerate import Accelerator\n\n\n"
        "def prepare_accelerator(args):\n"
        '    backend = args.dynamo_backend if args.torch_compile else "NO"\n'
        "    return Accelerator(dynamo_backend=backend)\n"
    )
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n\nimport train_util\n\n"
        "accelerator = train_util.prepare_accelerator(args)\n"
        'model = Net().to("cuda")\n'
        "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)\n"
        "model, optimizer = accelerator.prepare(model, optimizer)\n"
        "for x in loader:\n"
        "    accelerator.backward(model(x).mean())\n"
        "    optimizer.step()\n"
    )
    found = Linter().check_text(str(script), script.read_text(), settings(select=("TL101",)))
    assert [(d.code, d.location.line) for d in found] == []
    (tmp_path / "train_util.py").write_text(
        "from accelerate import Accelerator\n\n\ndef prepare_accelerator(args):\n    return Accelerator()\n"
    )
    found = Linter().check_text(str(script), script.read_text(), settings(select=("TL101",)))
    assert [(d.code, d.location.line) for d in found] == [("TL101", 6)]
