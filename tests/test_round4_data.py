"""Round 4, data loading: false positives judged on the ecosystem snapshot, each reproduced small, with the
sibling cases that must keep their findings.

Lines are asserted exactly: each expected finding sits on a line marked `# <- name`, found by `line_of`.
"""

from __future__ import annotations

from support import codes_and_lines

SELECT = ("TL201", "TL202")


def loader_codes(source: str) -> list[tuple[str, int]]:
    return codes_and_lines(source, select=SELECT)


def line_of(source: str, mark: str) -> int:
    """The 1-based line carrying `# <- mark`."""
    lines = [n for n, text in enumerate(source.splitlines(), 1) if text.endswith(f"# <- {mark}")]
    assert len(lines) == 1, mark
    return lines[0]


# -- 1. a helper's dataset: a TensorDataset built, or the cache it saved loaded back ---------------------

SQUAD = """\
import os

import torch
from torch.utils.data import DataLoader, RandomSampler
from transformers import squad_convert_examples_to_features


def train(args, train_dataset, model):
    sampler = RandomSampler(train_dataset)
    loader = DataLoader(train_dataset, sampler=sampler, batch_size=args.batch_size)  # <- loader
    for epoch in range(args.epochs):
        for batch in loader:
            batch = tuple(t.to(args.device) for t in batch)
            model(*batch).loss.backward()
            optimizer.step()


def load_and_cache_examples(args, tokenizer, evaluate=False, output_examples=False):
    cached_features_file = os.path.join(args.data_dir, "cached_{}".format("dev" if evaluate else "train"))
    if os.path.exists(cached_features_file) and not args.overwrite_cache:
        features_and_dataset = torch.load(cached_features_file)
        features, dataset, examples = (
            features_and_dataset["features"],
            features_and_dataset["dataset"],
            features_and_dataset["examples"],
        )
    else:
        examples = processor.get_train_examples(args.data_dir)
        features, dataset = squad_convert_examples_to_features(
            examples=examples,
            tokenizer=tokenizer,
            is_training=not evaluate,
            return_dataset=RETURN,
        )
        if args.local_rank in [-1, 0]:
            torch.save({"features": features, "dataset": dataset, "examples": examples}, cached_features_file)
    if output_examples:
        return dataset, examples, features
    return dataset


def main():
    args.device = torch.device("cuda")
    train_dataset = load_and_cache_examples(args, tokenizer, evaluate=False, output_examples=False)
    train(args, train_dataset, model)


if __name__ == "__main__":
    main()
"""


def test_a_squad_tensor_dataset_or_its_cache_loaded_back_gets_no_workers_advice():
    """microsoft/LoRA run_squad.py:83 (and run_squad_w_distillation.py:101, masked_run_squad.py:122): the
    helper returns `squad_convert_examples_to_features(..., return_dataset="pt")`'s TensorDataset, or the
    `torch.load` of the cache it `torch.save`d that dataset into: in memory on every path. Pinning still
    applies (TL202 kept)."""
    source = SQUAD.replace("RETURN", '"pt"')
    assert loader_codes(source) == [("TL202", line_of(source, "loader"))]


def test_a_squad_dataset_of_another_kind_keeps_the_workers_advice():
    """Sibling: `return_dataset` not the literal "pt" (the user's choice, or "tf"): nothing known."""
    for value in ('"tf"', "args.return_dataset"):
        source = SQUAD.replace("RETURN", value)
        line = line_of(source, "loader")
        assert loader_codes(source) == [("TL201", line), ("TL202", line)], value


CACHE = """\
import os

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

device = torch.device("cuda")


class Images(Dataset):
    def __getitem__(self, i):
        return decode(self.paths[i])


def build(path):
    return BUILT


def load(path):
    if os.path.exists(path):
        dataset = LOADED
    else:
        dataset = build(path)
    if not os.path.exists(path):
        torch.save(SAVED, path)
    return dataset


loader = DataLoader(load("cache.pt"))  # <- loader
for epoch in range(10):
    for x, y in loader:
        model(x.to(device)).backward()
        optimizer.step()
"""


def test_a_tensor_dataset_loaded_back_from_the_cache_the_same_helper_saves_it_in_gets_no_workers_advice():
    """The class behind the LoRA rows: `torch.load(path)` of the file the same function `torch.save`s to the
    same `path` holds what was saved there (whole, or under a literal key of a saved dict literal). The save
    may store what was loaded (after the `if`/`else`): that adds nothing to what the cache can hold."""
    tensors = "TensorDataset(torch.randn(8, 2), torch.randn(8))"
    for loaded, saved in [
        ("torch.load(path)", "dataset"),
        ('torch.load(path)["dataset"]', '{"dataset": dataset, "n": 3}'),
    ]:
        source = CACHE.replace("BUILT", tensors).replace("LOADED", loaded).replace("SAVED", saved)
        assert loader_codes(source) == [("TL202", line_of(source, "loader"))], loaded


def test_a_cache_whose_saved_dataset_is_unknown_or_does_work_per_sample_keeps_the_workers_advice():
    """Siblings: the saved dataset does work per sample; another key than the one saved; a file the
    function never saves to; a whole load of a saved dict; a load changed before it is saved again (what the
    cache holds then depends on `wrap`)."""
    tensors = "TensorDataset(torch.randn(8, 2), torch.randn(8))"
    for built, loaded, saved in [
        ("Images()", 'torch.load(path)["dataset"]', '{"dataset": dataset}'),
        (tensors, 'torch.load(path)["examples"]', '{"dataset": dataset, "examples": examples}'),
        (tensors, 'torch.load(other)["dataset"]', '{"dataset": dataset}'),
        (tensors, "torch.load(path)", "{'dataset': dataset}"),
        (tensors, "wrap(torch.load(path))", "dataset"),
    ]:
        source = CACHE.replace("BUILT", built).replace("LOADED", loaded).replace("SAVED", saved)
        line = line_of(source, "loader")
        assert loader_codes(source) == [("TL201", line), ("TL202", line)], (built, loaded, saved)


def test_a_tensor_dataset_unpacked_from_a_literal_tuple_gets_no_workers_advice():
    """`features, dataset = (feats, TensorDataset(...))`: the element at the name's position."""
    source = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda")
features, dataset = (make_features(), TensorDataset(torch.randn(8, 2)))
loader = DataLoader(dataset)  # <- loader
for epoch in range(10):
    for (x,) in loader:
        model(x.to(device)).backward()
        optimizer.step()
"""
    assert loader_codes(source) == [("TL202", line_of(source, "loader"))]


# -- 2. a dataset built from tensors already on the GPU -----------------------------------------------------

ON_GPU = """\
import torch
from torch.utils import data


class Pairs(data.Dataset):
    def __init__(self, X, y):
        self.X = X
        self.y = y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, index):
        return {"X": self.X[index], "y": self.y[index]}


def collate(batch):
    x = torch.zeros(len(batch), 64).long()
    for i, item in enumerate(batch):
        x[i, : len(item["X"])] = item["X"]
    return x, torch.tensor([item["y"] for item in batch])


def main(no_cuda=False):
    device = "cuda" if torch.cuda.is_available() and not no_cuda else "cpu"
    x, y = [], []
    for text, label in rows:
        seq = tokenizer.encode(text)
        seq = SEQ
        x.append(seq)
        y.append(label)
    full = Pairs(x, y)
    train_set, test_set = torch.utils.data.random_split(full, [90, 10])
    loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True, collate_fn=collate)  # <- loader
    for epoch in range(10):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            loss = model(inputs, targets)
            loss.backward()
            optimizer.step()
"""


def test_a_dataset_built_from_tensors_created_on_the_gpu_gets_no_pinning_advice():
    """microsoft/LoRA run_pplm_discrim_train.py:444: every sample was made with `torch.tensor(...,
    device=device)` (CUDA when available) before the dataset holds it; the collate copies them back to the
    host and the loop copies the batch up again: pinning does not address that round trip (and worker
    processes could not read CUDA tensors either)."""
    for seq in (
        "torch.tensor([50256] + seq, device=device, dtype=torch.long)",
        "torch.tensor(seq).to(device)",
        "torch.tensor(seq).cuda()",
    ):
        assert loader_codes(ON_GPU.replace("SEQ", seq)) == [], seq


def test_a_dataset_built_from_host_tensors_keeps_the_pinning_advice():
    """Siblings: samples made on the host, moved back to it (`.cpu()`), on a device that is the CPU, or on
    the GPU on some paths only; and a list of GPU samples to which host tensors are added."""
    for seq in (
        "torch.tensor([50256] + seq, dtype=torch.long)",
        "torch.tensor(seq, device=device).cpu()",
        'torch.tensor(seq, device="cpu")',
        "torch.tensor(seq, device=device) if len(seq) > 3 else torch.tensor(seq)",
    ):
        source = ON_GPU.replace("SEQ", seq)
        line = line_of(source, "loader")
        assert loader_codes(source) == [("TL202", line)], seq
    on_gpu = ON_GPU.replace("SEQ", "torch.tensor(seq, device=device)")
    for more in ("x += host_tensors", "x.extend(host_tensors)", "x = x + host_tensors"):
        source = on_gpu.replace("    full = Pairs(x, y)", f"    {more}\n    full = Pairs(x, y)")
        line = line_of(source, "loader")
        assert loader_codes(source) == [("TL202", line)], more


def test_a_sample_kept_only_when_an_if_rebinds_it_on_the_gpu_gets_no_pinning_advice():
    """The LoRA shape exactly: `seq = encode(text)`, then `if short: seq = torch.tensor(..., device=device)
    else: continue`: only the GPU tensor reaches `x.append(seq)` (what an `if` binds or leaves on every
    branch hides the earlier binding)."""
    keep = """\
        if len(seq) < 100:
            seq = torch.tensor(seq, device=device)
        else:
            print("too long")
            continue"""
    source = ON_GPU.replace("        seq = SEQ", keep)
    assert loader_codes(source) == []


def test_a_sample_an_if_rebinds_on_some_paths_only_keeps_the_pinning_advice():
    """Siblings: no `else:` (the host list falls through), or an `else:` that neither binds nor leaves."""
    for keep in (
        """\
        if len(seq) < 100:
            seq = torch.tensor(seq, device=device)""",
        """\
        if len(seq) < 100:
            seq = torch.tensor(seq, device=device)
        elif len(seq) < 200:
            continue
        else:
            print("too long")""",
    ):
        source = ON_GPU.replace("        seq = SEQ", keep)
        assert loader_codes(source) == [("TL202", line_of(source, "loader"))], keep


def test_reaching_values_skip_a_binding_hidden_by_an_if_that_binds_or_leaves_on_every_branch():
    import libcst as cst
    from support import facts_of

    source = """\
def f(rows):
    for text in rows:
        seq = encode(text)
        if len(seq) < 9:
            seq = short(seq)
        elif len(seq) < 99:
            seq = long(seq)
        else:
            raise ValueError(text)
        use(seq)
"""
    facts = facts_of(source)
    module = facts.source
    call = next(c for c in module.calls if module.code(c.node.func) == "use")
    read = call.node.args[0].value
    assert isinstance(read, cst.Name)
    values = module.reaching_values(read, call.scope)
    assert sorted(module.code(a.value) for a in values) == ["long(seq)", "short(seq)"]


def test_a_read_s_reaching_values_are_worked_out_once_and_handed_out_as_a_new_list(monkeypatch):
    """Tracing a loader's sources asks of the same reads again and again; the answer is kept per read and
    scope, and what a caller does with its list is not the next caller's answer."""
    from support import facts_of, record_calls

    from torchlint.facts.syntax.module import SourceModule

    source = "def f(rows):\n    seq = encode(rows)\n    seq = short(seq)\n    use(seq)\n"
    module = facts_of(source).source
    call = next(c for c in module.calls if module.code(c.node.func) == "use")
    read = call.node.args[0].value
    worked_out = record_calls(monkeypatch, SourceModule, "_reaching_values")
    first = module.reaching_values(read, call.scope)
    first.clear()
    again = module.reaching_values(read, call.scope)
    assert [module.code(a.value) for a in again] == ["short(seq)"]
    assert len(worked_out) == 1


def test_debug_facts_show_the_cache_round_trip_kind_and_samples_held_on_the_gpu(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from torchlint.cli import main

    cached = tmp_path / "cached.py"
    cached.write_text(SQUAD.replace("RETURN", '"pt"'))
    on_gpu = tmp_path / "on_gpu.py"
    on_gpu.write_text(ON_GPU.replace("SEQ", "torch.tensor(seq, device=device)"))
    monkeypatch.chdir(tmp_path)
    first = CliRunner().invoke(main, ["debug", "facts", "cached.py"]).output.splitlines()
    assert f"  loader at line {line_of(SQUAD, 'loader')}: in-memory TensorDataset" in first
    second = CliRunner().invoke(main, ["debug", "facts", "on_gpu.py"]).output.splitlines()
    at = second.index(
        f"  loader at line {line_of(ON_GPU, 'loader')}: in memory: `__getitem__` only indexes what the dataset holds"
    )
    assert (
        second[at + 1]
        == "    samples on the GPU: moved by the dataset or `collate_fn`, or held there already"
    )
