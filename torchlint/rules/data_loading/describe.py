"""`debug facts`, the data loading family's section: what each loader's dataset is, whether its samples are
on the GPU already, and what worker processes could not pickle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.rules.data_loading.datasets import DatasetAnalysis

if TYPE_CHECKING:
    from torchlint.facts import ModuleFacts


def describe(facts: ModuleFacts) -> list[str]:
    if not facts.loaders:
        return []
    datasets = facts.analysis(DatasetAnalysis)
    out = ["datasets:"]
    for loader in facts.loaders:
        out.append(f"  loader at line {facts.line_of(loader.call)}: {datasets.kind(loader).value}")
        if datasets.samples_on_cpu(loader) is False:
            out.append("    samples on the GPU: moved by the dataset or `collate_fn`, or held there already")
        for problem in datasets.unpicklable(loader):
            out.append(f"    does not pickle: {problem.what} is {problem.why}")
    return out
