"""Issue 28's named classes for the mixed-precision family (TL301): the forward of a reinforcement-learning
step (not the acting call, not the target network), autocast fixes that would break a run (a hand-written
log of a sigmoid, `F.batch_norm` with computed weights), and a fix that follows the script's device."""

from __future__ import annotations

import textwrap

from click.testing import CliRunner
from support import fix, lint, said

from torchlint.cli import main

TL301 = ("TL301",)


def finding(source: str):
    [found] = lint(source, select=TL301)
    return found


def fixed(source: str) -> str:
    return fix(source, select=TL301)


def wrapped(source: str, region: str, device: str = '"cuda"') -> str:
    """`source` with the lines `region` (as written, indented) under an autocast block."""
    source = textwrap.dedent(source)
    lines = region.splitlines(keepends=True)
    indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
    header = f"{indent}with torch.autocast(device_type={device}, dtype=torch.bfloat16):\n"
    assert region in source
    return source.replace(region, header + "".join("    " + line for line in lines))


# -- 1. reinforcement learning: the forward is the update's, not the acting call's or the target's ----------

DQN_WITH_A_TARGET_NETWORK = """\
import torch
import torch.nn.functional as F

device = torch.device("cuda")
policy_net = DQN().to(device)
target_net = DQN().to(device)
optimizer = torch.optim.Adam(policy_net.parameters(), lr=1e-4)
for episode in range(1000):
    state = env.reset()
    for t in range(500):
        with torch.no_grad():
            action = policy_net(state).max(1)[1].view(1, 1)
        next_state, reward, done = env.step(action.item())
        memory.push(state, action, next_state, reward)
        state = next_state
        batch = memory.sample(128)
        next_values = target_net(batch.next_state).max(1)[0].detach()
        expected = batch.reward + 0.99 * next_values
        q = policy_net(batch.state).gather(1, batch.action)
        loss = F.smooth_l1_loss(q, expected.unsqueeze(1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_rl_target_network_call_before_the_update_is_not_the_forward():
    """The target network's result reaches the loss too, but the optimizer trains `policy_net`: the finding
    sits on the update's `policy_net(batch.state)`, and the fix wraps it and the loss only."""
    found = finding(DQN_WITH_A_TARGET_NETWORK)
    assert (found.location.line, found.location.column) == (19, 13)
    assert said(found).startswith("`policy_net(...)` runs the forward pass")
    assert fixed(DQN_WITH_A_TARGET_NETWORK) == wrapped(
        DQN_WITH_A_TARGET_NETWORK,
        "        q = policy_net(batch.state).gather(1, batch.action)\n"
        "        loss = F.smooth_l1_loss(q, expected.unsqueeze(1))\n",
    )


CLEANRL_DQN = """\
import torch
import torch.nn.functional as F

device = torch.device("cuda")
q_network = QNetwork().to(device)
target_network = QNetwork().to(device)
optimizer = torch.optim.Adam(q_network.parameters(), lr=1e-4)
obs = env.reset()
for global_step in range(total_timesteps):
    with torch.no_grad():
        q_values = q_network(torch.Tensor(obs).to(device))
    actions = torch.argmax(q_values, dim=1).cpu().numpy()
    next_obs, rewards, dones, infos = env.step(actions)
    rb.add(obs, next_obs, actions, rewards, dones)
    obs = next_obs
    data = rb.sample(batch_size)
    with torch.no_grad():
        target_max, _ = target_network(data.next_observations).max(dim=1)
        td_target = data.rewards.flatten() + gamma * target_max * (1 - data.dones.flatten())
    old_val = q_network(data.observations).gather(1, data.actions).squeeze()
    loss = F.mse_loss(td_target, old_val)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_rl_acting_and_target_calls_under_no_grad_are_not_the_forward():
    found = finding(CLEANRL_DQN)
    assert (found.location.line, found.location.column) == (20, 15)
    assert fixed(CLEANRL_DQN) == wrapped(
        CLEANRL_DQN,
        "    old_val = q_network(data.observations).gather(1, data.actions).squeeze()\n"
        "    loss = F.mse_loss(td_target, old_val)\n",
    )


ACTING_WITHOUT_NO_GRAD = """\
import torch
import torch.nn.functional as F

device = torch.device("cuda")
policy_net = DQN().to(device)
optimizer = torch.optim.Adam(policy_net.parameters(), lr=1e-4)
for step in range(100000):
    action = policy_net(state).argmax().item()
    next_state, reward, done = env.step(action)
    memory.push(state, action, next_state, reward)
    state = next_state
    batch = memory.sample(128)
    q = policy_net(batch.state).gather(1, batch.action)
    loss = F.mse_loss(q, batch.target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_rl_acting_call_whose_action_leaves_through_argmax_and_sampling_is_not_the_forward():
    """No `no_grad` here: the acting call's result reaches the loss only through `argmax`/`.item()` and the
    replay buffer's `sample`, none of which carries a gradient."""
    found = finding(ACTING_WITHOUT_NO_GRAD)
    assert (found.location.line, found.location.column) == (13, 9)
    assert fixed(ACTING_WITHOUT_NO_GRAD) == wrapped(
        ACTING_WITHOUT_NO_GRAD,
        "    q = policy_net(batch.state).gather(1, batch.action)\n    loss = F.mse_loss(q, batch.target)\n",
    )


UPDATE_IN_A_STEP_FUNCTION = """\
import torch
import torch.nn.functional as F

device = torch.device("cuda")
policy_net = DQN().to(device)
target_net = DQN().to(device)
optimizer = torch.optim.Adam(policy_net.parameters(), lr=1e-4)


def optimize_model(batch):
    q = policy_net(batch.state).gather(1, batch.action)
    loss = F.smooth_l1_loss(q, batch.target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


for episode in range(1000):
    state = env.reset()
    for t in range(500):
        action = policy_net(state).argmax().item()
        next_state, reward, done = env.step(action)
        memory.push(state, action, next_state, reward)
        state = next_state
        optimize_model(memory.sample(128))
"""


def test_rl_forward_of_the_update_function_is_preferred_to_the_acting_call_of_the_loop():
    """The loop acts and calls the update function, which holds the forward and the backward: the finding
    and the fix are there (before, the acting call got the finding, with no fix)."""
    found = finding(UPDATE_IN_A_STEP_FUNCTION)
    assert (found.location.line, found.location.column) == (11, 9)
    assert fixed(UPDATE_IN_A_STEP_FUNCTION) == wrapped(
        UPDATE_IN_A_STEP_FUNCTION,
        "    q = policy_net(batch.state).gather(1, batch.action)\n"
        "    loss = F.smooth_l1_loss(q, batch.target)\n",
    )


PPO = """\
import torch

device = torch.device("cuda")
agent_net = ActorCritic().to(device)
optimizer = torch.optim.Adam(agent_net.parameters(), lr=3e-4)
for update in range(num_updates):
    for step in range(num_steps):
        with torch.no_grad():
            logits, value = agent_net(next_obs)
        action = torch.distributions.Categorical(logits=logits).sample()
        next_obs, reward, done, info = envs.step(action.cpu().numpy())
        next_obs = torch.Tensor(next_obs).to(device)
    for epoch in range(update_epochs):
        for mb in minibatches:
            new_logits, new_value = agent_net(b_obs[mb])
            ratio = (new_logits - b_logits[mb]).exp()
            loss = -(ratio * b_adv[mb]).mean() + ((new_value - b_returns[mb]) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_rl_ppo_rollout_under_no_grad_is_not_the_forward():
    found = finding(PPO)
    assert (found.location.line, found.location.column) == (15, 37)
    assert fixed(PPO) == wrapped(
        PPO,
        "            new_logits, new_value = agent_net(b_obs[mb])\n"
        "            ratio = (new_logits - b_logits[mb]).exp()\n"
        "            loss = -(ratio * b_adv[mb]).mean() + ((new_value - b_returns[mb]) ** 2).mean()\n",
    )


SAC = """\
import torch
import torch.nn.functional as F

device = torch.device("cuda")
actor = Actor().to(device)
qf1 = SoftQNetwork().to(device)
qf1_target = SoftQNetwork().to(device)
q_optimizer = torch.optim.Adam(qf1.parameters(), lr=1e-3)
for global_step in range(total_timesteps):
    actions, _, _ = actor.get_action(torch.Tensor(obs).to(device))
    next_obs, rewards, dones, infos = envs.step(actions.detach().cpu().numpy())
    data = rb.sample(256)
    with torch.no_grad():
        next_actions, next_log_pi, _ = actor.get_action(data.next_observations)
        qf1_next_target = qf1_target(data.next_observations, next_actions)
        next_q_value = data.rewards.flatten() + gamma * qf1_next_target.view(-1)
    qf1_a_values = qf1(data.observations, data.actions).view(-1)
    qf_loss = F.mse_loss(qf1_a_values, next_q_value)
    q_optimizer.zero_grad()
    qf_loss.backward()
    q_optimizer.step()
"""


def test_rl_sac_critic_update_is_the_forward():
    found = finding(SAC)
    assert (found.location.line, found.location.column) == (17, 20)
    assert fixed(SAC) == wrapped(
        SAC,
        "    qf1_a_values = qf1(data.observations, data.actions).view(-1)\n"
        "    qf_loss = F.mse_loss(qf1_a_values, next_q_value)\n",
    )


A2C_ON_POLICY = """\
import torch

device = torch.device("cuda")
model = ActorCritic().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
for step in range(100000):
    logits, value = model(obs)
    dist = torch.distributions.Categorical(logits=logits)
    action = dist.sample()
    obs, reward, done, _ = env.step(action.item())
    loss = -(dist.log_prob(action) * (reward - value.detach())) + (reward - value) ** 2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_rl_on_policy_acting_call_that_the_loss_differentiates_stays_the_forward():
    """On-policy actor-critic: the acting call is the trained forward (the loss differentiates its
    `log_prob` and its value, not only the sampled action), so the finding stays on it."""
    found = finding(A2C_ON_POLICY)
    assert (found.location.line, found.location.column) == (7, 21)
    assert found.fix is None  # `env.step(...)` sits between the forward and the loss: nothing is wrapped


GAN_DISCRIMINATOR_STEP = """\
import torch

device = torch.device("cuda")
generator = Generator().to(device)
discriminator = Discriminator().to(device)
optim_g = torch.optim.Adam(generator.parameters())
optim_d = torch.optim.Adam(discriminator.parameters())
for x, y in loader:
    y_g_hat = generator(x.to(device))
    d_real, d_fake = discriminator(y.to(device)), discriminator(y_g_hat.detach())
    loss_disc = ((1 - d_real) ** 2).mean() + (d_fake**2).mean()
    optim_d.zero_grad()
    loss_disc.backward()
    optim_d.step()
"""


def test_gan_generator_forward_before_a_detached_discriminator_step_stays_the_forward():
    """A detached generator output still feeds the discriminator's loss: both networks are trained, and
    the fix keeps wrapping from the generator's forward (hifi-gan's step)."""
    found = finding(GAN_DISCRIMINATOR_STEP)
    assert (found.location.line, found.location.column) == (9, 15)
    assert fixed(GAN_DISCRIMINATOR_STEP) == wrapped(
        GAN_DISCRIMINATOR_STEP,
        "    y_g_hat = generator(x.to(device))\n"
        "    d_real, d_fake = discriminator(y.to(device)), discriminator(y_g_hat.detach())\n"
        "    loss_disc = ((1 - d_real) ** 2).mean() + (d_fake**2).mean()\n",
    )


# -- 2. a hand-written log of a sigmoid: bfloat16 rounds every confident probability to 1, log(1 - 1) = -inf ----

NO_FIX_LOG = "(no automatic fix: a hand-written log of a probability"


def loop_with_loss(*lines: str, prelude: str = "") -> str:
    body = "".join(f"    {line}\n" for line in lines)
    return (
        "import numpy as np\nimport torch\nimport torch.nn.functional as F\n\n"
        f"{prelude}"
        "model = Discriminator().cuda()\n"
        "optimizer = torch.optim.Adam(model.parameters())\n"
        "for x, y in loader:\n"
        "    optimizer.zero_grad()\n"
        f"{body}"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )


HAND_WRITTEN_LOG_LOSSES = {
    "minus log of one minus sigmoid": (
        "logits = model(x.cuda())",
        "loss = (-torch.log(1 - torch.sigmoid(logits)) - torch.log(torch.sigmoid(y.cuda()))).mean()",
    ),
    "log of a sigmoid": ("loss = -torch.log(torch.sigmoid(model(x.cuda()))).mean()",),
    "binary cross-entropy through a name": (
        "p = torch.sigmoid(model(x.cuda()))",
        "loss = -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()",
    ),
    "probabilities from the model (a Sigmoid layer elsewhere)": (
        "output = model(x.cuda())",
        "loss = -torch.trace(torch.matmul(y, torch.log(output).t()) + torch.matmul(1 - y, torch.log(1 - output).t()))",
    ),
    "the log method": ("loss = -(1 - model(x.cuda()).sigmoid()).log().mean()",),
    "log1p of a negated probability": ("loss = -torch.log1p(-model(x.cuda()).sigmoid()).mean()",),
}


def test_hand_written_log_of_a_sigmoid_gets_no_autocast_fix():
    for name, lines in HAND_WRITTEN_LOG_LOSSES.items():
        source = loop_with_loss(*lines)
        found = finding(source)
        assert found.fix is None, name
        assert NO_FIX_LOG in said(found), name
        assert "`F.binary_cross_entropy_with_logits`" in said(found), name
        assert fixed(source) == source, name


def test_project_log_helper_of_one_minus_a_sigmoid_gets_no_autocast_fix():
    """DALLE2's VQGAN losses: `log` is the project's `torch.log(t.clamp(min=eps))`."""
    source = loop_with_loss(
        "fake = model(x.cuda())",
        "loss = (-log(1 - torch.sigmoid(fake))).mean()",
        prelude="def log(t, eps=1e-10):\n    return torch.log(t.clamp(min=eps))\n\n\n",
    )
    assert NO_FIX_LOG in said(finding(source))
    assert fixed(source) == source


def test_losses_from_logits_and_other_logs_keep_the_autocast_fix():
    for lines in (
        ("loss = F.binary_cross_entropy_with_logits(model(x.cuda()), y.cuda())",),
        ("loss = -F.logsigmoid(model(x.cuda())).mean()",),
        ("out = model(x.cuda())", "loss = -torch.log(torch.softmax(out, -1)).mean() + np.log(1 - 0.5)"),
        ("out = model(x.cuda())", "loss = (torch.sigmoid(out) - y.cuda()).pow(2).mean()"),
    ):
        source = loop_with_loss(*lines)
        assert finding(source).fix is not None, lines
        assert "with torch.autocast(" in fixed(source), lines


# -- 3. F.batch_norm with computed weights and float32 running statistics raises under autocast ------------

NO_FIX_BATCH_NORM = "(no automatic fix: `F.batch_norm(...)` is given computed weights"

ADAIN = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class AdaptiveInstanceNorm2d(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.weight = None
        self.bias = None
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        b, c = x.size(0), x.size(1)
        running_mean = self.running_mean.repeat(b)
        running_var = self.running_var.repeat(b)
        x_reshaped = x.contiguous().view(1, b * c, *x.size()[2:])
        out = F.batch_norm(x_reshaped, running_mean, running_var, self.weight, self.bias, True, 0.1, 1e-5)
        return out.view(b, c, *x.size()[2:])


model = Generator().cuda()
optimizer = torch.optim.Adam(model.parameters())
for x, y in loader:
    optimizer.zero_grad()
    loss = F.l1_loss(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
"""


def test_batch_norm_with_computed_weights_and_running_statistics_gets_no_autocast_fix():
    """MUNIT's AdaIN: weights assigned from an MLP's output, float32 running statistics: under autocast the
    weights come in bfloat16 and `batch_norm` raises (expected scalar type BFloat16 but found Float)."""
    found = finding(ADAIN)
    assert found.location.line == 27
    assert found.fix is None
    assert NO_FIX_BATCH_NORM in said(found)
    conditional = ADAIN.replace(
        "self.weight, self.bias, True, 0.1, 1e-5", "weight=gamma, bias=beta, training=True"
    )
    assert NO_FIX_BATCH_NORM in said(finding(conditional))


def test_batch_norm_with_parameters_or_without_running_statistics_keeps_the_autocast_fix():
    parameters = ADAIN.replace(
        "self.weight = None\n        self.bias = None",
        "self.weight = nn.Parameter(torch.ones(num_features))\n"
        "        self.bias = nn.Parameter(torch.zeros(num_features))",
    )
    no_statistics = ADAIN.replace("running_mean, running_var, self.weight", "None, None, self.weight")
    inherited = ADAIN.replace("(nn.Module)", "(nn.BatchNorm2d)").replace(
        "        self.weight = None\n        self.bias = None\n", ""
    )
    for source in (parameters, no_statistics, inherited):
        assert finding(source).fix is not None
        assert "with torch.autocast(" in fixed(source)


def test_log_of_a_sigmoid_under_no_grad_does_not_take_the_autocast_fix_away():
    """GAIL's reward `s.log() - (1 - s).log()` from its discriminator, under `no_grad`: no loss."""
    source = loop_with_loss(
        "loss = F.binary_cross_entropy_with_logits(model(x.cuda()), y.cuda())",
        prelude=(
            "def predict_reward(d):\n    with torch.no_grad():\n        s = torch.sigmoid(d)\n"
            "        return s.log() - (1 - s).log()\n\n\n"
        ),
    )
    assert finding(source).fix is not None


# -- 4. the fix follows the script's device: never "cuda" where the device may be the CPU -------------------

DEVICE_LOOP = """\
import torch

{device}
model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    optimizer.step()
"""


def test_autocast_fix_follows_a_device_the_script_picks_in_any_form():
    """A `torch.device` (tests/test_ecosystem_classes.py has the first), the accelerator's, a device type in
    a string (kuangliu/pytorch-cifar), strings with an index, and a string made a `torch.device` later."""
    for device, expected in (
        ('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', "device.type"),
        (
            "if torch.accelerator.is_available():\n    device = torch.accelerator.current_accelerator()\n"
            'else:\n    device = torch.device("cpu")',
            "device.type",
        ),
        ("device = 'cuda' if torch.cuda.is_available() else 'cpu'", "device"),
        ('device = "cuda:0" if torch.cuda.is_available() else "cpu"', "torch.device(device).type"),
        (
            'device = "cuda" if torch.cuda.is_available() else "cpu"\ndevice = torch.device(device)',
            "torch.device(device).type",
        ),
    ):
        result = fixed(DEVICE_LOOP.format(device=device))
        assert f"    with torch.autocast(device_type={expected}, dtype=torch.bfloat16):\n" in result, device


def test_autocast_fix_names_cuda_where_the_device_is_cuda_or_cannot_be_read():
    for device in (
        'device = "cuda"',
        "device = args.device if torch.cuda.is_available() else 'cpu'",
        "device = 'tpu' if torch.cuda.is_available() else 'cpu'",
    ):
        result = fixed(DEVICE_LOOP.format(device=device))
        assert '    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):\n' in result, device


TRAIN_FUNCTION = """\
import torch


def train(model, device, loader, optimizer):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        optimizer.step()


def main():
    use_accel = torch.accelerator.is_available()
    if use_accel:
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    model = Net().to(device)
    train(model, device, loader, torch.optim.SGD(model.parameters(), lr=0.1))
"""


def test_autocast_fix_follows_a_device_passed_to_the_training_function():
    """pytorch/examples' mnist: `train(args, model, device, ...)` called by `main()` with the accelerator or
    the CPU; the fix names the parameter's type. A caller passing something unreadable keeps "cuda"."""
    assert "    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):\n" in fixed(
        TRAIN_FUNCTION
    )
    unknown = TRAIN_FUNCTION.replace(
        "    train(model, device, loader", "    train(model, args.device, loader"
    )
    assert '    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):\n' in fixed(unknown)


def test_debug_facts_say_why_the_module_gets_no_autocast_fix(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(ADAIN, encoding="utf-8")
    result = CliRunner().invoke(main, ["debug", "facts", str(script)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "  no autocast fix: `F.batch_norm(...)` is given computed weights (`self.weight`)" in result.output
