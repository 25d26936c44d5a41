"""Every loader option, with its value and where it comes from."""

from __future__ import annotations

from support import facts_of


def options(source: str, index: int = 0) -> dict[str, str]:
    loader = facts_of(source).loaders[index]
    return {name: option.describe() for name, option in loader.options.items() if name != "dataset"}


def test_keywords_and_positional_arguments():
    source = "from torch.utils.data import DataLoader\nDataLoader(ds, 32, True, num_workers=0)\n"
    assert options(source) == {"batch_size": "32", "shuffle": "True", "num_workers": "0"}


def test_kwargs_dict_literal_with_updates_conditional_and_not():
    source = """\
    from torch.utils.data import DataLoader

    def main(args, use_cuda):
        train_kwargs = {"batch_size": args.batch_size}
        train_kwargs.update({"shuffle": True})
        if use_cuda:
            cuda_kwargs = {"num_workers": 1, "pin_memory": True}
            train_kwargs.update(cuda_kwargs)
        return DataLoader(dataset, **train_kwargs)
    """
    assert options(source) == {
        "batch_size": "user-controlled: `args.batch_size`, via `**train_kwargs`",
        "shuffle": "True, via `**train_kwargs`",
        "num_workers": "1, via `**train_kwargs`, conditional",
        "pin_memory": "True, via `**train_kwargs`, conditional",
    }


def test_dict_call_merges_and_item_assignment():
    source = """\
    import torch
    base = dict(batch_size=8, num_workers=4)
    extra = {**base, "pin_memory": True}
    extra["drop_last"] = True
    both = extra | {"persistent_workers": True}
    loader = torch.utils.data.DataLoader(ds, **both)
    """
    assert options(source) == {
        "batch_size": "8, via `**both`",
        "num_workers": "4, via `**both`",
        "pin_memory": "True, via `**both`",
        "drop_last": "True, via `**both`",
        "persistent_workers": "True, via `**both`",
    }


def test_argparse_values_are_user_controlled_with_their_default():
    source = """\
    import argparse
    from torch.utils.data import DataLoader
    parser = argparse.ArgumentParser()
    parser.add_argument("-j", "--workers", default=4, type=int)
    parser.add_argument("--pin", dest="pin_memory", action="store_true")
    args = parser.parse_args()
    loader = DataLoader(ds, num_workers=args.workers, pin_memory=args.pin_memory)
    """
    assert options(source) == {
        "num_workers": "user-controlled: `args.workers` (argparse --workers, default 4)",
        "pin_memory": "user-controlled: `args.pin_memory` (argparse --pin)",
    }


def test_config_objects_parameters_and_environment_are_user_controlled():
    source = """\
    import os
    from torch.utils.data import DataLoader

    def build(cfg, workers):
        a = DataLoader(ds, num_workers=cfg.data.num_workers)
        b = DataLoader(ds, num_workers=workers)
        c = DataLoader(ds, num_workers=int(os.environ.get("WORKERS", 2)))
        d = DataLoader(ds, num_workers=config["workers"])
        return a, b, c, d
    """
    facts = facts_of(source)
    kinds = [loader.option("num_workers").value.kind.value for loader in facts.loaders]
    assert kinds == ["user-controlled"] * 4


def test_machine_based_counts_are_computed_not_missing():
    source = """\
    import os
    from torch.utils.data import DataLoader
    workers = min(8, os.cpu_count() or 1)
    loader = DataLoader(ds, num_workers=workers)
    """
    assert facts_of(source).loaders[0].option("num_workers").value.kind.value == "computed"


def test_a_dict_the_code_does_not_build_makes_options_incomplete():
    source = """\
    from torch.utils.data import DataLoader

    def build(loader_kwargs):
        return DataLoader(ds, **loader_kwargs), DataLoader(ds, **vars(args))
    """
    assert [loader.complete for loader in facts_of(source).loaders] == [False, False]


def test_self_attributes_set_in_init():
    source = """\
    from torch.utils.data import DataLoader

    class Trainer:
        def __init__(self, workers):
            self.workers = workers
            self.batch = 16

        def loader(self):
            return DataLoader(self.ds, batch_size=self.batch, num_workers=self.workers)
    """
    assert options(source) == {"batch_size": "16", "num_workers": "user-controlled: parameter `workers`"}


def test_a_conditional_dict_expression_is_conditional():
    source = """\
    import torch
    kwargs = {"num_workers": 1, "pin_memory": True} if args.cuda else {}
    loader = torch.utils.data.DataLoader(ds, batch_size=8, **kwargs)
    """
    assert options(source) == {
        "batch_size": "8",
        "num_workers": "1, via `**kwargs`, conditional",
        "pin_memory": "True, via `**kwargs`, conditional",
    }
