"""The project index answers questions about importers without building the facts of files that cannot
matter: checking one file of a big project costs that file and its real dependents, not the project."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support import line_of, project_facts, record_calls
from torchlint.facts.torch.training import TrainingAnalysis
from torchlint.index.project import ImportWords, Project
from torchlint.rules.mixed_precision.precision import PrecisionAnalysis

FACTORY = """
    from torch.utils.data import DataLoader

    def build_loader(dataset):
        return DataLoader(dataset, batch_size=32)

    def describe(dataset):
        return f"{len(dataset)} samples"
"""
TRAIN = """
    from data import build_loader

    def main(model, optimizer, dataset):
        for epoch in range(10):
            for x, y in build_loader(dataset):
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
"""
REPORT = """
    from data import describe

    def report(dataset):
        print(describe(dataset))
"""


def _factory_loader(facts):
    (loader,) = [x for x in facts.loaders if line_of(facts, x.call) == 5]
    return loader


def test_a_factory_check_builds_only_the_importers_that_name_its_factory(tmp_path, parsed):
    files = {"data.py": FACTORY, "train.py": TRAIN, "report.py": REPORT}
    facts = project_facts(tmp_path, files, "data.py")
    uses = facts.training.loader_uses(_factory_loader(facts))
    assert [use.path.endswith("train.py") for use in uses] == [True]
    assert [use.per_epoch for use in uses] == [True]
    assert "train.py" in parsed
    assert "report.py" not in parsed


def test_a_module_whose_functions_return_no_loader_builds_no_importer(tmp_path, parsed):
    helpers = "def describe(dataset):\n    return len(dataset)\n"
    user = "from helpers import describe\nfrom data import build_loader\nprint(describe([]))\n"
    files = {"helpers.py": helpers, "user.py": user, "data.py": FACTORY}
    facts = project_facts(tmp_path, files, "helpers.py")
    assert facts.loaders == []
    assert facts.source.analysis(TrainingAnalysis).exported_training_sources() == []
    assert parsed == []


def test_an_importer_that_calls_the_factory_by_a_re_exported_alias_is_still_asked(tmp_path, parsed):
    files = {
        "pkg/__init__.py": "from .data import build_loader as make_loader\n",
        "pkg/data.py": FACTORY,
        "train.py": TRAIN.replace("from data import build_loader", "from pkg import make_loader").replace(
            "build_loader(dataset)", "make_loader(dataset)"
        ),
    }
    facts = project_facts(tmp_path, files, "pkg/data.py")
    uses = facts.training.loader_uses(_factory_loader(facts))
    assert [use.path.endswith("train.py") for use in uses] == [True]
    assert "train.py" in parsed


def test_a_loop_function_asks_only_the_importers_that_call_it(tmp_path, parsed):
    engine = """
        def train_one_epoch(model, optimizer, loader):
            for x, y in loader:
                loss = model(x).sum()
                loss.backward()
                optimizer.step()

        def evaluate(model, loader):
            return sum(model(x).sum() for x, _ in loader)
    """
    caller = """
        from torch.utils.data import DataLoader
        from engine import train_one_epoch

        def main(model, optimizer, dataset):
            loader = DataLoader(dataset)
            for epoch in range(3):
                train_one_epoch(model, optimizer, loader)
    """
    other = "from engine import evaluate\n\ndef check(model, loader):\n    return evaluate(model, loader)\n"
    files = {"engine.py": engine, "main.py": caller, "other.py": other}
    facts = project_facts(tmp_path, files, "engine.py")
    (loop,) = facts.training.training_loops
    assert len(facts.source.analysis(TrainingAnalysis).loaders_of_loop(loop)) == 1
    assert "main.py" in parsed
    assert "other.py" not in parsed


def test_a_file_whose_text_a_question_read_without_building_it_is_a_dependency(tmp_path, parsed):
    """`loaders.py` asks which of its importers may call `build` (their text, not their facts): a file
    that cannot is not built, but the answer depends on its text all the same (an edit that calls
    `build` there changes it), for the result cache and for what the editor keeps between keystrokes."""
    loaders = """
        from torch.utils.data import DataLoader

        def build(dataset):
            return DataLoader(dataset, batch_size=32)
    """
    other = "import loaders\n\nprint(loaders.__name__)\n"
    facts = project_facts(tmp_path, {"loaders.py": loaders, "report.py": other}, "loaders.py")
    project, report = facts.source.project, (tmp_path / "report.py").resolve()
    assert not project.may_name(report, ("build",), tmp_path / "loaders.py")
    assert project.dependencies(tmp_path / "loaders.py") == {report}
    assert project.mentions(report, ("print",), tmp_path / "other.py") is True
    assert project.dependencies(tmp_path / "other.py") == {report}
    assert parsed == []


def test_a_call_to_a_name_another_module_assigns_never_builds_that_module(tmp_path, parsed):
    factories = """
        import functools
        import torch

        make_optimizer = functools.partial(torch.optim.SGD, lr=0.1)
        build_net = torch.nn.Linear
    """
    train = """
        from factories import build_net, make_optimizer

        model = build_net(10, 2)
        optimizer = make_optimizer(model.parameters())
        for x in range(10):
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    """
    facts = project_facts(tmp_path, {"factories.py": factories, "train.py": train}, "train.py")
    assert len(facts.training.training_loops) == 1
    assert [model.text for model in facts.models.trained] == ["model"]
    assert parsed == []  # neither name is a class, a def or an import there
    # Its findings still depend on factories.py: defining `class build_net` there would change them.
    assert facts.source.project.dependencies(tmp_path / "train.py") == {(tmp_path / "factories.py").resolve()}


def test_a_module_is_built_for_a_name_it_may_bind_as_asked(tmp_path, parsed):
    layers = "class Block:\n    pass\n\ndef trunc_normal_(tensor):\n    return tensor\n"
    project = Project(tmp_path)
    (tmp_path / "layers.py").write_text(layers)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from layers import trunc_normal_ as init\n")
    requester = tmp_path / "train.py"
    assert project.facts_binding(tmp_path / "layers.py", "trunc_normal_", "class", requester) is None
    assert project.facts_binding(tmp_path / "layers.py", "Block", "function", requester) is None
    assert project.facts_binding(tmp_path / "layers.py", "missing", "class", requester) is None
    assert parsed == []
    # A name a module imports may be a class it re-exports: asked as either, the module is built.
    assert project.facts_binding(tmp_path / "pkg" / "__init__.py", "init", "class", requester) is not None
    assert project.facts_binding(tmp_path / "layers.py", "Block", "class", requester) is not None
    assert parsed == ["__init__.py", "layers.py"]


def test_a_checked_buffer_answers_for_its_file_not_the_text_on_disk(tmp_path, parsed):
    import libcst as cst

    from torchlint.facts import SourceModule

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "models.py").write_text("x = 1\n")
    project = Project(tmp_path)
    buffer = "class Net:\n    pass\n"
    models = tmp_path / "models.py"
    project.register(models, SourceModule("models.py", buffer, cst.parse_module(buffer), project, models))
    found = project.facts_binding(models, "Net", "class", tmp_path / "train.py")
    assert found is not None and found.top_level_class("Net") is not None


def test_may_name_follows_aliases_through_a_chain_of_re_exports(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a.py").write_text("def build():\n    pass\n")
    (tmp_path / "b.py").write_text("from a import build as make\n")
    (tmp_path / "c.py").write_text("from b import make as create\ncreate()\n")
    (tmp_path / "d.py").write_text("import a\nprint(a)\n")
    (tmp_path / "e.py").write_text("import a  # we build it elsewhere\n")
    project = Project(tmp_path)
    assert project.may_name(tmp_path / "c.py", {"build"})
    assert not project.may_name(tmp_path / "d.py", {"build"})
    assert project.may_name(
        tmp_path / "e.py", {"build"}
    )  # the text, comments too: a cheap over-approximation


def test_may_name_wants_the_name_as_a_word(tmp_path):
    """A name in code is a whole word: `compiler` in a docstring, `build_all` or `rebuild` write no `build`
    (yolov5's `export.py`, 1,500 lines, was parsed to learn that its Edge TPU compiler compiles nothing)."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a.py").write_text('"""Needs the Edge TPU compiler."""\nbuild_all = rebuild = 1\n')
    (tmp_path / "b.py").write_text("import torch\nmodel = torch.compile(net)\nbuild(model)\n")
    project = Project(tmp_path)
    assert not project.may_name(tmp_path / "a.py", {"compile", "build"})
    assert project.may_name(tmp_path / "b.py", {"compile"})
    assert project.may_name(tmp_path / "b.py", {"build"})


def test_may_name_reads_the_registered_text_of_a_checked_file(tmp_path):
    import libcst as cst

    from torchlint.facts import SourceModule

    files = {"data.py": FACTORY, "train.py": "import data\n"}
    project = project_facts(tmp_path, files, "data.py").source.project
    train = tmp_path / "train.py"
    assert not project.may_name(train, {"build_loader"})
    buffer = "import data\nloader = data.build_loader(ds)\n"  # an editor's unsaved text
    project.register(train, SourceModule("train.py", buffer, cst.parse_module(buffer), project, train))
    assert project.may_name(train, {"build_loader"})


@pytest.mark.parametrize(
    "text",
    [
        "import train",
        "from train import main",
        "from .train import main",
        "x = 1; import pkg.train as t",
        "from pkg import (\n    evaluate,  # see eval() (and test())\n    train,\n)",
        "from pkg import(evaluate,\n    train)",
        "from pkg import \\\n    (evaluate,\n     train)",
        "import os, \\\n    train",
        "from \\\n    train import main",
        "from pkg.\\\ntrain import main",
        "from pkg import \\\r(\n    train,\n)",  # a backslash before a lone CR continues the line too
        "from pkg import (evaluate,\r\n    train)",
    ],
)
def test_a_file_that_may_import_a_module_is_scanned_however_the_import_is_written(text):
    file = Path("project/other.py")
    words = ImportWords({file: text.encode()})
    assert words.may_import(Path("project/train.py"), {file: text.encode()}) == [file]
    assert words.may_import_name("train", {file: text.encode()}) == [file]


def test_a_file_that_only_uses_the_word_of_a_module_name_is_not_scanned():
    text = '"""How to train."""\nfrom os import (\n    path,\n)\n\ndef train(model):\n    model.train()  # train\n'
    everything = {
        Path("project/other.py"): text.encode(),
        Path("project/pkg/use.py"): b"from . import utils\n",
    }
    words = ImportWords(everything)
    assert words.may_import(Path("project/train.py"), everything) == []
    assert words.may_import(Path("project/pkg/__init__.py"), everything) == [Path("project/pkg/use.py")]
    assert words.may_import_name("train", everything) == []


def test_a_file_is_ruled_out_by_its_text_where_its_bytes_are_that_text(tmp_path):
    """A name a file's facts can refer to is written in its text, parsed or not (a file CPython does not
    parse is not parsed to learn that); where a coding declaration may make the text other than the
    bytes, the file may name anything."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "calls.py").write_text("def (:\n    anything()\n")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nx = 1\n")
    project = Project(tmp_path)
    assert not project.may_name(Path(tmp_path / "broken.py"), {"anything"})
    assert project.may_name(Path(tmp_path / "calls.py"), {"anything"})
    assert project.may_name(Path(tmp_path / "latin.py"), {"anything"})


def test_a_context_parameter_outside_any_loop_or_backward_asks_no_importer(tmp_path, parsed):
    # A library's `with lock:` / `with mode:`: what callers pass cannot change a precision answer there,
    # so the project's importers are neither scanned nor built (in torch's own sources that was most of
    # a run). The same `with` around a loop still asks them.
    library = "def guarded(lock, fn):\n    with lock:\n        return fn()\n"
    user = "import torch\nfrom library import guarded\nguarded(torch.autocast('cuda'), print)\n"
    files = {"library.py": library, "user.py": user}
    facts = project_facts(tmp_path, files, "library.py")
    assert facts.analysis(PrecisionAnalysis).regions == []
    assert parsed == []
    looping = "def train(ctx, steps):\n    for step in steps:\n        with ctx:\n            step()\n"
    trainer = "import torch\nfrom library import train\ntrain(torch.autocast('cuda'), [])\n"
    facts = project_facts(tmp_path, {"library.py": looping, "user.py": trainer}, "library.py")
    assert len(facts.analysis(PrecisionAnalysis).regions) == 1
    assert "user.py" in parsed


def test_a_whole_run_parses_each_file_once_and_reports_as_a_check_of_it_alone(tmp_path, monkeypatch):
    """data.py's check asks train.py, which trains with its factory's loader, and so builds train.py's facts;
    train.py's own check then reuses them instead of parsing and analysing it again, and finds what a check
    of train.py alone finds."""
    import libcst

    from torchlint.api import RunOptions, run

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    train = textwrap.dedent(TRAIN).replace("    for epoch", "    model.cuda()\n    for epoch")
    (tmp_path / "train.py").write_text(train)
    (tmp_path / "data.py").write_text(textwrap.dedent(FACTORY))
    monkeypatch.chdir(tmp_path)
    parsed_texts: list[str] = []
    original = libcst.parse_module

    def counting(text, *args, **kwargs):
        parsed_texts.append(text)
        return original(text, *args, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", counting)
    # Files are checked in name order: data.py, then train.py.
    both = run(RunOptions([tmp_path], cache=False, jobs=1))
    assert sorted(parsed_texts) == sorted([textwrap.dedent(FACTORY), train])
    alone = run(RunOptions([tmp_path / "train.py"], cache=False, jobs=1))
    found = [(d.code, d.location.line) for d in both.diagnostics if d.path == "train.py"]
    assert found == [(d.code, d.location.line) for d in alone.diagnostics]
    assert ("TL301", 8) in found


def test_the_project_files_are_their_real_paths_through_linked_folders_and_files(tmp_path):
    """The walk names each file by its real path (what every question compares): through a project root
    reached by a link, and for a linked file, where it leads."""
    from torchlint.workspace.fs import FileSystem

    real = tmp_path / "real"
    (real / "pkg").mkdir(parents=True)
    (real / "train.py").write_text("import torch\n")
    (real / "pkg" / "model.py").write_text("import torch\n")
    (real / "shared").mkdir()
    (real / "shared" / "utils.py").write_text("x = 1\n")
    (real / "pkg" / "utils.py").symlink_to(real / "shared" / "utils.py")
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    files = Project(tmp_path / "link", FileSystem(), None, None, None).python_files()
    assert sorted(files) == [
        real / "pkg" / "model.py",
        real / "shared" / "utils.py",  # pkg/utils.py, a link
        real / "shared" / "utils.py",
        real / "train.py",
    ]


def test_a_checked_files_header_is_read_from_the_bytes_the_scan_holds(tmp_path, monkeypatch):
    """The exports kept by content are keyed by the file's bytes: a checked file's statements are looked up
    with the bytes the import scan read, not a second copy of them (1.2-1.4 MB of timm's peak)."""
    import torchlint.index.project as index
    from torchlint.linter import Linter
    from torchlint.workspace.settings import Settings

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    data = tmp_path / "data.py"
    data.write_text(textwrap.dedent(FACTORY))
    asked: list[bytes] = []  # each object the statements were asked with (kept alive: ids stay apart)
    original = index._exports_of

    def recording(content: bytes):
        if content == data.read_bytes() and not any(content is other for other in asked):
            asked.append(content)
        return original(content)

    monkeypatch.setattr(index, "_exports_of", recording)
    linter = Linter()
    linter.check_text(str(data), data.read_text(), Settings(select=("ALL",)))
    project = linter.project_for(data.resolve())
    assert project.scanned(data)  # read from the checked text
    assert len(asked) == 1


def test_files_the_import_scan_parsed_are_not_parsed_again_for_syntax_errors(tmp_path, monkeypatch):
    """The first check's cross-file questions scan every file with CPython's parser; the files checked
    after it skip their own syntax check, and a file with a syntax error still reports TL001."""
    import torchlint.linter
    from torchlint.api import RunOptions, run

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "data.py").write_text(textwrap.dedent(FACTORY))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    (tmp_path / "zbroken.py").write_text("from data import build_loader\ndef f(:\n")
    monkeypatch.chdir(tmp_path)
    asked: list[str] = []
    original = torchlint.linter._syntax_error

    def recording(path, text):
        asked.append(path)
        return original(path, text)

    monkeypatch.setattr(torchlint.linter, "_syntax_error", recording)
    outcome = run(RunOptions([tmp_path], cache=False, jobs=1))
    assert asked == ["data.py", "zbroken.py"]  # data.py's check scanned train.py; zbroken.py did not parse
    assert [(d.path, d.code) for d in outcome.diagnostics if d.code == "TL001"] == [("zbroken.py", "TL001")]


def test_a_script_folder_outside_the_working_directory_is_its_own_project(tmp_path, monkeypatch):
    """`torchlint check /tmp/job/data.py` run from elsewhere, with no pyproject.toml or .git above the job:
    the index reads the job's folder, where Python finds its imports, so data.py's loader is known to feed
    train.py's loop (TL201). Before, it read the working directory, which holds none of them, and was silent.
    The cache still goes to the working directory's project, never into the job's folder."""
    from torchlint.api import RunOptions, run

    job, elsewhere = tmp_path / "job", tmp_path / "elsewhere"
    job.mkdir()
    elsewhere.mkdir()
    (elsewhere / "pyproject.toml").write_text("[project]\nname = 'other'\n")
    train = textwrap.dedent(TRAIN).replace("    for epoch", "    model.cuda()\n    for epoch")
    (job / "train.py").write_text(train)
    (job / "data.py").write_text(textwrap.dedent(FACTORY))
    monkeypatch.chdir(elsewhere)
    outcome = run(RunOptions([job / "data.py"], jobs=1))
    assert [(d.code, d.location.line) for d in outcome.diagnostics if d.code == "TL201"] == [("TL201", 5)]
    assert not (job / ".torchlint_cache").exists() and (elsewhere / ".torchlint_cache").is_dir()


def test_a_symlink_loop_in_the_project_is_skipped_by_the_importer_scan(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "data.py").write_text(textwrap.dedent(FACTORY))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    (tmp_path / "loop_a.py").symlink_to(tmp_path / "loop_b.py")
    (tmp_path / "loop_b.py").symlink_to(tmp_path / "loop_a.py")
    project = Project(tmp_path)
    assert project.importers_of(tmp_path / "data.py") == [(tmp_path / "train.py").resolve()]


def test_a_scan_by_content_is_kept_within_its_budget_of_bytes():
    from torchlint.memo import ByContent

    calls: list[bytes] = []
    scan = ByContent(lambda data: calls.append(data) or len(data), limit=10)
    assert [scan(b"aaaa"), scan(b"bbbb"), scan(b"aaaa")] == [4, 4, 4]
    assert calls == [b"aaaa", b"bbbb"]  # the second `aaaa` was kept
    scan(b"cccc")  # 12 bytes kept: the least recently used, `bbbb`, goes
    scan(b"aaaa")
    scan(b"bbbb")
    assert calls == [b"aaaa", b"bbbb", b"cccc", b"bbbb"]


def test_the_linters_parser_of_other_files_parses_the_other_files_of_the_project(tmp_path):
    """The Language Server keeps the other files' modules between checks: they go through the parser it
    gives for them, not through the buffer's."""
    from torchlint.linter import Linter
    from torchlint.workspace.settings import Settings

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "engine.py").write_text(textwrap.dedent(TRAIN).replace("from data import build_loader\n", ""))
    script = "import torch\nfrom engine import main\nmodel = torch.nn.Linear(2, 2)\n"
    script += "main(model, torch.optim.SGD(model.parameters()), [])\n"
    (tmp_path / "train.py").write_text(script)
    seen: list[str] = []

    def parse(text):
        seen.append(text)
        return cst.parse_module(text)

    import libcst as cst

    linter = Linter(parse_other=parse)
    linter.check_text(str(tmp_path / "train.py"), script, Settings())
    assert seen == [(tmp_path / "engine.py").read_text()]


def test_two_files_with_one_text_never_share_a_module_in_one_run(tmp_path):
    """A cache of modules by text would hand two copies of a file one tree: analyses that key nodes by
    identity would then take one file's classes for the other's."""
    from torchlint.lsp.parsing import OtherFiles

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "model.py").write_text("class Net:\n    pass\n")
    other_files = OtherFiles()
    project = Project(tmp_path, parse=other_files.parse, collect=other_files.records)
    first = project.facts_for(tmp_path / "a" / "model.py")
    second = project.facts_for(tmp_path / "b" / "model.py")
    assert first.module is not second.module
    assert first.module.deep_equals(second.module)


def test_a_file_with_a_coding_declaration_is_always_built_for_a_name(tmp_path, parsed):
    """CPython's parser and the facts may decode such a file differently (`\\r# coding: utf-7`): its
    summary cannot rule a name out."""
    (tmp_path / "plain.py").write_text("x = 1\n")
    (tmp_path / "declared.py").write_text("# -*- coding: utf-8 -*-\nx = 1\n")
    project = Project(tmp_path)
    requester = tmp_path / "train.py"
    assert project.facts_binding(tmp_path / "plain.py", "Net", "class", requester) is None
    assert project.facts_binding(tmp_path / "declared.py", "Net", "class", requester) is not None
    assert parsed == ["declared.py"]


def test_a_checked_file_no_question_asked_for_is_let_go_and_built_again_from_the_checked_text(
    tmp_path, parsed
):
    """A whole-tree run lets go of the facts of a checked file nothing asked for; a later question about it
    gets facts of the text that was checked (here an unsaved buffer, not the file on disk), as displayed
    then, and answers as before."""
    import gc

    import libcst as cst

    from torchlint.facts import SourceModule

    files = {"data.py": FACTORY, "train.py": TRAIN}
    project = project_facts(tmp_path, files, "train.py").source.project
    data = tmp_path / "data.py"
    buffer = textwrap.dedent(FACTORY).replace("batch_size=32", "batch_size=64")
    project.register(data, SourceModule("pkg/data.py", buffer, cst.parse_module(buffer), project, data))
    assert project.release(data)
    gc.collect()
    again = project.facts_for(data, tmp_path / "train.py")
    assert again is not None and (again.path, again.text) == ("pkg/data.py", buffer)
    assert parsed == []  # built from the checked text, not read from disk
    assert project.may_name(data, {"batch_size=64"}) and project.mentions(data, ["batch_size=64"])
    assert not project.release(data)  # asked for now: kept for the questions to come


def test_facts_let_go_that_something_still_holds_are_the_ones_handed_back(tmp_path):
    files = {"data.py": FACTORY, "train.py": TRAIN}
    facts = project_facts(tmp_path, files, "data.py")
    project, data = facts.source.project, tmp_path / "data.py"
    assert project.release(data)
    assert project.facts_for(data) is facts.source


def test_a_file_a_question_asked_for_is_not_let_go(tmp_path):
    files = {"data.py": FACTORY, "train.py": TRAIN}
    facts = project_facts(tmp_path, files, "data.py")
    project = facts.source.project
    project.facts_for(tmp_path / "train.py", tmp_path / "data.py")
    project.register(tmp_path / "train.py", project.facts_for(tmp_path / "train.py"))
    assert not project.release(tmp_path / "train.py")
    assert project.release(tmp_path / "data.py")


def test_a_whole_tree_run_lets_go_of_facts_and_finds_what_it_found_keeping_them(tmp_path, monkeypatch):
    """A run of at least `TREE` files lets each checked file's facts go unless a question asked for them:
    the findings are those of a run that keeps every file's facts."""
    from torchlint.api import TREE, RunOptions, run
    from torchlint.index.project import Project
    from torchlint.linter import Linter

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "data.py").write_text(textwrap.dedent(FACTORY))
    (tmp_path / "train.py").write_text(
        textwrap.dedent(TRAIN).replace("    for epoch", "    model.cuda()\n    for epoch")
    )
    for number in range(TREE):  # scripts no other file imports
        script = textwrap.dedent(TRAIN).replace("from data import build_loader", textwrap.dedent(FACTORY))
        (tmp_path / f"script{number}.py").write_text(script)
    monkeypatch.chdir(tmp_path)
    projects = record_calls(monkeypatch, Project, "release", lambda self, path: self)
    freed = run(RunOptions([tmp_path], cache=False, jobs=1))
    let_go = {path.name for path in projects[-1]._released}
    assert {f"script{number}.py" for number in range(TREE)} <= let_go
    monkeypatch.setattr(Linter, "let_go", lambda self, lets_go: None)
    projects.clear()
    kept = run(RunOptions([tmp_path], cache=False, jobs=1))
    assert projects == []
    assert [d.to_plain() for d in freed.diagnostics] == [d.to_plain() for d in kept.diagnostics]
    assert any(d.code == "TL301" for d in kept.diagnostics)


def _scripts_nothing_imports(root: Path, count: int) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for number in range(count):
        script = textwrap.dedent(TRAIN).replace("from data import build_loader", textwrap.dedent(FACTORY))
        (root / f"script{number}.py").write_text(script)


def _run_without_the_collector(root: Path, monkeypatch) -> list[Project]:
    """A whole-tree run with the cyclic collector off, as the command line runs; the projects it let go in."""
    import gc

    from torchlint.api import RunOptions, run

    monkeypatch.chdir(root)
    projects = record_calls(monkeypatch, Project, "release", lambda self, path: self)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        run(RunOptions([root], cache=False, jobs=1))
    finally:
        if was_enabled:
            gc.enable()
    return projects


def test_with_the_collector_off_a_whole_tree_run_frees_what_it_lets_go(tmp_path, monkeypatch):
    """The command line keeps the cyclic collector off: once the process has held `MEMORY_TO_KEEP`, the
    facts let go are freed by a collection after each check, and the C heap's free pages handed back."""
    import gc

    import torchlint.linter as linter_module
    from torchlint.api import TREE

    _scripts_nothing_imports(tmp_path, TREE)
    monkeypatch.setattr(linter_module, "MEMORY_TO_KEEP", 0)
    collected: list[int] = []
    collect = gc.collect
    monkeypatch.setattr(
        gc, "collect", lambda generation=2: collected.append(generation) or collect(generation)
    )
    trimmed = record_calls(monkeypatch, linter_module, "_trim_heap")
    released = _run_without_the_collector(tmp_path, monkeypatch)[-1]._released
    assert collected == [0] * TREE  # the youngest generation, after each check
    assert len(trimmed) == TREE
    assert len(released) == TREE
    assert all(held() is None for _, _, _, held in released.values())


def test_below_the_memory_to_keep_a_whole_tree_run_collects_nothing(tmp_path, monkeypatch):
    import gc

    import torchlint.linter as linter_module
    from torchlint.api import TREE

    _scripts_nothing_imports(tmp_path, TREE)
    monkeypatch.setattr(linter_module, "MEMORY_TO_KEEP", 2**50)
    collected: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda generation=2: collected.append(generation) or 0)
    trimmed = record_calls(monkeypatch, linter_module, "_trim_heap")
    assert len(_run_without_the_collector(tmp_path, monkeypatch)[-1]._released) == TREE
    assert collected == trimmed == []


def test_the_heap_is_trimmed_where_the_c_library_can_and_skipped_where_it_cannot(monkeypatch):
    import ctypes

    import torchlint.linter as linter_module

    calls: list[int] = []
    monkeypatch.setattr(linter_module, "_malloc_trim", calls.append)
    linter_module._trim_heap()
    assert calls == [0]  # glibc: every arena's free pages

    class NoTrim:  # macOS, musl: a C library without malloc_trim
        pass

    monkeypatch.setattr(linter_module, "_malloc_trim", None)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: NoTrim())
    linter_module._trim_heap()
    assert linter_module._malloc_trim is False
    linter_module._trim_heap()  # looked up once: nothing to call


def test_exports_naming_finds_the_files_whose_code_may_name_a_class_once_per_run(tmp_path, monkeypatch):
    """What TL401 asks of a class module's names: the exports of the files that write one (also under an
    alias), searched once per run (the editor asks at each keystroke) while every asker depends on every
    file's export."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text("class Encoder:\n    pass\n")
    (tmp_path / "pkg.py").write_text("from model import Encoder as Trunk\n")
    (tmp_path / "train.py").write_text("from pkg import Trunk\nnet = Trunk()\n")
    (tmp_path / "other.py").write_text("# an Encoderless comment\nx = 1\n")
    project = Project(tmp_path)
    searched = []
    original = Project._exports_naming
    monkeypatch.setattr(Project, "_exports_naming", lambda *args: searched.append(1) or original(*args))
    model = tmp_path / "model.py"
    for requester in (model, tmp_path / "other.py"):
        found = project.exports_naming(model, {"Encoder"}, requester)
        assert found is not None and sorted(path.name for path in found) == ["pkg.py", "train.py"]
        every = {"model.py", "pkg.py", "train.py", "other.py"} - {requester.name}
        assert {path.name for path in project.dependencies(requester)} >= every
    assert searched == [1]
    project.asks_exports = False
    assert project.exports_naming(model, {"Encoder"}, model) is None


def test_a_question_asked_of_every_file_is_recorded_once_for_its_asker(tmp_path):
    """`named_anywhere` reads every file's text: the asker's findings depend on every file (the result
    cache's key), recorded as one mark rather than one entry per file and asker (10 MB of timm's peak)."""
    (tmp_path / "pyproject.toml").write_text("")
    for name in ("a", "b", "c", "d"):
        (tmp_path / f"{name}.py").write_text("x = 1\n")
    project = Project(tmp_path)
    asker = (tmp_path / "a.py").resolve()
    assert not project.named_anywhere(("compile",), asker)
    assert {path.name for path in project.dependencies(asker)} == {"b.py", "c.py", "d.py"}
    assert len(project._depends[asker]) == 2  # the file list, and every file's text
