"""Compile-family (TL1xx) classes of error that judging findings on unseen repositories found
(bench/ecosystem/findings.tsv), each reproduced small: what a model computes (an RNN that Dynamo runs eagerly,
one layer behind a thin wrapper), optimizers with compound names, and a model's second name rebound after the
optimizer was built.
"""

from __future__ import annotations

import pytest
from support import codes_and_lines, lint, said

TRAIN = """\
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = {build}.to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(20):
    for x, y in loader:
        loss = criterion(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

HEAD = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence

"""


def tl101(classes: str, build: str = "Net()", head: str = HEAD) -> list[tuple[str, int]]:
    source = head + classes + "\n\n" + TRAIN.format(build=build)
    return codes_and_lines(source, select=("TL101",))


def model_line(classes: str, head: str = HEAD) -> int:
    return len((head + classes + "\n\n").splitlines()) + 2


# -- 1. a model whose compute is an nn.LSTM / GRU / RNN --------------------------------------------------

RNN_MODELS = {
    "zeros states, a 2-layer LSTM and one Linear": """\
class Net(nn.Module):
    def __init__(self, input_size=28, hidden_size=128, num_layers=2, num_classes=10):
        super(Net, self).__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, num_classes)

    def forward(self, x):
        h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(x.device)
        c0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(x.device)
        out, _ = self.lstm(x, (h0, c0))
        out = self.fc(out[:, -1, :])
        return out
""",
    "a language model: Embedding, LSTM, reshape, Linear": """\
class Net(nn.Module):
    def __init__(self, vocab_size=1000, embed_size=128, hidden_size=1024, num_layers=1):
        super(Net, self).__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, vocab_size)

    def forward(self, x, h=None):
        x = self.embed(x)
        out, (h, c) = self.lstm(x, h)
        out = out.reshape(out.size(0) * out.size(1), out.size(2))
        out = self.linear(out)
        return out, (h, c)
""",
    "a caption decoder: Embedding, cat, pack_padded_sequence, LSTM, Linear": """\
class Net(nn.Module):
    def __init__(self, embed_size=256, hidden_size=512, vocab_size=1000, num_layers=1):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, vocab_size)

    def forward(self, features, captions, lengths):
        embeddings = self.embed(captions)
        embeddings = torch.cat((features.unsqueeze(1), embeddings), 1)
        packed = pack_padded_sequence(embeddings, lengths, batch_first=True)
        hiddens, _ = self.lstm(packed)
        return self.linear(hiddens[0])

    def sample(self, features, states=None):
        inputs = features.unsqueeze(1)
        for i in range(20):
            hiddens, states = self.lstm(inputs, states)
            outputs = self.linear(hiddens.squeeze(1))
        return outputs
""",
    "a bidirectional GRU with dropout, a norm and an activation head": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(input_size=28, hidden_size=64, batch_first=True, bidirectional=True)
        self.batchnorm = nn.BatchNorm1d(128)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(128, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, input):
        self.rnn.flatten_parameters()
        output, hidden = self.rnn(input.reshape(-1, 28, 28))
        output = self.dropout(self.batchnorm(output[:, -1, :]))
        output = F.relu(self.fc1(output))
        return F.log_softmax(self.fc2(output), dim=1)
""",
    "an nn.RNN inside a project submodule": """\
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(32, 64, nonlinearity="tanh")

    def forward(self, x):
        return self.rnn(x)[0]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(64, 10))

    def forward(self, x):
        return self.head(self.encoder(x)[-1])
""",
    "an LSTM or a GRU, chosen by a flag": """\
class Net(nn.Module):
    def __init__(self, cell="lstm"):
        super().__init__()
        if cell == "lstm":
            self.rnn = nn.LSTM(32, 64)
        else:
            self.rnn = nn.GRU(32, 64)
        self.out = nn.Linear(64, 10)

    def forward(self, x):
        return self.out(self.rnn(x)[0][-1])
""",
}


@pytest.mark.parametrize("name", RNN_MODELS)
def test_a_model_whose_compute_is_an_rnn_module_is_not_asked_to_compile(name):
    """yunjey+pytorch-tutorial (rows at recurrent_neural_network/main.py:60, bidirectional_...:60,
    language_model/main.py:52, image_captioning/train.py:41): Dynamo runs `nn.LSTM`/`GRU`/`RNN` eagerly
    (`torch._dynamo.config.allow_rnn` is False), and what is left around them (embeddings, linears, dropout,
    reshapes) is no work to fuse: on torch 2.13 `torch.compile` captures no graph of such a model."""
    assert tl101(RNN_MODELS[name]) == []


def test_a_bare_lstm_trained_as_the_model_is_not_asked_to_compile():
    """The RNN class generalised to a built-in `nn.LSTM` trained as it is."""
    assert tl101("", build="nn.LSTM(32, 64, num_layers=2)") == []


STILL_WORTH_COMPILING = {
    "a convolution before the LSTM (a CRNN)": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 3, padding=1)
        self.lstm = nn.LSTM(32 * 28, 128, batch_first=True)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv(x))
        out, _ = self.lstm(x.permute(0, 2, 1, 3).flatten(2))
        return self.fc(out[:, -1])
""",
    "a transformer layer after the GRU": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(64, 64, batch_first=True)
        self.block = nn.TransformerEncoderLayer(64, 4, batch_first=True)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.fc(self.block(out)[:, 0])
""",
    "attention written out over the LSTM's outputs": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(64, 64, batch_first=True)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        weights = F.softmax(torch.bmm(out, h[-1].unsqueeze(2)).squeeze(2), dim=1)
        context = torch.bmm(out.transpose(1, 2), weights.unsqueeze(2)).squeeze(2)
        return self.fc(context)
""",
    "an LSTMCell stepped in a loop (cells are traced)": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(64, 64)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        h = c = torch.zeros(x.size(1), 64, device=x.device)
        for t in range(x.size(0)):
            h, c = self.cell(x[t], (h, c))
        return self.fc(h)
""",
    "an RNN class picked by name (`getattr(nn, kind)`)": """\
class Net(nn.Module):
    def __init__(self, kind="LSTM"):
        super().__init__()
        self.rnn = getattr(nn, kind)(64, 64)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][-1])
""",
    "a module handed in from outside next to the LSTM": """\
class Net(nn.Module):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.lstm = nn.LSTM(64, 64)

    def forward(self, x):
        return self.lstm(self.backbone(x))[0]
""",
}


@pytest.mark.parametrize("name", STILL_WORTH_COMPILING)
def test_a_model_with_work_beside_its_rnn_is_still_asked_to_compile(name):
    """The RNN exemption (yunjey rows) needs every other layer to be light: a convolution, a transformer
    block, attention by hand (`bmm`), an RNN cell (Dynamo traces cells), or a module it cannot see keeps
    TL101."""
    classes = STILL_WORTH_COMPILING[name]
    build = "Net(nn.Identity())" if "backbone" in classes else "Net()"
    assert tl101(classes, build=build) == [("TL101", model_line(classes))]


def test_an_rnn_model_is_asked_to_compile_where_the_script_lets_dynamo_trace_rnns():
    """`torch._dynamo.config.allow_rnn = True` makes Dynamo trace the RNN: the exemption (yunjey rows) no
    longer holds."""
    classes = RNN_MODELS["a language model: Embedding, LSTM, reshape, Linear"]
    head = HEAD + "torch._dynamo.config.allow_rnn = True\n\n"
    assert tl101(classes, head=head) == [("TL101", model_line(classes, head))]


# -- 2. one built-in layer behind a thin project wrapper ---------------------------------------------------

ONE_LAYER_WRAPPERS = {
    "view + Linear": """\
class Net(nn.Module):
    \"\"\"Linear layer to train on top of frozen features\"\"\"

    def __init__(self, dim=768, num_labels=1000):
        super(Net, self).__init__()
        self.num_labels = num_labels
        self.linear = nn.Linear(dim, num_labels)
        self.linear.weight.data.normal_(mean=0.0, std=0.01)
        self.linear.bias.data.zero_()

    def forward(self, x):
        x = x.view(x.size(0), -1)
        return self.linear(x)
""",
    "nn.Flatten + Linear in a Sequential": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(768, 10))

    def forward(self, x):
        return self.head(x)
""",
    "one convolution": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3)

    def forward(self, x):
        return self.conv(x.contiguous())
""",
}


@pytest.mark.parametrize("name", ONE_LAYER_WRAPPERS)
def test_a_project_module_that_applies_one_builtin_layer_counts_as_one_layer(name):
    """facebookresearch+dino eval_linear.py:60: `LinearClassifier` is `x.view(...)` and one `nn.Linear`:
    one kernel, nothing for the compiler to fuse, as for a bare `nn.Linear`."""
    assert tl101(ONE_LAYER_WRAPPERS[name]) == []


MORE_THAN_ONE_LAYER = {
    "two linears and an activation": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(768, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.view(x.size(0), -1))))
""",
    "a linear and arithmetic on its output": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(768, 10)

    def forward(self, x):
        return self.linear(x) * 2.0 + 1.0
""",
    "a linear and a normalisation": """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(768, 10)

    def forward(self, x):
        return F.normalize(self.linear(x), dim=-1)
""",
}


@pytest.mark.parametrize("name", MORE_THAN_ONE_LAYER)
def test_a_project_module_with_more_than_one_layer_of_work_is_still_asked_to_compile(name):
    """The one-layer exemption (dino row) looks through a wrapper only when it applies one layer and reshapes."""
    classes = MORE_THAN_ONE_LAYER[name]
    assert tl101(classes) == [("TL101", model_line(classes))]


# -- 3. optimizer classes with compound names --------------------------------------------------------------


@pytest.mark.parametrize(
    "optimizer",
    [
        "MuonAdamAtan2(params=model.parameters(), lr=3e-4)",
        "AdamAtan2(model.parameters(), lr=3e-4)",
        "SophiaG(model.parameters(), lr=2e-4)",
        "DistributedShampoo(model.parameters(), lr=1e-3)",
        "StableAdamW(model.parameters())",
        "SAM(model.parameters(), torch.optim.SGD, lr=0.1)",
    ],
)
def test_a_third_party_optimizer_named_after_a_known_family_trains_the_model(optimizer):
    """lucidrains+x-transformers train_with_muon.py:48: `MuonAdamAtan2(params=model.parameters())` from
    adam_atan2_pytorch: a class whose name holds a known optimizer family (Adam, Muon, Sophia, Shampoo)."""
    source = f"""\
import torch
from optimizers import {optimizer.split("(")[0]}

model = Transformer().cuda()
optim = {optimizer}
for step in range(100000):
    loss = model(next(train_loader))
    loss.backward()
    optim.step()
    optim.zero_grad()
"""
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", 4)]


@pytest.mark.parametrize(
    "call",
    [
        "AdamConfig(params=model.parameters())",
        "ExponentialMovingAverage(model.parameters(), decay=0.995)",
        "LambdaLR(model.parameters())",
        "AdamaxHelper(model.parameters())",
        "MuonScheduler(model.parameters())",
    ],
)
def test_a_class_that_only_mentions_an_optimizer_family_does_not_train_the_model(call):
    """The family match (x-transformers row) needs the name as a whole word of the class name, and not a
    config, scheduler or other helper: these do not build an optimizer."""
    source = f"""\
import torch
from helpers import {call.split("(")[0]}

model = Transformer().cuda()
thing = {call}
for step in range(100000):
    loss = model(next(train_loader))
    loss.backward()
"""
    assert codes_and_lines(source, select=("TL101",)) == []


# -- 4. the trained model's second name rebound after the optimizer was built ------------------------------

TRAINER = """\
import torch
from torch.utils.data import DataLoader


class Trainer:
    def __init__(self, model, dataset, config):
        self.model = model
        self.dataset = dataset
        self.config = config

    def train(self):
        model, config = self.model, self.config
        raw_model = model.module if hasattr(self.model, "module") else model
        optimizer = raw_model.configure_optimizers(config)
        for epoch in range(config.max_epochs):
            for x, y in DataLoader(self.dataset, batch_size=8):
                loss = model(x.cuda(), y.cuda())
                model.zero_grad()
                loss.backward()
                optimizer.step()
{save}


model = GPT(config).cuda()
Trainer(model, dataset, config).train()
"""


@pytest.mark.parametrize(
    "save",
    [
        # rebound to the same module, named differently, before saving
        '            raw_model = self.model.module if hasattr(self.model, "module") else self.model\n'
        '            torch.save(raw_model.state_dict(), "model.pth")',
        # rebound to the same expression
        '            raw_model = model.module if hasattr(self.model, "module") else model\n'
        '            torch.save(raw_model.state_dict(), "model.pth")',
        # rebound to something else once the optimizer holds the parameters
        "            raw_model = None",
    ],
)
def test_a_second_name_rebound_after_the_optimizer_is_built_keeps_the_model_trained(save):
    """BlinkDL+RWKV-LM RWKV-v2-RNN and RWKV-v3 (src/trainer.py): `raw_model` gives the optimizer the model's
    parameters, then is bound again before saving; the later binding does not reach the optimizer call."""
    assert codes_and_lines(TRAINER.format(save=save), select=("TL101",)) == [("TL101", 12)]


def test_a_second_name_rebound_inside_the_loop_that_builds_the_optimizer_is_not_followed():
    """A binding later in the text but in a loop around the optimizer call reaches it on the next pass: the
    alias is ambiguous, as before (RWKV rows' sibling)."""
    source = """\
import torch

model = GPT(config).cuda()
other = GPT(config).cuda()
raw = model
for stage in range(3):
    optimizer = torch.optim.AdamW(raw.parameters())
    for x in loader:
        loss = raw(x)
        loss.backward()
        optimizer.step()
    raw = other
"""
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", 7)]


def test_a_second_name_rebound_to_the_same_module_still_sees_it_pickled_whole():
    """BlinkDL+RWKV-LM RWKV-v1 (src/trainer.py:63, a TP): `raw_model` is bound to `model.module ... else
    model` for the optimizer and to `self.model.module ... else self.model` (the same module: `model` is
    `self.model`) before `torch.save(raw_model, ...)`: the whole-model pickle still rules out the fix."""
    source = TRAINER.format(
        save='            raw_model = self.model.module if hasattr(self.model, "module") else self.model\n'
        '            torch.save(raw_model, "model.pth")'
    )
    [finding] = lint(source, select=("TL101",))
    assert finding.location.line == 12
    assert "no automatic fix: the script pickles the whole model" in said(finding)
