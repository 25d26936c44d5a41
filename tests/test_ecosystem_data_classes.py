"""Data-loading false positives that judging findings on unseen repositories found (/tmp/eco2, round 2), each
reproduced small, with the sibling cases that must keep their findings.

Lines are asserted exactly: each expected finding sits on a line marked `# <- name`, found by `line_of`.
"""

from __future__ import annotations

from support import codes_and_lines

SELECT = ("TL201", "TL202", "TL203", "TL205")

HEAD = """\
import torch
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda")
"""


def loader_codes(source: str) -> list[tuple[str, int]]:
    return codes_and_lines(source, select=SELECT)


def line_of(source: str, mark: str) -> int:
    """The 1-based line carrying `# <- mark`."""
    lines = [n for n, text in enumerate(source.splitlines(), 1) if text.endswith(f"# <- {mark}")]
    assert len(lines) == 1, mark
    return lines[0]


# -- 1. a loader built anew every epoch -------------------------------------------------------------------

RUN_EPOCH = (
    HEAD
    + """\


class Trainer:
    def __init__(self, model, train_dataset, config):
        self.model = model
        self.train_dataset = train_dataset
        self.config = config

    def train(self):
        model, config = self.model, self.config
        optimizer = torch.optim.AdamW(model.parameters())

        def run_epoch(split):
            data = self.train_dataset
            data.idx_begin = self.steps * config.batch_size + 1
            loader = DataLoader(data, shuffle=False, pin_memory=True, batch_size=config.batch_size,
                                num_workers=config.num_workers)  # <- built
            for it, (x, y) in enumerate(loader):
                x = x.to(device, non_blocking=True)
                y = y.to(device, non_blocking=True)
                loss = model(x, y)
                model.zero_grad()
                loss.backward()
                optimizer.step()

        for epoch in range(config.max_epochs):
            run_epoch("train")
"""
)


def test_a_loader_built_inside_the_function_run_once_per_epoch_gets_no_persistent_workers_advice():
    """Class 1 (RWKV trainer.py:69/89/103): a new DataLoader every epoch; `persistent_workers` cannot keep
    workers across loader objects (and the dataset is changed before each build)."""
    assert loader_codes(RUN_EPOCH) == []


def test_a_loader_built_inside_the_epoch_loop_gets_no_persistent_workers_advice():
    """Class 1, the loop form: the construction is in the epoch loop itself."""
    source = (
        HEAD
        + """\
for epoch in range(10):
    train_set.shift(epoch)
    loader = DataLoader(train_set, batch_size=32, num_workers=4, pin_memory=True)
    for x in loader:
        model(x.to(device, non_blocking=True)).backward()
        optimizer.step()
"""
    )
    assert loader_codes(source) == []


def test_a_loader_built_per_stage_but_iterated_over_several_epochs_still_restarts_its_workers():
    """Class 1 sibling: built in an outer loop that does not repeat the inner epoch loop's passes, the same
    loader object is iterated every epoch."""
    source = (
        HEAD
        + """\
for stage in range(3):
    loader = DataLoader(train_set, batch_size=32, num_workers=4, pin_memory=True)  # <- stage
    for epoch in range(10):
        for x in loader:
            model(x.to(device, non_blocking=True)).backward()
            optimizer.step()
"""
    )
    assert loader_codes(source) == [("TL203", line_of(source, "stage"))]


def test_a_loader_built_once_per_call_but_re_iterated_by_a_forever_generator_restarts_its_workers():
    """Class 1 sibling: built inside the function, but a `while True: yield from loader` generator
    iterates that same object again and again."""
    source = (
        HEAD
        + """\


def forever(loader):
    while True:
        yield from loader


def run(train_set):
    loader = DataLoader(train_set, batch_size=32, num_workers=4, pin_memory=True)  # <- forever
    batches = forever(loader)
    for step in range(10_000):
        model(next(batches).to(device, non_blocking=True)).backward()
        optimizer.step()


for epoch in range(10):
    run(train_set)
"""
    )
    assert loader_codes(source) == [("TL203", line_of(source, "forever"))]


# -- 2. and 3. the two branches of `if num_workers > 0:` ---------------------------------------------------

BRANCHES = (
    HEAD
    + """\
if config.num_workers > 0:
    loader = DataLoader(data, shuffle=False, pin_memory=True, batch_size=config.batch_size,
                        num_workers=config.num_workers)  # <- workers
else:
    loader = DataLoader(data, shuffle=False, batch_size=config.batch_size,
                        num_workers=config.num_workers)  # <- no workers
for epoch in range(10):
    for x, y in loader:
        x = x.to(device)  # <- x
        y = y.to(device)  # <- y
        model(x, y).backward()
        optimizer.step()
"""
)


def test_the_else_branch_of_a_positive_worker_guard_has_no_workers_to_keep_and_pinning_chosen_per_branch():
    """Class 2 (RWKV trainer.py:93/107): the `else:` of `if num_workers > 0:` has 0 workers, so no TL203;
    class 3 (trainer.py:93): that branch leaves pinning out on purpose, the other pins, so no TL202. The
    workers branch keeps its TL203, and the copies of its pinned batches keep TL205."""
    assert loader_codes(BRANCHES) == [
        ("TL203", line_of(BRANCHES, "workers") - 1),
        ("TL205", line_of(BRANCHES, "x")),
        ("TL205", line_of(BRANCHES, "y")),
    ]


def test_every_guard_shape_that_proves_zero_workers_silences_persistent_workers_advice():
    """Class 2 generalised: `not n`, `n == 0`, `n < 1`, `n <= 0`, `0 >= n` on the body side; `n`, `n > 0`,
    `n >= 1`, `0 < n`, `n != 0` on the `else:` side."""
    body_side = ("not n", "n == 0", "n < 1", "n <= 0", "0 >= n", "1 > n")
    else_side = ("n", "n > 0", "n >= 1", "0 < n", "n != 0")
    for test, zero_in_body in [(t, True) for t in body_side] + [(t, False) for t in else_side]:
        zero = "DataLoader(train_set, num_workers=n)"
        other = "DataLoader(train_set, num_workers=n, persistent_workers=True)"
        body, orelse = (zero, other) if zero_in_body else (other, zero)
        source = f"""\
import os

from torch.utils.data import DataLoader

n = int(os.environ["WORKERS"])
if {test}:
    loader = {body}
else:
    loader = {orelse}
for epoch in range(10):
    for x in loader:
        model(x).backward()
        optimizer.step()
"""
        assert loader_codes(source) == [], test


def test_a_guard_that_leaves_some_workers_possible_keeps_the_persistent_workers_advice():
    """Class 2 sibling: the `else:` of `if n > 2:` may still have 1 or 2 workers; a guard on another
    variable proves nothing about this count."""
    for test in ("n > 2", "m > 0", "n < 0"):
        source = f"""\
import os

from torch.utils.data import DataLoader

n = int(os.environ["WORKERS"])
if {test}:
    loader = DataLoader(train_set, num_workers=n, persistent_workers=True)
else:
    loader = DataLoader(train_set, num_workers=n)  # <- loader
for epoch in range(10):
    for x in loader:
        model(x).backward()
        optimizer.step()
"""
        assert loader_codes(source) == [("TL203", line_of(source, "loader"))], test


def test_options_chosen_per_branch_are_the_authors_choice_and_not_reported_as_missing():
    """Class 3 generalised: the same loader built in the two branches of an `if`, with `pin_memory` or
    `num_workers` set in one branch only, is set on some paths only (TL201 and TL202 stay silent)."""
    source = (
        HEAD
        + """\
if use_workers:
    loader = DataLoader(train_set, num_workers=4, pin_memory=True, persistent_workers=True)
else:
    loader = DataLoader(train_set)
for epoch in range(10):
    for x in loader:
        model(x.to(device, non_blocking=True)).backward()
        optimizer.step()
"""
    )
    assert loader_codes(source) == []


def test_branches_that_build_different_loaders_or_both_lack_pinning_are_each_judged():
    """Class 3 sibling: when neither branch pins, or the other branch loads another dataset, each loader is
    reported on its own."""
    source = (
        HEAD
        + """\
if distributed:
    loader = DataLoader(train_set, num_workers=4, persistent_workers=True)  # <- a
else:
    loader = DataLoader(train_set, num_workers=4, persistent_workers=True)  # <- b
if small:
    other = DataLoader(small_set, num_workers=4, persistent_workers=True, pin_memory=True)
else:
    other = DataLoader(big_set, num_workers=4, persistent_workers=True)  # <- c
for epoch in range(10):
    for x in loader:
        model(x.to(device)).backward()
        optimizer.step()
    for x in other:
        model(x.to(device, non_blocking=True)).backward()
        optimizer.step()
"""
    )
    assert loader_codes(source) == [
        ("TL202", line_of(source, "a")),
        ("TL202", line_of(source, "b")),
        ("TL202", line_of(source, "c")),
    ]


# -- 4. a dataset that slices a tensor it holds ------------------------------------------------------------

SAMPLER = (
    HEAD
    + """\


class TextSamplerDataset(Dataset):
    def __init__(self, data, seq_len):
        super().__init__()
        self.data = data
        self.seq_len = seq_len

    def __getitem__(self, index):
        rand_start = torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,))
        full_seq = self.data[rand_start: rand_start + self.seq_len + 1].long()
        return full_seq

    def __len__(self):
        return self.data.size(0) // self.seq_len


train_loader = DataLoader(TextSamplerDataset(data_train, 1024), batch_size=4)  # <- train
for i in range(100_000):
    loss = model(next(train_loader).to(device))
    loss.backward()
    optimizer.step()
"""
)


def test_a_dataset_that_slices_a_tensor_it_holds_at_a_random_offset_gets_no_workers():
    """Class 4 (x-transformers train_*.py TextSamplerDataset): slicing a held tensor is indexing; the batch
    still gets pinning advice."""
    assert loader_codes(SAMPLER) == [("TL202", line_of(SAMPLER, "train"))]


def test_slicing_shapes_that_do_no_per_sample_work_count_as_indexing():
    """Class 4 generalised: `.item()` offsets, `.clone().long()`, `random.randint`, an offset from the index,
    a pair of shifted slices."""
    bodies = [
        "        rand_start = torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,)).item()\n"
        "        return self.data[rand_start: rand_start + self.seq_len + 1].clone().long()\n",
        "        start = random.randint(0, len(self.data) - self.seq_len - 1)\n"
        "        return self.data[start:start + self.seq_len + 1]\n",
        "        i = index * self.seq_len\n"
        "        x = self.data[i:i + self.seq_len]\n"
        "        y = self.data[i + 1:i + 1 + self.seq_len]\n"
        "        return x, y\n",
    ]
    for body in bodies:
        source = SAMPLER.replace(
            "        rand_start = torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,))\n"
            "        full_seq = self.data[rand_start: rand_start + self.seq_len + 1].long()\n"
            "        return full_seq\n",
            body,
        )
        assert source != SAMPLER
        assert loader_codes(source) == [("TL202", line_of(source, "train"))], body


def test_a_dataset_that_works_on_each_slice_still_gets_workers():
    """Class 4 sibling: a slice that is encoded, transformed or read from disk is per-sample work."""
    bodies = [
        "        chunk = self.data[index:index + self.seq_len]\n"
        "        return torch.tensor([self.stoi[c] for c in chunk])\n",
        "        chunk = self.data[index:index + self.seq_len]\n        return self.transform(chunk)\n",
        "        return torch.load(self.files[index:index + 1][0])\n",
    ]
    for body in bodies:
        source = SAMPLER.replace(
            "        rand_start = torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,))\n"
            "        full_seq = self.data[rand_start: rand_start + self.seq_len + 1].long()\n"
            "        return full_seq\n",
            body,
        )
        line = line_of(source, "train")
        assert loader_codes(source) == [("TL201", line), ("TL202", line)], body


# -- 5. a validation loader consumed inside the training loop ----------------------------------------------

VALIDATES = (
    HEAD
    + """\
train_loader = cycle(DataLoader(train_set, batch_size=4, num_workers=2))  # <- train
val_loader = cycle(DataLoader(val_set, batch_size=4))
for i in range(100_000):
    model.train()
    for _ in range(4):
        loss = model(next(train_loader).to(device))
        (loss / 4).backward()
    print(f"training loss: {loss.item()}")
    optimizer.step()
    optimizer.zero_grad()
    if i % 100 == 0:
        model.eval()
        with torch.no_grad():
            loss = model(next(val_loader).to(device))
            print(f"validation loss: {loss.item()}")
"""
)


def test_a_validation_loader_consumed_under_no_grad_inside_the_training_loop_does_not_feed_training():
    """Class 5 (x-transformers train_*.py val_loader): `next(val_loader)` under `with torch.no_grad():` every
    N steps only evaluates; the train loader is still judged."""
    assert loader_codes(VALIDATES) == [("TL202", line_of(VALIDATES, "train"))]


def test_evaluation_batches_fetched_before_a_no_grad_block_or_under_inference_mode_do_not_feed_training():
    """Class 5 generalised: the batch bound before the block and read only inside it, `inference_mode`,
    `set_grad_enabled(False)`, and a tuple unpacked from the batch."""
    variants = [
        (
            "        with torch.no_grad():\n            loss = model(next(val_loader).to(device))\n",
            "        val_x = next(val_loader).to(device)\n"
            "        with torch.no_grad():\n            loss = model(val_x)\n",
        ),
        ("with torch.no_grad():", "with torch.inference_mode():"),
        ("with torch.no_grad():", "with torch.set_grad_enabled(False):"),
        (
            "            loss = model(next(val_loader).to(device))\n",
            "            vx, vy = next(val_loader)\n            loss = model(vx.to(device), vy.to(device))\n",
        ),
    ]
    for old, new in variants:
        source = VALIDATES.replace(old, new)
        assert source != VALIDATES
        assert loader_codes(source) == [("TL202", line_of(source, "train"))], new


def test_batches_that_leave_the_no_grad_block_for_a_backward_pass_still_feed_training():
    """Class 5 sibling: a batch fetched under `no_grad` and trained on after it, a teacher's targets computed
    under `no_grad` that the loss uses, a fetch outside the block also used outside it."""
    variants = [
        (  # fetched under no_grad, trained on after the block
            "            loss = model(next(val_loader).to(device))\n"
            '            print(f"validation loss: {loss.item()}")\n',
            "            extra = next(val_loader).to(device)\n        model(extra).backward()\n",
        ),
        (  # targets computed under no_grad feed the loss
            "            loss = model(next(val_loader).to(device))\n"
            '            print(f"validation loss: {loss.item()}")\n',
            "            target = teacher(next(val_loader).to(device))\n"
            "        (model(x) - target).pow(2).mean().backward()\n",
        ),
        (  # fetched outside the block and used outside it too
            "        with torch.no_grad():\n            loss = model(next(val_loader).to(device))\n"
            '            print(f"validation loss: {loss.item()}")\n',
            "        vx = next(val_loader).to(device)\n"
            "        with torch.no_grad():\n            loss = model(vx)\n"
            "        model(vx).backward()\n",
        ),
    ]
    for old, new in variants:
        source = VALIDATES.replace(old, new)
        assert source != VALIDATES
        val = line_of(source, "train") + 1
        assert loader_codes(source) == [
            ("TL202", line_of(source, "train")),
            ("TL201", val),
            ("TL202", val),
        ], new


def test_a_batch_prefetched_at_the_end_of_the_loop_body_for_the_next_step_feeds_training():
    """Class 5 sibling: `x = next(it)` last in the body is read by the next iteration's training step, not by
    code under `no_grad`."""
    source = (
        HEAD
        + """\
loader = DataLoader(train_set, batch_size=4, num_workers=2)  # <- train
it = iter(loader)
x = next(it)
for step in range(10_000):
    loss = model(x.to(device))
    x = next(it)
    loss.backward()
    optimizer.step()
"""
    )
    assert loader_codes(source) == [("TL202", line_of(source, "train"))]


# -- a project dataset of tokenized text (rasbt/LLMs-from-scratch, round 4) ----------------------------------

TOKENIZED = (
    HEAD
    + """\


class GPTDataset(Dataset):
    def __init__(self, txt, tokenizer, max_length):
        token_ids = tokenizer.encode(txt)
        self.inputs = [torch.tensor(token_ids[i : i + max_length]) for i in range(0, len(token_ids), max_length)]

    def __len__(self):
        return len(self.inputs)

    def __getitem__(self, idx):
        return self.inputs[idx]


dataset = None
if args.train:
    dataset = GPTDataset(text, tokenizer, 256)
loader = DataLoader(dataset, batch_size=8, shuffle=True)  # <- loader
for batch in loader:
    loss = model(batch.to(device)).mean()
    loss.backward()
    optimizer.step()
"""
)


def test_a_dataset_that_tokenizes_text_up_front_needs_no_pinned_memory():
    """A batch is a few KB of token ids, as with a Hugging Face table prepared by `.map(tokenize)`; the
    author measured pinning on this loader at 28,399 against 28,402 tokens/s."""
    assert "TL202" not in {code for code, _ in loader_codes(TOKENIZED)}
    handed = TOKENIZED.replace(
        "def __init__(self, txt, tokenizer, max_length):", "def __init__(self, token_ids, max_length):"
    )
    handed = handed.replace("        token_ids = tokenizer.encode(txt)\n", "").replace(
        "GPTDataset(text, tokenizer, 256)", "GPTDataset(ids, 256)"
    )
    assert "TL202" not in {code for code, _ in loader_codes(handed)}


def test_a_dataset_that_tokenizes_each_item_as_it_is_read_still_gets_pinned_memory():
    """hkproj/pytorch-transformer holds the tokenizers and builds each item's ids and masks in
    `__getitem__` (a 350x350 mask per sample): not a few KB."""
    per_item = (
        TOKENIZED.replace(
            "        token_ids = tokenizer.encode(txt)\n",
            "        self.tokenizer_src = tokenizer\n        token_ids = txt\n",
        )
        .replace(
            "def __init__(self, txt, tokenizer, max_length):",
            "def __init__(self, txt, tokenizer_src, max_length):",
        )
        .replace("self.tokenizer_src = tokenizer", "self.tokenizer_src = tokenizer_src")
    )
    found = loader_codes(per_item)
    assert ("TL202", line_of(per_item, "loader")) in found


FACTORY_ZERO = (
    HEAD
    + """\


def create_loader(dataset, batch_size=4, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)  # <- loader


train_loader = create_loader(train_set, batch_size=8, num_workers=0)
for epoch in range(args.epochs):
    for x, y in train_loader:
        loss = model(x.to(device)).mean()
        loss.backward()
        optimizer.step()
"""
)


def test_workers_a_parameter_every_caller_leaves_at_zero_are_no_workers():
    """rasbt's `create_dataloader_v1(..., num_workers=0)`, called with `num_workers=0` everywhere: no
    worker process starts, so none restarts; a caller that asks for workers makes them restart."""
    assert "TL203" not in {code for code, _ in loader_codes(FACTORY_ZERO)}
    omitted = FACTORY_ZERO.replace("batch_size=8, num_workers=0)", "batch_size=8)")
    assert "TL203" not in {code for code, _ in loader_codes(omitted)}
    asked = FACTORY_ZERO.replace("batch_size=8, num_workers=0)", "batch_size=8, num_workers=4)")
    assert ("TL203", line_of(asked, "loader")) in loader_codes(asked)
