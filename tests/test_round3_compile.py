"""Round-3 compile-family (TL101) classes from unseen repositories (bench/ecosystem/findings.tsv): an RNN model
that normalises its output with tensor maths, and a loss module whose parameters join the optimizer's."""

from __future__ import annotations

import pytest
from support import codes_and_lines

HEAD = """\
import torch
import torch.nn as nn

"""

TRAIN = """\
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(20):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

SPEAKER_ENCODER = """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(40, 256, 3, batch_first=True)
        self.linear = nn.Linear(256, 256)
        self.relu = nn.ReLU()

    def forward(self, x, hidden_init=None):
        out, (hidden, cell) = self.lstm(x, hidden_init)
        embeds_raw = self.relu(self.linear(hidden[-1]))
        embeds = embeds_raw / ({norm} + 1e-5)
        return embeds
"""


@pytest.mark.parametrize(
    "norm",
    [
        "torch.norm(embeds_raw, dim=1, keepdim=True)",
        "embeds_raw.norm(dim=1, keepdim=True)",
        "torch.linalg.vector_norm(embeds_raw, dim=1, keepdim=True)",
        "embeds_raw.pow(2).sum(dim=1, keepdim=True).sqrt()",
    ],
)
def test_rnn_model_that_l2_normalises_its_output_is_not_flagged(norm: str) -> None:
    """N-RTVC (CorentinJ Real-Time-Voice-Cloning encoder/train.py:38): LSTM -> Linear -> ReLU, then an L2
    normalisation written as tensor maths; Dynamo runs the LSTM eagerly, the normalisation is light work."""
    source = HEAD + SPEAKER_ENCODER.format(norm=norm) + "\n\n" + TRAIN
    assert codes_and_lines(source, select=("TL101",)) == []


def test_rnn_model_whose_layers_are_placed_where_built_is_not_flagged() -> None:
    """N-RTVC as written: each layer is moved as it is built (`self.lstm = nn.LSTM(...).to(device)`); the
    placement does not hide the layer."""
    classes = (
        SPEAKER_ENCODER.format(norm="torch.norm(embeds_raw, dim=1, keepdim=True)")
        .replace("batch_first=True)", "batch_first=True).to(device)")
        .replace("nn.Linear(256, 256)", "nn.Linear(256, 256).cuda()")
    )
    assert ".to(device)" in classes
    assert codes_and_lines(HEAD + classes + "\n\n" + TRAIN, select=("TL101",)) == []


def test_rnn_model_with_functional_normalize_is_not_flagged() -> None:
    """N-RTVC sibling: `F.normalize` after the LSTM's last state."""
    source = HEAD + SPEAKER_ENCODER.replace(
        "embeds_raw / ({norm} + 1e-5)", "nn.functional.normalize(embeds_raw, p=2, dim=1)"
    )
    assert codes_and_lines(source + "\n\n" + TRAIN, select=("TL101",)) == []


def test_conv_model_that_normalises_its_output_is_still_flagged() -> None:
    """A normalisation is light only next to an RNN: a convolutional model around it is still flagged."""
    classes = (
        SPEAKER_ENCODER.format(norm="torch.norm(embeds_raw, dim=1, keepdim=True)")
        .replace("nn.LSTM(40, 256, 3, batch_first=True)", "nn.Conv1d(40, 256, 3)")
        .replace("out, (hidden, cell) = self.lstm(x, hidden_init)", "hidden = self.lstm(x)")
    )
    source = HEAD + classes + "\n\n" + TRAIN
    line = len((HEAD + classes + "\n\n").splitlines()) + 2
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", line)]


LOSS_TRAIN = """\
class SplitCrossEntropyLoss(nn.Module):
    def __init__(self, hidden_size, splits):
        super().__init__()
        self.tail_vectors = nn.Parameter(torch.zeros(len(splits), hidden_size))

    def forward(self, weight, bias, hiddens, targets):
        return torch.masked_select(hiddens, targets > 0).sum() + self.tail_vectors.sum()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


model = Net()
{name} = {build}
if args.cuda:
    model = model.cuda()
    {name} = {name}.cuda()
params = list(model.parameters()) + list({name}.parameters())
optimizer = torch.optim.SGD(params, lr=0.1)
for epoch in range(20):
    for x, y in loader:
        output = model(x.cuda())
        loss = {name}(model.fc.weight, model.fc.bias, output, y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("criterion", "SplitCrossEntropyLoss(400, splits=[])"),
        ("split_loss", "SplitCrossEntropyLoss(400, splits=[])"),
        ("criterion", "make_loss(400)"),
        ("loss_fn", "make_loss(400)"),
        ("crit", "nn.CrossEntropyLoss(weight=w)"),
    ],
)
def test_loss_module_whose_parameters_reach_the_optimizer_is_not_a_model_to_compile(
    name: str, build: str
) -> None:
    """N-AWD2 (salesforce awd-lstm-lm main.py:235): `params = list(model.parameters()) +
    list(criterion.parameters())`; the criterion (class ending in Loss/Criterion, or bound to a name like
    criterion/loss_fn) is a loss, not a trained model: only `model` is reported."""
    source = HEAD + LOSS_TRAIN.format(name=name, build=build)
    model_line = source.splitlines().index("model = Net()") + 1
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", model_line)]
