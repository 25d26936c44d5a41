"""A file named like a test is a test only when it looks like one: research repositories name training
scripts for the task they test a model on (`add_test.py`, `pmnist_test.py` in locuslab/TCN), and those got no
speed advice at all. Such a file is a script (a `__main__` guard, or a loop among its own statements) with
no test framework, no `test_*` function and no `Test*` class."""

from __future__ import annotations

from support import lint

TRAINING = """\
import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10)
args = parser.parse_args()
model = torch.nn.Sequential(torch.nn.Conv1d(1, 64, 3), torch.nn.ReLU(), torch.nn.Conv1d(64, 1, 3)).cuda()
optimizer = torch.optim.Adam(model.parameters())


def test(epoch):
    model.eval()
    with torch.no_grad():
        return model(torch.randn(8, 1, 100).cuda()).mean()


for epoch in range(args.epochs):
    x = torch.randn(8, 1, 100).cuda()
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    test(epoch)
"""


def codes(source: str, path: str) -> list[tuple[str, int]]:
    return [(d.code, d.location.line) for d in lint(source, select=("TL101", "TL301"), path=path)]


def test_a_training_script_named_like_a_test_gets_speed_advice():
    assert codes(TRAINING, "adding_problem/add_test.py") == [("TL101", 7), ("TL301", 19)]
    assert codes(TRAINING, "test_mnist.py") == [("TL101", 7), ("TL301", 19)]


GUARDED = """\
import torch


def main():
    model = torch.nn.Sequential(torch.nn.Conv1d(1, 64, 3), torch.nn.ReLU(), torch.nn.Conv1d(64, 1, 3)).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(100):
        loss = model(torch.randn(8, 1, 100).cuda()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_a_script_behind_a_main_guard_named_like_a_test_gets_speed_advice():
    assert codes(GUARDED, "pmnist_test.py") == [("TL101", 5), ("TL301", 8)]


def test_real_tests_stay_without_speed_advice():
    pytest_style = TRAINING + "\n\ndef test_loss_goes_down():\n    assert True\n"
    unittest_style = "import unittest\n" + TRAINING + '\n\nif __name__ == "__main__":\n    unittest.main()\n'
    test_class = TRAINING + "\n\nclass TestTraining:\n    pass\n"
    for source in (pytest_style, unittest_style, test_class):
        assert codes(source, "model_test.py") == []
    assert codes(TRAINING, "tests/train_small.py") == []  # a tests folder stays a tests folder
    assert codes(TRAINING, "conftest.py") == []
