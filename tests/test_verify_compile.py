"""`torchlint verify` says what torch.compile did (graphs, graph breaks at their lines, recompiles after the
warm-up with the guard that failed, compile seconds) and where the script waits for a tensor's value on the
host (a sync per step at a line).

The real runs compile with `backend="eager"`: Dynamo still traces, breaks and recompiles as it would for
Inductor, in a fraction of the time."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchlint.verify import compare, report
from torchlint.verify.bootstrap import dynamo
from torchlint.verify.runner import RunConfig, run_once

TORCH_DIR = "/site-packages/torch"


def _library(path: str) -> bool:
    return path.startswith(TORCH_DIR)


def _python(args: list[str]) -> subprocess.CompletedProcess:
    """This Python, with this checkout's torchlint importable (as the bootstrap has it in a run)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, env=env)


def _line(source: str, text: str) -> int:
    """The 1-based line of the first line of `source` that contains `text`."""
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


# -- real runs ---------------------------------------------------------------------------------------------

BREAKING = textwrap.dedent(
    '''
    """A compiled forward that breaks its graph twice, then recompiles for a smaller batch after the warm-up."""
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Linear(8, 16)
            self.out = nn.Linear(16, 1)

        def forward(self, x):
            h = self.hidden(x).relu()
            scale = h.mean().item()
            if h.sum() > 0:
                h = h * 2
            return self.out(h) * scale


    torch.manual_seed(0)
    model = torch.compile(Net(), backend="eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(20):
        x = torch.randn(16 if step < 4 else 8, 8)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: {loss.item():.4f}")
    '''
).lstrip()


def _verify(folder: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    json_path = folder / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "torchlint", "verify", "--json", str(json_path), *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert json_path.is_file(), done.stdout + done.stderr
    return done, json.loads(json_path.read_text(encoding="utf-8"))


def test_a_compiled_forward_that_breaks_its_graph_is_reported_with_both_lines_its_graphs_and_compile_time(
    tmp_path,
):
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(BREAKING, encoding="utf-8")
    item, branch = _line(BREAKING, "h.mean().item()"), _line(BREAKING, "if h.sum() > 0")
    logged = _line(BREAKING, "loss.item():.4f")
    done, data = _verify(tmp_path, "train.py", "--steps", "4", "--warmup", "3", "--select", "TL5")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = data["variants"][0]["compile"]
    # One function, three graphs: the forward up to `.item()`, on to the `if`, and the rest.
    assert summary["graphs"] == 3
    assert summary["frames"] == [
        {"function": "forward", "filename": "train.py", "row": item - 2, "graphs": 3, "compiles": 8}
    ]
    breaks = [(b["filename"], b["row"], b["reason"]) for b in summary["graph_breaks"]]
    assert breaks == [
        ("train.py", item, "Unsupported Tensor.item() call with capture_scalar_outputs=False"),
        ("train.py", branch, "Data-dependent branching"),
    ]
    assert "capture_scalar_outputs = True" in summary["graph_breaks"][0]["hint"]
    # The batch shrinks in step 5, after the 3 warm-up steps: each of the three frames recompiles.
    late = [r for r in summary["recompiles"] if r["after_warmup"]]
    assert [(r["row"], r["step"]) for r in late] == [(item - 2, 4), (item, 4), (branch, 4)]
    assert late[0]["reason"] == "tensor 'x' size mismatch at index 0. expected 16, actual 8"
    assert 0 < summary["compile_s_after_warmup"] < summary["compile_s"]
    out = done.stdout
    assert "3 graphs, 2 breaks, 3 recompiles" in out  # the table's compile column
    assert "what compile did (original): 3 graphs in 1 compiled function, 2 graph breaks, " in out
    assert f"  graph break at train.py:{item}: Unsupported Tensor.item() call" in out
    assert f"  graph break at train.py:{branch}: Data-dependent branching" in out
    assert (
        f"  recompiled forward (train.py:{item - 2}) in step 5: guard failed: tensor 'x' size mismatch" in out
    )
    # The same `.item()` reads the tensor on the host in every step, as does the loop's log line.
    syncs = [f for f in data["variants"][0]["runtime_findings"] if f["kind"] == "sync"]
    assert [(f["location"]["row"], f["value"]) for f in syncs] == [(item, 1.0), (branch, 1.0), (logged, 1.0)]
    assert f"1 host read of tensor values per step at train.py:{item} (`.item()`)" in out


PLAIN = textwrap.dedent(
    """
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.Adam(model.parameters())
    for step in range(4):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen = loss.item()
        if loss > 100:
            print("diverged")
        values = loss.detach().tolist()
        print(f"{loss:.3f}")
    """
).lstrip()


def test_a_run_counts_the_scripts_own_tensor_reads_by_line_and_reports_no_compile_without_one(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(PLAIN, encoding="utf-8")
    config = RunConfig(script, [], tmp_path, steps=3, warmup=3, threads=1, device="cpu", timeout=120)
    result = run_once(config, {}, tmp_path, "original", 0)
    assert result.status == "finished", result.log_tail()
    assert result.raw["compile"] is None  # Adam imports Dynamo, and compiles nothing
    syncs = result.raw["syncs"]
    assert syncs["source"] == "tensor-reads" and syncs["steps"] == 2  # the warm-up's last two, not the first
    sites = {(s["row"], s["what"]): s["count"] for s in syncs["sites"]}
    # Adam reads its step counter with `.item()` once per parameter: torch's own reads are not counted;
    # Tensor.__format__ reads the value for the f-string's line.
    assert sites == {
        (_line(PLAIN, "seen = loss.item()"), "item()"): 2,
        (_line(PLAIN, "if loss > 100"), "bool()"): 2,
        (_line(PLAIN, "values = "), "tolist()"): 2,
        (_line(PLAIN, 'print(f"{loss:.3f}")'), "item()"): 2,
    }


CUDA_SCRIPT = textwrap.dedent(
    """
    import torch

    model = torch.nn.Linear(4, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(6):
        loss = model(torch.randn(8, 4, device="cuda")).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        host = loss.detach().cpu()
        seen = loss.item()
    """
).lstrip()


def test_on_cuda_every_sync_is_counted_at_its_line_from_pytorchs_sync_warnings(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    script = tmp_path / "train.py"
    script.write_text(CUDA_SCRIPT, encoding="utf-8")
    config = RunConfig(script, [], tmp_path, steps=2, warmup=3, threads=1, device="cuda", timeout=120)
    result = run_once(config, {}, tmp_path, "original", 0)
    assert result.status == "stopped", result.log_tail()
    syncs = result.raw["syncs"]
    assert syncs["source"] == "cuda-sync-debug" and syncs["steps"] == 2
    rows = {s["row"]: s["count"] for s in syncs["sites"]}
    # The step hook's own `torch.cuda.synchronize()` is not the script's: never counted.
    assert rows == {_line(CUDA_SCRIPT, ".cpu()"): 2, _line(CUDA_SCRIPT, "loss.item()"): 2}
    assert "synchronizing CUDA operation" not in result.log.read_text(encoding="utf-8")


# -- Dynamo's records, parsed ------------------------------------------------------------------------------

FIRST_BREAK = f"""Graph break in user code at {TORCH_DIR}/nn/functional.py:1700
Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):

Unsupported Tensor.item() call with capture_scalar_outputs=False
  Explanation: Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.
  Hint: Set `torch._dynamo.config.capture_scalar_outputs = True`.

  Developer debug context: call_method TensorVariable() item () {{}}

User code traceback:
  File "/project/train.py", line 30, in <module>
    loss = model(x)
  File "/project/model.py", line 12, in forward
    h = F.something(h)
  File "{TORCH_DIR}/nn/functional.py", line 1700, in something
    return x.item()
"""

REPEATED_BREAK = f"""Graph break (user stack suppressed due to duplicate graph break) in user code at {TORCH_DIR}/nn/functional.py:1700
Graph Break Reason: Unsupported Tensor.item() call with capture_scalar_outputs=False
  Explanation: Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False."""


def test_a_graph_break_inside_torch_is_placed_at_the_users_innermost_line():
    parsed = dynamo.parse_graph_break(FIRST_BREAK, _library)
    assert parsed == {
        "reason": "Unsupported Tensor.item() call with capture_scalar_outputs=False",
        "hint": "Set `torch._dynamo.config.capture_scalar_outputs = True`.",
        "filename": "/project/model.py",
        "row": 12,
        "at": (f"{TORCH_DIR}/nn/functional.py", 1700),
    }


def test_a_repeated_graph_break_logged_without_its_traceback_keeps_the_first_ones_user_line():
    handler = dynamo.GraphBreakHandler(_library, lambda: 7)
    for message in (FIRST_BREAK, REPEATED_BREAK, "Graph break: something Dynamo says without a place"):
        handler.emit(logging.LogRecord("torch._dynamo", logging.DEBUG, "x.py", 1, message, None, None))
    assert [(b["filename"], b["row"], b["step"]) for b in handler.breaks] == [
        ("/project/model.py", 12, 7)
    ] * 2
    assert dynamo.unique_breaks(handler.breaks)[0]["count"] == 2


def test_a_frame_dynamo_gives_up_on_is_a_break_at_the_users_line():
    message = (
        "Graph break: torch.compile cannot properly resume from this graph break, which results in a skip.\n"
        "torch.compile will skip tracing the frame step (train.py line 5) and fall back to eager.\n"
        "The graph break occurred in the following user code:\n"
        '  File "/project/train.py", line 9, in step\n'
        "    with torch.no_grad(): ...\n"
    )
    parsed = dynamo.parse_graph_break(message, _library)
    assert parsed is not None and (parsed["filename"], parsed["row"]) == ("/project/train.py", 9)
    assert parsed["reason"].startswith("torch.compile will skip tracing the frame step")


def test_a_recompiles_reason_is_its_failed_guards_without_their_numbers_and_comments():
    reason = (
        "1/1: tensor 'h' size mismatch at index 0. expected 4, actual 5\n"
        "1/0: ___stack0 == 0.2288   # if h.sum() > 0:  # mp/train.py:13 in torch_dynamo_resume_in_forward_at_12\n"
        "User stack trace:\n"
        '  File "/tmp/train.py", line 13, in torch_dynamo_resume_in_forward_at_12\n'
    )
    assert (
        dynamo.guard_failures(reason)
        == "tensor 'h' size mismatch at index 0. expected 4, actual 5; ___stack0 == 0.2288"
    )


def test_resume_frames_belong_to_the_function_they_resume():
    assert dynamo.original_function("torch_dynamo_resume_in_forward_at_12") == "forward"
    assert dynamo.original_function("torch_dynamo_resume_in_torch_dynamo_resume_in_step_at_3_at_9") == "step"
    assert dynamo.original_function("forward") == "forward"


def _metric(name, row, ops, start, seconds=0.1, recompile=None, filename="/p/train.py"):
    return {
        "co_name": name,
        "co_filename": filename,
        "co_firstlineno": row,
        "graph_op_count": ops,
        "recompile_reason": recompile,
        "fail_type": None,
        "fail_reason": None,
        "start": start,
        "seconds": seconds,
    }


def test_graphs_are_counted_per_function_and_recompiles_placed_among_the_steps():
    metrics = [
        _metric("forward", 10, 3, start=100.5),
        _metric("torch_dynamo_resume_in_forward_at_12", 12, 2, start=100.6),
        _metric("torch_dynamo_resume_in_forward_at_13", 13, 0, start=100.7),  # an empty tail: no graph
        _metric(None, None, 0, start=101.5, seconds=0.4, filename=None),  # a backward compiled lazily
        _metric("forward", 10, 3, start=103.5, seconds=0.2, recompile="0/0: tensor 'x' size mismatch"),
    ]
    ends = [101.0, 102.0, 103.0, 104.0]  # four steps; the warm-up is two
    summary = dynamo.summarise(metrics, [], ends, warmup=2)
    assert summary["graphs"] == 2
    assert summary["frames"] == [
        {"function": "forward", "filename": "/p/train.py", "row": 10, "graphs": 2, "compiles": 4}
    ]
    assert summary["recompiles"] == [
        {
            "reason": "tensor 'x' size mismatch",
            "function": "forward",
            "filename": "/p/train.py",
            "row": 10,
            "step": 3,
            "after_warmup": True,
        }
    ]
    assert summary["compile_s"] == pytest.approx(0.9) and summary["compile_s_after_warmup"] == pytest.approx(
        0.2
    )


# -- the parent's side: findings, links, the table ---------------------------------------------------------


def _site(row, per_step, what="item()"):
    return {"filename": "/p/train.py", "row": row, "function": "train", "what": what,
            "count": int(per_step * 2), "per_step": per_step}  # fmt: skip


def test_syncs_in_every_step_are_findings_at_their_lines_linked_to_the_static_findings_there():
    raw = {"syncs": {"source": "tensor-reads", "steps": 2, "per_step": 5.5, "sites": [
        _site(84, 3.0), _site(40, 1.5, what="bool()"), _site(90, 0.5),
    ]}}  # fmt: skip
    found = compare.sync_findings(raw, lambda filename, row: ["TL205"] if row == 84 else [])
    assert [f.message for f in found] == [
        "3 host reads of tensor values per step at {location} (`.item()`): a host-device sync each on a GPU",
        "1.5 host reads of tensor values per step at {location} (a tensor's truth value: `if`, `while`, `and`, "
        "`bool()`): a host-device sync each on a GPU",
    ]  # the read every other step (a log line) is not a per-step cost
    assert [(f.kind, f.location, f.value, f.codes, f.static) for f in found][0] == (
        "sync", {"filename": "/p/train.py", "row": 84}, 3.0, [], ["TL205"]
    )  # fmt: skip


def test_on_cuda_a_sync_finding_says_host_device_sync():
    raw = {"syncs": {"source": "cuda-sync-debug", "steps": 2, "per_step": 1.0, "sites": [
        _site(12, 1.0, what="sync")
    ]}}  # fmt: skip
    assert [f.message for f in compare.sync_findings(raw, lambda f, r: [])] == [
        "1 host-device sync per step at {location}"
    ]


def test_a_graph_break_is_linked_to_the_static_findings_at_its_line():
    raw = {"compile": {"graphs": 2, "graph_breaks": [{"filename": "/p/m.py", "row": 7, "reason": "r"}]}}
    summary = compare.compile_summary(raw, lambda filename, row: ["TL101"] if row == 7 else [])
    assert summary["graph_breaks"][0]["static_findings_there"] == ["TL101"]
    assert compare.compile_summary({"compile": None}, lambda f, r: []) is None
    assert compare.compile_summary({"compile": {"error": "boom"}}, lambda f, r: []) is None


def _compiled(breaks=1, late_recompiles=0):
    return {
        "graphs": breaks + 1,
        "frames": [{"function": "forward", "filename": "m.py", "row": 5, "graphs": breaks + 1, "compiles": 2}],
        "graph_breaks": [
            {"reason": "Data-dependent branching", "hint": "Use `torch.cond`.", "filename": "m.py", "row": 9,
             "static_findings_there": []}
        ] * breaks,
        "recompiles": [
            {"reason": "tensor 'x' size mismatch", "function": "forward", "filename": "m.py", "row": 5,
             "step": 6, "after_warmup": True}
        ] * late_recompiles,
        "failures": [],
        "compile_s": 1.234,
        "compile_s_after_warmup": 0.5 if late_recompiles else 0.0,
    }  # fmt: skip


def test_the_compile_column_counts_graphs_breaks_and_the_recompiles_the_timed_steps_paid_for():
    assert report.compile_cell(None) == "-"
    assert report.compile_cell(_compiled()) == "2 graphs, 1 break"
    assert report.compile_cell(_compiled(breaks=0, late_recompiles=2)) == "1 graph, 0 breaks, 2 recompiles"


def test_the_compile_column_appears_only_when_a_variant_compiled():
    rows = [["variant", "losses"], ["original", "-"], ["all", "agree"]]
    report._add_compile_column(rows, [{"compile": None}, {"compile": None}])
    assert rows == [["variant", "losses"], ["original", "-"], ["all", "agree"]]
    report._add_compile_column(rows, [{"compile": None}, {"compile": _compiled()}])
    assert rows == [
        ["variant", "compile", "losses"],
        ["original", "-", "-"],
        ["all", "2 graphs, 1 break", "agree"],
    ]


def test_what_compile_did_names_each_break_its_hint_and_the_late_recompiles():
    out = io.StringIO()
    data = {"variants": [{"name": "original", "kind": "original", "compile": _compiled(late_recompiles=1)}]}
    report._write_compile(data, out)
    assert out.getvalue() == (
        "\nwhat compile did (original): 2 graphs in 1 compiled function, 1 graph break, 1.23 s compiling, "
        "0.50 s of it after the warm-up\n"
        "  graph break at m.py:9: Data-dependent branching\n"
        "    hint: Use `torch.cond`.\n"
        "  recompiled forward (m.py:5) in step 7: guard failed: tensor 'x' size mismatch\n"
    )


def test_a_per_fix_variant_shows_what_compile_did_only_when_the_original_did_not_compile():
    def shown(original):
        out = io.StringIO()
        variants = [{"name": "original", "kind": "original", "compile": original},
                    {"name": "TL101 train.py:5", "kind": "each", "compile": _compiled()}]  # fmt: skip
        report._write_compile({"variants": variants}, out)
        return [line.split(":")[0] for line in out.getvalue().splitlines() if line.startswith("what")]

    assert shown(None) == ["what compile did (TL101 train.py"]
    assert shown(_compiled()) == ["what compile did (original)"]


def test_the_bootstrap_modules_import_nothing_heavy_at_their_top():
    code = (
        "import sys; from torchlint.verify.bootstrap import dynamo, syncs; "
        "print(sorted(m for m in ('torch', 'torch._dynamo') if m in sys.modules))"
    )
    done = _python(["-c", code])
    assert done.stdout.strip() == "[]", done.stderr


WRAPPED = textwrap.dedent(
    """
    import os, torch
    from torchlint.verify.bootstrap import syncs

    def mine(tensor):
        return 42

    torch.Tensor.tolist = mine  # the script's own patch
    watch = syncs.TensorReadWatch(syncs.make_classifier(os.path.dirname(torch.__file__), "/nowhere"))
    watch.start()
    value = torch.ones(1).item()
    watch.stop()
    print(torch.Tensor.tolist is mine, "item" in torch.Tensor.__dict__, dict(watch.sites))
    """
).lstrip()


def test_the_read_wrappers_give_back_the_methods_they_found_the_scripts_own_patch_included(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "wrapped.py"
    script.write_text(WRAPPED, encoding="utf-8")
    done = _python([str(script)])
    line = _line(WRAPPED, "torch.ones(1).item()")
    assert done.stdout.strip() == f"True False {{({str(script)!r}, {line}, '<module>', 'item()'): 1}}", (
        done.stderr
    )


def test_reads_made_while_a_loader_fetches_a_batch_are_not_counted_as_syncs():
    """A dataset's `int(label)` or a collate function's `.tolist()` reads a host tensor on a GPU machine
    too: reads under `torch/utils/data` on the stack are data loading, not host-device syncs."""
    import os
    import sys

    from torchlint.verify.bootstrap.syncs import _loading

    fetcher: dict = {}
    where = os.path.join("site-packages", "torch", "utils", "data", "_utils", "fetch.py")
    exec(compile("def fetch(get):\n    return get()\n", where, "exec"), fetcher)
    assert fetcher["fetch"](lambda: _loading(sys._getframe())) is True
    assert _loading(sys._getframe()) is False
