"""Classes of error that judging findings on real repositories found (bench/ecosystem/), each reproduced small.

Every test names the class, not the repository it was seen in; the snapshot's reason column
(bench/ecosystem/findings.tsv) says where.
"""

from __future__ import annotations

from support import codes_and_lines, fix, lint, said

CUDA_HEAD = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda")
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""

STEP = """\
        loss = (model(x) - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def loader_codes(source: str) -> list[tuple[str, int]]:
    return codes_and_lines(source, select=("TL201", "TL202", "TL203", "TL205"))


# -- data loading: what a loader loads -------------------------------------------------------------------


def test_a_loader_of_indices_that_slice_tensors_on_the_gpu_is_not_a_data_pipeline():
    for indices in (
        "range(len(X))",
        "torch.arange(100)",
        "torch.randperm(100)",
        "list(range(100))",
        "[0, 1, 2]",
    ):
        source = (
            CUDA_HEAD
            + f"""\
X = torch.randn(100, 4, device=device)
Y = torch.randn(100, 1, device=device)
for epoch in range(10):
    for idx in DataLoader({indices}, batch_size=10, shuffle=True):
        x, y = X[idx], Y[idx]
{STEP}"""
        )
        assert loader_codes(source) == [], indices


def test_a_project_dataset_whose_getitem_only_indexes_tensors_it_holds_gets_no_workers():
    source = (
        CUDA_HEAD
        + f"""\
class Cached(Dataset):
    def __init__(self, path):
        blob = torch.load(path)
        self.x, self.y = blob["x"], blob["y"]

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        \"\"\"One sample.\"\"\"
        return self.x[i], self.y[i]


loader = DataLoader(Cached("data.pt"), batch_size=10, shuffle=True)
for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
{STEP}"""
    )
    # Pinning still pays for the copy of each batch; workers have nothing to overlap.
    assert loader_codes(source) == [("TL202", 21)]


def test_a_project_dataset_that_transforms_each_sample_still_gets_workers():
    source = (
        CUDA_HEAD
        + f"""\
class Images(Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return torch.load(self.files[i]) * 2


loader = DataLoader(Images(["a.pt"]), batch_size=10, pin_memory=True)
for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
{STEP}"""
    )
    assert loader_codes(source) == [("TL201", 19)]


def test_a_tensor_dataset_built_by_a_helper_and_passed_to_the_training_function_gets_no_workers():
    source = (
        CUDA_HEAD
        + """\
from torch.utils.data import TensorDataset


def load_examples(path):
    blob = torch.load(path)
    return TensorDataset(blob["x"], blob["y"])


def train(args, train_dataset):
    loader = DataLoader(train_dataset, batch_size=10, pin_memory=True)
    for epoch in range(10):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    dataset = load_examples("data.pt")
    train(None, dataset)
"""
    )
    assert loader_codes(source) == []
    assert loader_codes(source.replace("train(None, dataset)", "train(None, Images())")) == [("TL201", 17)]


def test_a_collate_function_that_moves_batches_to_the_gpu_gets_neither_workers_nor_pinning():
    source = (
        CUDA_HEAD
        + f"""\
import functools


def make_batch(items, device="cuda:0"):
    ids = torch.LongTensor([i for i, _ in items]).to(device)
    return ids, torch.LongTensor([t for _, t in items]).to(device)


collate = functools.partial(make_batch, device="cuda:0")
loader = DataLoader(list(zip(range(10), range(10))), batch_size=2, collate_fn=collate)
for epoch in range(10):
    for x, y in loader:
{STEP}"""
    )
    assert loader_codes(source) == []


# -- what is a trained model ------------------------------------------------------------------------------


def test_speed_advice_is_silent_in_test_files():
    source = (
        CUDA_HEAD
        + f"""\
loader = DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))
for epoch in range(2):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
{STEP}"""
    )
    assert codes_and_lines(source, path="train.py")  # the same code as a script has findings
    for path in (
        "tests/test_train.py",
        "tests/train_helpers.py",
        "test_utils/scripts/test_ops.py",
        "testing/train_small.py",
    ):
        assert codes_and_lines(source, path=path) == [], path
    # Named like a test, it is one when it holds a test (a script named so is a training script: TCN).
    as_a_test = (
        CUDA_HEAD
        + """\


def test_training_converges():
    loader = DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), torch.randn(8, 1)))
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = (model(x) - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    )
    assert codes_and_lines(as_a_test, path="train.py")
    for path in ("test_train.py", "train_test.py"):
        assert codes_and_lines(source, path=path), path
        assert codes_and_lines(as_a_test, path=path) == [], path


def test_a_framework_handed_an_optimizer_is_not_a_model():
    source = """\
import torch
import lightning as L


def main(fabric, model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model = fabric.setup(model)
    optimizer = fabric.setup_optimizers(optimizer)
    for batch in range(10):
        loss = model(batch).sum()
        fabric.backward(loss)
        optimizer.step()


fabric = L.Fabric(accelerator="cuda")
fabric.launch(main, torch.nn.Linear(2, 2))
"""
    assert all("fabric" not in said(d).split(" is trained")[0] for d in lint(source, select=("TL101",)))


def test_a_function_named_for_optimizer_state_does_not_build_an_optimizer():
    source = """\
import torch
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

device = torch.device("cuda")
model = MyModel().to(device)
optim = torch.optim.SGD(model.parameters(), lr=0.1)
for x in loader:
    model(x).sum().backward()
    optim.step()
state = get_optimizer_state_dict(model, optim)
"""
    trained = [said(d).split("`")[1] for d in lint(source, select=("TL101",))]
    assert trained == ["model"]


# -- compile: what it can and cannot do ------------------------------------------------------------------

LOOP = """\
    for x in loader:
        loss = net(x).sum()
        loss.backward()
        opt.step()
"""


def test_a_model_that_is_one_builtin_layer_is_not_worth_compiling():
    source = f"""\
import torch
from torch import nn

device = torch.device("cuda")
net = nn.Linear(20, 1).to(device)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
if True:
{LOOP}"""
    assert codes_and_lines(source, select=("TL101",)) == []


def test_a_builtin_module_is_compiled_by_rebinding_since_its_in_place_compile_compiles_nothing():
    source = f"""\
import torch
from torch import nn

device = torch.device("cuda")
net = nn.TransformerEncoderLayer(4, 2).to(device)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
if True:
{LOOP}"""
    fixed = fix(source, select=("TL101",))
    assert "net = torch.compile(net)\n" in fixed
    assert "net.compile()" not in fixed


def test_a_model_wrapped_in_data_parallel_gets_no_in_place_compile():
    source = f"""\
import torch
from torch import nn

device = torch.device("cuda")
net = MyNet().to(device)
net = nn.DataParallel(net)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
if True:
{LOOP}"""
    [finding] = lint(source, select=("TL101",))
    assert finding.fix is None
    assert "wrapped in `nn.DataParallel`" in said(finding)


def test_a_model_differentiated_twice_for_a_gradient_penalty_is_not_compiled():
    source = """\
import torch

device = torch.device("cuda")
critic = Critic().to(device)
opt = torch.optim.Adam(critic.parameters())
for real in loader:
    out = critic(real)
    grads = torch.autograd.grad(out.sum(), real, create_graph=True)[0]
    loss = out.mean() + ((grads.norm(2, dim=1) - 1) ** 2).mean()
    loss.backward()
    opt.step()
"""
    assert codes_and_lines(source, select=("TL101",)) == []


# -- checkpointing ---------------------------------------------------------------------------------------


def test_a_framework_checkpointing_policy_set_even_to_none_is_a_decision():
    source = """\
import torch
from torch import nn
import lightning as L
from lightning.fabric.strategies import FSDPStrategy


class GPT(nn.Module):
    def __init__(self, n_layer=12):
        super().__init__()
        self.h = nn.ModuleList([Block() for _ in range(n_layer)])

    def forward(self, x):
        for block in self.h:
            x = block(x)
        return x


strategy = FSDPStrategy(activation_checkpointing_policy=None)
fabric = L.Fabric(strategy=strategy)
model = GPT()
optimizer = torch.optim.AdamW(model.parameters())
for x in loader:
    model(x).sum().backward()
    optimizer.step()
"""
    assert codes_and_lines(source, select=("TL401",)) == []
    assert codes_and_lines(source.replace("activation_checkpointing_policy=None", ""), select=("TL401",))


def test_an_api_demo_of_a_few_literal_steps_gets_no_compile_or_autocast_advice():
    demo = """\
import torch

device = torch.device("cuda")
model = ToyModel().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=0.25)
for i in range(10):
    inp = torch.rand(20, 10, device=device)
    output = model(inp)
    output.sum().backward()
    optimizer.step()
"""
    assert codes_and_lines(demo, select=("TL101", "TL301")) == []
    named = demo.replace("for i in range(10):", "num_iters = 10\nfor i in range(num_iters):")
    assert codes_and_lines(named, select=("TL101", "TL301")) == []
    for longer in ("range(args.steps)", "range(200)"):
        run = demo.replace("range(10)", longer)
        assert [code for code, _ in codes_and_lines(run, select=("TL101", "TL301"))] == ["TL101", "TL301"]


def test_a_tokenized_hugging_face_table_needs_neither_workers_nor_pinning():
    source = (
        CUDA_HEAD
        + f"""\
from datasets import load_dataset

raw = load_dataset("glue", "mrpc")
tokenized = raw.map(tokenize, batched=True)
tokenized = tokenized.rename_column("label", "labels")
loader = DataLoader(tokenized["train"], shuffle=True, collate_fn=pad, batch_size=32)
for epoch in range(10):
    for x, y in loader:
{STEP}"""
    )
    assert loader_codes(source) == []
    # A table as loaded may decode its rows as they are read (an image column): work for workers.
    loaded = source.replace('loader = DataLoader(tokenized["train"]', 'loader = DataLoader(raw["train"]')
    assert [code for code, _ in loader_codes(loaded)] == ["TL201", "TL202"]
    # Rows decoded or augmented as they are read (images) are work for workers again.
    transformed = source.replace(
        "loader = DataLoader(", "tokenized.set_transform(augment)\nloader = DataLoader("
    )
    assert [code for code, _ in loader_codes(transformed)] == ["TL201", "TL202"]


def test_the_deprecated_grad_scaler_as_the_branch_for_an_old_torch_is_not_flagged():
    source = """\
import torch


def get_grad_scaler(**kwargs):
    if is_torch_version(">=", "2.3"):
        return torch.amp.GradScaler("cuda", **kwargs)
    else:
        return torch.cuda.amp.GradScaler(**kwargs)
"""
    assert codes_and_lines(source, select=("TL304",)) == []
    alone = "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n"
    assert codes_and_lines(alone, select=("TL304",)) == [("TL304", 3)]


def test_a_model_built_with_a_literal_depth_in_a_fixed_size_script_is_sized_by_its_author():
    source = """\
import torch
from torch import nn


class GPT(nn.Module):
    def __init__(self, vocab_size, num_layers, model_dim):
        super().__init__()
        self.blocks = nn.ModuleList([Block(model_dim) for _ in range(num_layers)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


model = GPT(vocab_size=50304, num_layers=12, model_dim=768).cuda()
optimizer = torch.optim.AdamW(model.parameters())
for x in loader:
    model(x).sum().backward()
    optimizer.step()
"""
    assert codes_and_lines(source, select=("TL401",)) == []
    # A depth the user sets (an option, a config) or a literal deep model is another matter.
    assert codes_and_lines(source.replace("num_layers=12", "num_layers=args.layers"), select=("TL401",))
    assert codes_and_lines(source.replace("num_layers=12", "num_layers=48"), select=("TL401",))


def test_a_keras_model_compile_is_not_torch_compile():
    source = """\
import tensorflow as tf

for model_class in model_classes:
    model = model_class(config)
    model.compile(optimizer=tf.keras.optimizers.Adam(), loss=loss, metrics=[metric])
    model.compile("adam", "mse")
"""
    assert codes_and_lines(source, select=("TL102", "TL103")) == []


def test_a_second_name_for_the_model_is_the_model():
    source = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

device = torch.device("cuda")
model = GPT(config).to(device)
if ddp:
    model = DDP(model, device_ids=[local_rank])
raw_model = model.module if ddp else model
optimizer = raw_model.configure_optimizers(weight_decay=0.1, learning_rate=6e-4)
for x in loader:
    model(x).sum().backward()
    optimizer.step()
"""
    [finding] = lint(source, select=("TL101",))
    assert said(finding).startswith("`model` is trained")
    without_ddp = source.replace(
        "raw_model = model.module if ddp else model\n", "model_without_ddp = model\n"
    )
    without_ddp = without_ddp.replace(
        "raw_model.configure_optimizers", "model_without_ddp.configure_optimizers"
    )
    assert [said(d).split("`")[1] for d in lint(without_ddp, select=("TL101",))] == ["model"]


def test_an_optimizer_class_named_after_the_one_it_extends_is_an_optimizer():
    source = """\
import torch
import schedulefree

device = torch.device("cuda")
model = Net().to(device)
optimizer = schedulefree.AdamWScheduleFree(model.parameters(), lr=1e-3)
for x in loader:
    model(x).sum().backward()
    optimizer.step()
"""
    assert codes_and_lines(source, select=("TL101",)) == [("TL101", 5)]
    config = source.replace(
        "schedulefree.AdamWScheduleFree(model.parameters(), lr=1e-3)", "AdamConfig(model)"
    )
    assert codes_and_lines(config, select=("TL101",)) == []


def test_the_autocast_fix_follows_the_device_the_script_picks():
    source = """\
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    optimizer.step()
"""
    fixed = fix(source, select=("TL301",))
    assert "    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):\n" in fixed
    on_cuda = source.replace(
        'torch.device("cuda" if torch.cuda.is_available() else "cpu")', 'torch.device("cuda")'
    )
    assert 'torch.autocast(device_type="cuda", dtype=torch.bfloat16)' in fix(on_cuda, select=("TL301",))


def test_a_model_wrapped_in_fsdp_without_original_parameters_gets_no_in_place_compile():
    source = f"""\
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

device = torch.device("cuda")
net = T5().to(device)
net = FSDP(net, auto_wrap_policy=policy)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
if True:
{LOOP}"""
    [finding] = lint(source, select=("TL101",))
    assert finding.fix is None
    assert "FSDP without `use_orig_params=True`" in said(finding)
    kept = source.replace("auto_wrap_policy=policy)", "auto_wrap_policy=policy, use_orig_params=True)")
    [finding] = lint(kept, select=("TL101",))
    assert finding.fix is not None


GCN_TRAINING = """\
features, adj = load_graph(edges, 2708)
model = GCN(16).to(device)
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(args.epochs):
    loss = loss_fn(model(features, adj), labels)
    loss.backward()
    optimizer.step()
"""


def test_a_graph_net_trained_on_sparse_tensors_gets_no_compile_or_autocast_advice():
    source = (
        """\
import torch

device = torch.device("cuda")


def load_graph(edges, n):
    adj = torch.sparse_coo_tensor(edges, torch.ones(edges.shape[1]), (n, n))
    return features.to_sparse().to(device), adj.to(device)


"""
        + GCN_TRAINING
    )
    assert codes_and_lines(source, select=("TL101", "TL301")) == []
    dense = source.replace("torch.sparse_coo_tensor", "torch.zeros").replace(
        "features.to_sparse()", "features"
    )
    assert [code for code, _ in codes_and_lines(dense, select=("TL101", "TL301"))] == ["TL101", "TL301"]


# -- devices and steps -----------------------------------------------------------------------------------

DQN = """\
import torch

device = torch.device("cuda:" + str(args.gpu) if torch.cuda.is_available() else "cpu")
q_network = QNetwork().to(device)
target_network = QNetwork().to(device)
optimizer = torch.optim.Adam(q_network.parameters(), lr=1e-4)
for global_step in range(args.total_timesteps):
    q_values = q_network(torch.Tensor(obs).to(device))
    actions = torch.argmax(q_values, dim=1).cpu().numpy()
    if global_step > args.learning_starts:
        with torch.no_grad():
            target_max, _ = target_network(data.next_observations).max(dim=1)
            td_target = data.rewards.flatten() + args.gamma * target_max
        old_val = q_network(data.observations).gather(1, data.actions).squeeze()
        loss = ((td_target - old_val) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_gpu_named_by_concatenation_when_cuda_is_available_is_cuda_when_available():
    assert ("TL101", 4) in codes_and_lines(DQN, select=("TL101",))
    assert lint(DQN, select=("TL301",)), "the device is read as cuda when available, not as the CPU"


def test_the_step_of_a_reinforcement_learning_loop_is_the_update_not_the_acting_call():
    # The acting call (line 8) comes first; the update's forward is the one in the backward's block.
    assert codes_and_lines(DQN, select=("TL301",)) == [("TL301", 14)]
    fixed = fix(DQN, select=("TL301",))
    assert (
        '        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):\n'
        "            old_val = q_network(data.observations)" in fixed
    )


def test_a_loader_name_rebound_before_the_return_hands_back_the_second_loader_only():
    source = (
        CUDA_HEAD
        + f"""\
def cached_loader(dataset, batch_size):
    loader = DataLoader(dataset, batch_size=batch_size)
    features = []
    for x, y in loader:
        with torch.no_grad():
            features.append(encoder(x.to(device)).cpu())
    loader = DataLoader(Features(features), batch_size=batch_size, shuffle=True)
    return loader


train_loader = cached_loader(raw, 32)
for epoch in range(10):
    for x, y in train_loader:
{STEP}"""
    )
    assert [line for _, line in loader_codes(source)] == [14, 14]  # the second loader, not the first (9)


def test_an_in_memory_dataset_filled_key_by_key_and_split_stays_in_memory():
    source = (
        CUDA_HEAD
        + f"""\
class Pairs(Dataset):
    def __init__(self, X, y):
        self.X = X
        self.y = y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, index):
        data = {{}}
        data["X"] = self.X[index]
        data["y"] = self.y[index]
        return data


full = Pairs(xs, ys)
train_set, test_set = torch.utils.data.random_split(full, [800, 200])
loader = DataLoader(torch.utils.data.Subset(train_set, range(100)), batch_size=8, pin_memory=True)
for epoch in range(10):
    for batch in loader:
        x, y = batch["X"].to(device, non_blocking=True), batch["y"].to(device, non_blocking=True)
{STEP}"""
    )
    assert loader_codes(source) == []


def test_a_table_rebound_in_one_branch_is_not_mixed_with_the_other_branch_and_a_dead_branch_is_skipped():
    source = (
        CUDA_HEAD
        + f"""\
from datasets import load_dataset

if 1:  # real dataset
    ds = load_dataset("ultrachat", split="train")
    ds = ds.map(convert, batched=False)
    dl = DataLoader(ds, batch_size=1, collate_fn=collate)
else:  # fake dataset
    ds = Fake(16)
    dl = DataLoader(ds, batch_size=1)

for epoch in range(10):
    for x, y in dl:
{STEP}"""
    )
    assert loader_codes(source) == []
    live = source.replace("if 1:", "if args.real:")
    assert [code for code, _ in loader_codes(live)] == ["TL201", "TL202"]  # the fake loader, line 17


def test_sparse_tensors_made_in_another_module_are_followed_only_where_a_file_writes_one(tmp_path, parsed):
    """The data a script trains on is sparse only where some module calls a sparse constructor or method:
    where no project file writes one, the script's calls are not followed into the modules they reach
    (yolov5's train.py built seven modules to find nothing)."""
    from torchlint.linter import Linter
    from torchlint.workspace.settings import Settings

    script = (
        """\
import torch

from graph import load_graph

device = torch.device("cuda")
"""
        + GCN_TRAINING
    )
    graph = "import torch\n\n\ndef load_graph(edges, n):\n    return torch.{}(edges, n), edges\n"
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(script)
    for made, findings in (("sparse_coo_tensor", []), ("zeros", ["TL101", "TL301"])):
        (tmp_path / "graph.py").write_text(graph.format(made))
        parsed.clear()
        found = Linter().check_text(str(tmp_path / "train.py"), script, Settings(select=("TL101", "TL301")))
        assert [d.code for d in found] == findings
        assert parsed == (["graph.py"] if findings == [] else [])
