"""A function that runs one training step per call (its own backward and optimizer step) runs every step
wherever its loop is: an RL agent's `update_parameters` called by the script's loop, a `train_step` the loop
of the same file calls. What it reads from the GPU it reads every step (TL501); and the losses a backward's
total sums (`qf_loss = qf1_loss + qf2_loss`) are as much on the device as the total. Shapes from
pytorch-soft-actor-critic and vit-pytorch, judged misses of the ecosystem check."""

from __future__ import annotations

import textwrap

from support import settings

from torchlint.linter import Linter

AGENT = """\
import torch
import torch.nn.functional as F
from torch.optim import Adam


class SAC:
    def __init__(self, args):
        self.device = torch.device("cuda" if args.cuda else "cpu")
        self.critic = QNetwork().to(self.device)
        self.critic_optim = Adam(self.critic.parameters(), lr=args.lr)

    def update_parameters(self, memory, batch_size, updates):
        state, target = memory.sample(batch_size)
        qf1, qf2 = self.critic(state)
        qf1_loss = F.mse_loss(qf1, target)
        qf2_loss = F.mse_loss(qf2, target)
        qf_loss = qf1_loss + qf2_loss
        self.critic_optim.zero_grad()
        qf_loss.backward()
        self.critic_optim.step()
        if updates % 100 == 0:
            print(qf_loss.item())
        entropy = torch.tensor(0.0).to(self.device)
        return qf1_loss.item(), qf2_loss.item()
"""

SCRIPT = """\
from sac import SAC

agent = SAC(args)
updates = 0
for episode in range(args.episodes):
    for step in range(args.updates_per_step):
        q1, q2 = agent.update_parameters(memory, args.batch_size, updates)
        updates += 1
"""


def reads(tmp_path, files: dict[str, str], checked: str, select: str = "TL501") -> list[tuple[int, int]]:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    path = tmp_path / checked
    found = Linter().check_text(str(path), path.read_text(), settings(select=(select,)))
    return [(d.location.line, d.location.column) for d in found]


def test_an_agent_update_called_by_the_script_loop_reads_every_step(tmp_path):
    # the print under `updates % 100` is occasional (a parameter changes from call to call)
    files = {"sac.py": AGENT, "main.py": SCRIPT}
    assert reads(tmp_path, files, "sac.py") == [(24, 16), (24, 33)]
    assert reads(tmp_path, files, "sac.py", select="TL507") == [(23, 19)]  # built on the host each update


def test_an_update_nobody_calls_in_a_loop_is_silent(tmp_path):
    once = "from sac import SAC\n\nagent = SAC(args)\nagent.update_parameters(memory, 64, 0)\n"
    assert reads(tmp_path, {"sac.py": AGENT, "main.py": once}, "sac.py") == []


def test_an_update_on_the_cpu_is_silent(tmp_path):
    cpu = AGENT.replace('torch.device("cuda" if args.cuda else "cpu")', 'torch.device("cpu")')
    assert reads(tmp_path, {"sac.py": cpu, "main.py": SCRIPT}, "sac.py") == []


def test_a_train_step_the_loop_of_its_own_file_calls(tmp_path):
    script = """\
    import torch

    model = Net().cuda()
    optimizer = torch.optim.AdamW(model.parameters())


    def train_step(x, y, step):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        aux_loss = model.aux()
        total = loss + aux_loss * 0.1
        total.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 50 == 0:
            print(f"{total.item():.3f}")
        return loss.item()


    for step, (x, y) in enumerate(loader):
        losses.append(train_step(x.cuda(), y.cuda(), step))
    """
    assert reads(tmp_path, {"train.py": script}, "train.py") == [(16, 12)]


def test_terms_of_the_backwarded_sum_named_as_losses_are_read_every_step(tmp_path):
    script = """\
    import torch

    model = ViT().cuda()
    optim = torch.optim.Adam(model.parameters())
    for images, labels in loader:
        logits, decorr_aux_loss = model(images.cuda())
        loss = torch.nn.functional.cross_entropy(logits, labels.cuda())
        total_loss = loss + decorr_aux_loss * WEIGHT
        print(f"loss: {loss.item():.3f} | aux: {decorr_aux_loss.item():.3f} | w: {float(WEIGHT)}")
        total_loss.backward()
        optim.step()
    """
    assert reads(tmp_path, {"train.py": script}, "train.py") == [(9, 20), (9, 45)]


def test_the_step_closure_a_factory_returns_with_micro_batches_inside(tmp_path):
    # BigGAN's shape: train.py's loop calls `train(x, y)`, the closure `train_fns.make_train(...)` returned;
    # its backward runs in a loop of micro-batches, its optimizer step once per call
    train_fns = """\
    import torch


    def make_train(G, D, config):
        def train(x, y):
            G.optim.zero_grad()
            for index in range(config["accumulations"]):
                G_loss = D(G(x)).mean() / float(config["accumulations"])
                G_loss.backward()
            G.optim.step()
            return {"G_loss": float(G_loss.item())}

        return train


    def make_dummy():
        def train(x, y):
            return {}

        return train
    """
    script = """\
    import train_fns

    G, D = Generator().cuda(), Discriminator().cuda()
    if config["debug"]:
        train = train_fns.make_dummy()
    else:
        train = train_fns.make_train(G, D, config)
    for epoch in range(config["epochs"]):
        for x, y in loader:
            metrics = train(x.cuda(), y.cuda())
    """
    files = {"train_fns.py": train_fns, "train.py": script}
    assert reads(tmp_path, files, "train_fns.py") == [(11, 33)]  # `loss / float(setting)`: still the tensor


def test_a_loss_handed_to_a_closure_that_runs_backward_on_it(tmp_path):
    # timm's train_one_epoch: `_backward(loss)`, a closure of the loop's function, runs the backward pass
    script = """\
    import torch


    def train_one_epoch(model, loader, optimizer, loss_scaler=None):
        for input, target in loader:
            input, target = input.cuda(), target.cuda()

            def _backward(_loss):
                if loss_scaler is not None:
                    loss_scaler(_loss, optimizer)
                else:
                    _loss.backward()
                    optimizer.step()

            loss = torch.nn.functional.cross_entropy(model(input), target)
            _backward(loss)
            losses.update(loss.item(), input.size(0))
    """
    assert reads(tmp_path, {"train.py": script}, "train.py") == [(17, 23)]
