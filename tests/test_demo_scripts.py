"""A toy demo, a script whose every training loop trains on rows typed into the script, gets no speed
advice: nothing it could change would matter (rasbt/LLMs-from-scratch's appendix A trains on five rows, for
three epochs, also as DDP scripts whose epochs come through `mp.spawn`, and drew a finding from every speed
rule). The same script over data that is not written out gets its findings."""

from __future__ import annotations

from support import codes_and_lines

TOY = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class ToyDataset(Dataset):
    def __init__(self, X, y):
        self.features, self.labels = X, y

    def __getitem__(self, index):
        return self.features[index], self.labels[index]

    def __len__(self):
        return self.labels.shape[0]


X_train = torch.tensor([[-1.2, 3.1], [-0.9, 2.9], [-0.5, 2.6], [2.3, -1.1], [2.7, -1.5]])
y_train = torch.tensor([0, 0, 0, 1, 1])
train_loader = DataLoader(ToyDataset(X_train, y_train), batch_size=2, shuffle=True, num_workers=1)

model = torch.nn.Sequential(torch.nn.Linear(2, 30), torch.nn.ReLU(), torch.nn.Linear(30, 2))
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model.to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
for epoch in range(3):
    for features, labels in train_loader:
        features, labels = features.to(device), labels.to(device)
        loss = F.cross_entropy(model(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"loss {loss:.2f}")
"""


def test_a_loader_over_rows_typed_into_the_script_for_a_few_epochs_is_a_demo():
    assert codes_and_lines(TOY) == []
    tensors = TOY.replace("ToyDataset(X_train, y_train)", "torch.utils.data.TensorDataset(X_train, y_train)")
    assert codes_and_lines(tensors) == []


def test_however_many_epochs_it_runs():
    assert codes_and_lines(TOY.replace("range(3)", "range(args.epochs)")) == []


def test_the_same_script_over_data_not_written_out_is_advised():
    loaded = TOY.replace("X_train = torch.tensor(", "X_train = torch.load('x.pt')  # ").replace(
        "y_train = torch.tensor([0, 0, 0, 1, 1])", "y_train = torch.load('y.pt')"
    )
    assert {code for code, _ in codes_and_lines(loaded)} >= {"TL202", "TL203", "TL501", "TL505"}
