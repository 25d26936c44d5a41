"""Training loops, the loaders they iterate, and whether once per epoch — in the styles of real code."""

from __future__ import annotations

import pytest
from support import facts_of, line_of, project_facts, training_loaders


def loops(source: str) -> list[int]:
    facts = facts_of(source)
    return [line_of(facts, loop.node) for loop in facts.training.training_loops]


def test_module_level_script_loop_is_found():
    source = """\
    import torch
    from torch.utils.data import DataLoader
    loader = DataLoader(ds, batch_size=32)
    for x, y in loader:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
    assert loops(source) == [4]
    assert training_loaders(facts_of(source)) == {3: [False]}


def test_epoch_loop_around_the_batch_loop_means_per_epoch():
    source = """\
    from torch.utils.data import DataLoader
    train_loader = DataLoader(train_set, shuffle=True)
    val_loader = DataLoader(val_set)
    for epoch in range(10):
        for step, (x, y) in enumerate(tqdm(train_loader, desc="train")):
            scaler.scale(criterion(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
        with torch.no_grad():
            for x, y in val_loader:
                evaluate(model(x), y)
    """
    assert loops(source) == [5]
    assert training_loaders(facts_of(source)) == {2: [True]}


def test_train_function_called_per_epoch_with_the_loader_as_argument():
    source = """\
    from torch.utils.data import DataLoader

    def train(args, model, device, train_loader, optimizer, epoch):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()

    def test(model, device, test_loader):
        for data, target in test_loader:
            model(data)

    def main():
        train_loader = DataLoader(dataset1, batch_size=64)
        test_loader = DataLoader(dataset2, batch_size=1000)
        for epoch in range(1, args.epochs + 1):
            train(args, model, device, train_loader, optimizer, epoch)
            test(model, device, test_loader)
            scheduler.step()
    """
    assert training_loaders(facts_of(source)) == {16: [True]}


def test_step_function_called_in_the_batch_loop():
    source = """\
    from torch.utils.data import DataLoader

    class Trainer:
        def __init__(self, cfg):
            self.loader = DataLoader(cfg.dataset, batch_size=cfg.batch_size)

        def training_step(self, batch):
            loss = self.model(batch).mean()
            self.accelerator.backward(loss)
            self.optimizer.step()
            self.lr_scheduler.step()

        def fit(self):
            for epoch in range(self.epochs):
                for batch in self.loader:
                    self.training_step(batch)
    """
    facts = facts_of(source)
    assert [line_of(facts, loop.node) for loop in facts.training.training_loops] == [15]
    assert training_loaders(facts) == {5: [True]}


def test_while_loop_over_steps_with_next_is_a_single_pass():
    source = """\
    from torch.utils.data import DataLoader
    loader = DataLoader(stream, batch_size=8)
    it = iter(loader)
    step = 0
    while step < max_steps:
        batch = next(it)
        loss = model(batch)
        loss.backward()
        opt.step()
        step += 1
    """
    assert training_loaders(facts_of(source)) == {2: [False]}


def test_iterator_recreated_after_stop_iteration_is_per_epoch():
    source = """\
    from torch.utils.data import DataLoader
    loader = DataLoader(ds, batch_size=8)
    it = iter(loader)
    for step in range(max_steps):
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            batch = next(it)
        model(batch).backward()
        opt.step()
    """
    assert training_loaders(facts_of(source)) == {2: [True]}


def test_gradient_accumulation_still_counts():
    source = """\
    from torch.utils.data import DataLoader
    loader = DataLoader(ds)
    for epoch in range(3):
        for i, batch in enumerate(loader):
            loss = model(batch) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert training_loaders(facts_of(source)) == {2: [True]}


def test_a_loop_without_an_optimizer_step_is_not_training():
    source = """\
    from torch.utils.data import DataLoader
    loader = DataLoader(ds)
    for batch in loader:
        loss = model(batch)
        loss.backward()  # only collects gradients, e.g. for saliency maps
    for batch in loader:
        scheduler.step()
    """
    assert loops(source) == []
    assert training_loaders(facts_of(source)) == {}


def test_loader_from_a_local_factory_and_tuple_unpacking():
    source = """\
    from torch.utils.data import DataLoader

    def get_loaders(cfg):
        train = DataLoader(cfg.train, shuffle=True)
        val = DataLoader(cfg.val)
        return train, val

    def main(cfg):
        train_loader, val_loader = get_loaders(cfg)
        for epoch in range(cfg.epochs):
            for batch in train_loader:
                model(batch).backward()
                opt.step()
            for batch in val_loader:
                model(batch)
    """
    assert training_loaders(facts_of(source)) == {4: [True]}


def test_accelerate_prepare_keeps_track_of_each_loader():
    source = """\
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    accelerator = Accelerator()
    train_dl = DataLoader(train_ds, shuffle=True)
    eval_dl = DataLoader(eval_ds)
    model, optimizer, train_dl, eval_dl = accelerator.prepare(model, optimizer, train_dl, eval_dl)
    for epoch in range(epochs):
        for batch in train_dl:
            accelerator.backward(model(**batch).loss)
            optimizer.step()
    """
    facts = facts_of(source)
    assert training_loaders(facts) == {4: [True]}
    assert facts.frameworks == {"accelerate"}


def test_lightning_train_dataloader_and_trainer_fit():
    source = """\
    import lightning as L
    from torch.utils.data import DataLoader

    class Data(L.LightningDataModule):
        def train_dataloader(self):
            return DataLoader(self.train_set, batch_size=32, shuffle=True)

        def val_dataloader(self):
            return DataLoader(self.val_set, batch_size=32)

    loader = DataLoader(other_set)
    trainer = L.Trainer(max_epochs=3)
    trainer.fit(model, loader)
    """
    facts = facts_of(source)
    assert training_loaders(facts) == {6: [True], 11: [True]}
    assert facts.frameworks == {"lightning"}


def test_train_one_epoch_in_another_module(tmp_path):
    files = {
        "engine.py": """\
            def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, scaler=None):
                model.train()
                for image, target in metric_logger.log_every(data_loader, 10, header):
                    image, target = image.to(device), target.to(device)
                    loss = criterion(model(image), target)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

            def evaluate(model, criterion, data_loader, device):
                for image, target in data_loader:
                    model(image)
        """,
        "train.py": """\
            import torch
            from engine import evaluate, train_one_epoch

            def main(args):
                data_loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size)
                data_loader_test = torch.utils.data.DataLoader(dataset_test, batch_size=1)
                for epoch in range(args.start_epoch, args.epochs):
                    train_one_epoch(model, criterion, optimizer, data_loader, device, epoch)
                    evaluate(model, criterion, data_loader_test, device=device)
        """,
    }
    facts = project_facts(tmp_path, files, "train.py")
    assert training_loaders(facts) == {5: [True]}


def test_loader_built_by_a_factory_in_another_module(tmp_path):
    files = {
        "data.py": """\
            from torch.utils.data import DataLoader

            def build_loaders(cfg):
                train = DataLoader(cfg.train, batch_size=cfg.bs, shuffle=True)
                val = DataLoader(cfg.val, batch_size=cfg.bs)
                return train, val
        """,
        "train.py": """\
            from data import build_loaders

            def main(cfg):
                train_loader, val_loader = build_loaders(cfg)
                for epoch in range(cfg.epochs):
                    for batch in train_loader:
                        model(batch).backward()
                        opt.step()
        """,
    }
    facts = project_facts(tmp_path, files, "data.py")
    assert training_loaders(facts) == {4: [True]}


def test_what_cannot_be_resolved_is_not_evidence(tmp_path):
    files = {
        "train.py": """\
            from torch.utils.data import DataLoader
            from somewhere_else import fit

            loader = DataLoader(ds)
            fit(model, loader)
        """,
    }
    facts = project_facts(tmp_path, files, "train.py")
    assert training_loaders(facts) == {}


def test_loaders_in_a_dict_comprehension_iterated_by_phase():
    source = """\
    import torch
    dataloaders = {x: torch.utils.data.DataLoader(image_datasets[x], batch_size=4, num_workers=4) for x in ["train", "val"]}
    for epoch in range(num_epochs):
        for phase in ["train", "val"]:
            for inputs, labels in dataloaders[phase]:
                outputs = model(inputs)
                if phase == "train":
                    loss.backward()
                    optimizer.step()
    """
    facts = facts_of(source)
    assert [line_of(facts, loop.node) for loop in facts.training.training_loops] == [5]
    assert training_loaders(facts) == {2: [True]}


def test_a_module_level_loader_read_by_a_function_called_every_epoch():
    source = """\
    import torch
    train_loader = torch.utils.data.DataLoader(ds, batch_size=8, **kwargs)

    def train(epoch):
        for data, _ in train_loader:
            loss_function(model(data)).backward()
            optimizer.step()

    if __name__ == "__main__":
        for epoch in range(1, args.epochs + 1):
            train(epoch)
    """
    assert training_loaders(facts_of(source)) == {2: [True]}


def test_a_scaler_object_that_does_backward_and_step_in_call():
    source = """\
    from torch.utils.data import DataLoader

    class NativeScaler:
        def __call__(self, loss, optimizer):
            self._scaler.scale(loss).backward()
            self._scaler.step(optimizer)

    loss_scaler = NativeScaler()
    loader = DataLoader(ds)
    for epoch in range(3):
        for batch in loader:
            loss = model(batch)
            loss_scaler(loss, optimizer)
    """
    assert training_loaders(facts_of(source)) == {9: [True]}


def test_a_helper_given_the_loss_and_the_optimizer_counts_as_the_step():
    source = """\
    from torch.utils.data import DataLoader

    def train_one_epoch(model, data_loader, optimizer, loss_scaler):
        for samples in data_loader:
            loss = model(samples)
            loss_scaler(loss, optimizer, parameters=model.parameters())

    loader = DataLoader(ds)
    for epoch in range(3):
        train_one_epoch(model, loader, optimizer, scaler)
        log(loss_value, lr)
    """
    assert training_loaders(facts_of(source)) == {8: [True]}


@pytest.mark.parametrize(
    ("optimizer", "counts"),
    [("self.opt", True), ("opt if warm else self.optimizer", True), ("optimizers[0]", False), ("lr", False)],
)
def test_the_optimizer_handed_to_a_helper_is_read_off_the_tree(monkeypatch, optimizer, counts):
    """Whether a helper is handed the optimizer is read from the word its argument's code ends with, without
    rendering that code: rendering every argument of every call was 5% of a check of yolov5's train.py."""
    from torchlint.facts.syntax.module import SourceModule

    source = f"""\
    from torch.utils.data import DataLoader

    def train_one_epoch(model, data_loader, opt, optimizers, loss_scaler):
        for samples in data_loader:
            loss = model(samples)
            loss_scaler(loss, {optimizer})

    loader = DataLoader(ds)
    for epoch in range(3):
        train_one_epoch(model, loader, optimizer, optimizers, scaler)
    """
    facts = facts_of(source)
    rendered = []
    original = SourceModule.code
    monkeypatch.setattr(
        SourceModule, "code", lambda self, node: rendered.append(node) or original(self, node)
    )
    assert training_loaders(facts) == ({8: [True]} if counts else {})
    if not counts:  # most calls: nothing rendered to learn that no optimizer is handed
        handed = next(call for call in facts.source.calls if facts.code(call.node.func) == "loss_scaler")
        assert not any(node is handed.node.args[1].value for node in rendered)


def test_debug_facts_says_how_a_loader_reaches_its_loop():
    from torchlint.rules.debug import describe

    source = """\
    from torch.utils.data import DataLoader

    def forever(loader):
        while True:
            yield from loader

    loader = DataLoader(ds, batch_size=32, num_workers=4)
    restarted = DataLoader(ds, batch_size=32, num_workers=4)
    batches = forever(loader)
    it = iter(restarted)
    for step in range(1000):
        x = next(batches)
        try:
            y = next(it)
        except StopIteration:
            it = iter(restarted)
            y = next(it)
        model(x, y).backward()
        optimizer.step()
    """
    output = describe(facts_of(source))
    assert (
        "feeds training via a generator re-iterated forever, consumed with `next(...)` by a training loop in "
        "example.py, iterated every epoch" in output
    )
    assert (
        "feeds training via `iter(...)` re-created after StopIteration in a training loop in example.py, "
        "iterated every epoch" in output
    )
