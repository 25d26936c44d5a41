"""`torchlint verify`'s parts that need no training run: statistics and verdicts, the variants computed in
memory, patched sources served to imports and `runpy`, the sitecustomize chain, process-group bookkeeping,
usage errors, and a parent process that never imports torch."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support import FIXTURES, REPO

from torchlint.verify import compare, patches
from torchlint.verify.runner import SITE, process_group_members


def _stats(times, losses=None, first_epoch=None, device="cpu"):
    losses = losses if losses is not None else [1.0] * len(times)
    return compare.RunStats(
        list(times),
        len(times),
        0.1,
        0.0,
        0.5,
        1000,
        "peak_rss",
        losses,
        first_epoch or len(losses),
        0,
        device,
    )


def test_a_clearly_faster_variant_is_faster_with_an_interval_above_one():
    before = _stats([0.100, 0.102, 0.098, 0.101, 0.099, 0.100, 0.103])
    after = _stats([0.050, 0.051, 0.049, 0.050, 0.052, 0.048, 0.050])
    speed = compare.compare_speed([before], [after])
    assert speed.verdict == "faster"
    assert speed.speedup == pytest.approx(2.0, rel=0.02)
    assert speed.interval is not None and speed.interval[0] > 1.8


def test_a_clearly_slower_variant_is_slower():
    before = _stats([0.05, 0.051, 0.049, 0.05, 0.05])
    after = _stats([0.1, 0.101, 0.099, 0.1, 0.1])
    assert compare.compare_speed([before], [after]).verdict == "slower"


def test_overlapping_noise_is_no_change():
    before = _stats([0.10, 0.12, 0.09, 0.11, 0.10, 0.13])
    after = _stats([0.11, 0.09, 0.12, 0.10, 0.10, 0.12])
    assert compare.compare_speed([before], [after]).verdict == "no change"


def test_repeats_give_the_range_of_the_paired_ratios():
    before = [_stats([0.1] * 5), _stats([0.2] * 5)]
    after = [_stats([0.05] * 5), _stats([0.1] * 5)]
    speed = compare.compare_speed(before, after)
    assert speed.repeats_range == (2.0, 2.0)


def test_safe_fixes_need_identical_losses_at_every_step():
    before = _stats([0.1] * 3, losses=[1.0, 0.9, 0.8])
    same = compare.compare_losses(before, _stats([0.1] * 3, losses=[1.0, 0.9, 0.8]), unsafe=False)
    assert same.verdict == "agree" and same.max_abs_diff == 0.0 and "tight" in same.tolerance
    off = compare.compare_losses(before, _stats([0.1] * 3, losses=[1.0, 0.9, 0.81]), unsafe=False)
    assert off.verdict == "differ" and "step 2" in off.detail


def test_unsafe_fixes_compare_the_mean_loss_of_the_first_epoch_loosely():
    first = [1.0, 0.9, 0.8, 0.7, 0.6]
    before = _stats([0.1] * 8, losses=[*first, 0.1, 0.1, 0.1], first_epoch=5)
    after = _stats([0.1] * 8, losses=[1.02, 0.93, 0.81, 0.7, 0.61, 5.0, 5.0, 5.0], first_epoch=5)
    result = compare.compare_losses(before, after, unsafe=True)
    assert result.verdict == "agree" and result.steps_compared == 5
    assert result.tolerance.startswith("loose: mean loss over the first epoch")
    worse = _stats([0.1] * 8, losses=[2.0, 1.9, 1.8, 1.7, 1.6, 0.1, 0.1, 0.1], first_epoch=5)
    assert compare.compare_losses(before, worse, unsafe=True).verdict == "differ"


def test_an_epoch_of_a_few_steps_is_no_epoch_every_recorded_step_is_compared():
    """The epoch marker is any DataLoader's first batch: a validation loader ends the "epoch" after 1-3
    steps (seen: 1 of 25 steps compared, called agreeing). Then every recorded step is, and it says so."""
    before = _stats([0.1] * 6, losses=[1.0, 0.9, 0.8, 0.7, 0.6, 0.5], first_epoch=1)
    after = _stats([0.1] * 6, losses=[1.0, 3.0, 3.0, 3.0, 3.0, 3.0], first_epoch=1)
    result = compare.compare_losses(before, after, unsafe=True)
    assert (result.verdict, result.steps_compared) == ("differ", 6)
    assert result.tolerance.startswith("loose: mean loss over every recorded step")
    assert result.detail == "mean loss 0.75 -> 2.66667 over 6 steps"


def test_dropout_like_noise_agrees_whatever_the_number_of_steps():
    """A fix that changes the random numbers (compile's dropout masks) moves each step, not the mean beyond
    its noise: the verdict does not flip between 10 and 400 steps."""
    import random

    rng = random.Random(0)
    for steps in (10, 40, 400):
        base = [2.0 - i / steps for i in range(steps)]
        before = _stats([0.1] * steps, losses=[x + rng.gauss(0, 0.3) for x in base], first_epoch=steps)
        after = _stats([0.1] * steps, losses=[x + rng.gauss(0, 0.3) for x in base], first_epoch=steps)
        assert compare.compare_losses(before, after, unsafe=True).verdict == "agree", steps


def test_a_fix_that_needs_a_gpu_is_not_measurable_on_a_cpu():
    assert compare.not_measurable_here(["TL202"], "cpu") == "pinned memory speeds up copies to a GPU only"
    assert compare.not_measurable_here(["TL202", "TL205"], "cpu") is not None
    assert compare.not_measurable_here(["TL202", "TL201"], "cpu") is None  # workers act on a CPU too
    assert compare.not_measurable_here(["TL202"], "cuda") is None


def test_a_loss_that_turns_nan_differs_even_loosely():
    before = _stats([0.1] * 2, losses=[1.0, 0.9])
    after = _stats([0.1] * 2, losses=[1.0, float("nan")])
    assert compare.compare_losses(before, after, unsafe=True).verdict == "differ"


def test_run_stats_leave_out_warmup_and_profiled_steps():
    steps = [
        {
            "end": i,
            "time": t,
            "data_wait": t / 2,
            "losses": 1,
            "loss": 1.0,
            "epoch_marker": 1 + (i >= 6),
            "skipped": False,
            "profiled": i >= 8,
        }
        for i, t in enumerate([9.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 5.0, 5.0])
    ]
    stats = compare.run_stats({"steps": steps, "memory": {"peak_rss_bytes": 7}}, warmup=2)
    assert stats.step_times == [1.0] * 6 and stats.excluded_profiled == 2
    assert stats.first_epoch == 6 and stats.data_wait_share == pytest.approx(0.5)
    assert stats.peak_memory == 7 and stats.warmup_seconds == 18.0


def test_a_high_data_wait_points_at_the_loader_and_its_static_findings():
    raw = {
        "loaders": [{"filename": "/p/train.py", "line": 12, "num_workers": 0, "persistent_workers": False}],
        "loader_wait": {"0": 3.0},
        "memory": {},
    }
    stats = _stats([0.1] * 3)
    stats.data_wait_share = 0.4
    found = compare.runtime_findings(raw, stats, lambda f, line: ["TL201", "TL101"] if line == 12 else [])
    assert [f.kind for f in found] == ["data-wait"]
    assert found[0].codes == ["TL201", "TL203"] and found[0].static == ["TL201"]
    assert found[0].location == {"filename": "/p/train.py", "row": 12}


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.py"))}


def test_each_gives_one_variant_per_fix_and_all_together_without_touching_the_files():
    folder = FIXTURES / "loader_bound"
    before = _digest(folder)
    planned = patches.plan(folder / "train.py", select=("TL2",), unsafe_fixes=True, each=True)
    assert _digest(folder) == before
    names = [v.name for v in planned.variants]
    assert names[0] == "original" and names[-1] == "all"
    assert [v.fixes[0].code for v in planned.variants[1:-1]] == ["TL201", "TL202"]
    script = str((folder / "train.py").resolve())
    for variant in planned.variants[1:]:
        assert set(variant.patched) == {script}
        assert variant.patched[script] != (folder / "train.py").read_text(encoding="utf-8")
    assert planned.variants[-1].unsafe and not planned.variants[2].unsafe
    assert "num_workers" in planned.variants[-1].patched[script]
    # TL203's persistent_workers applies only once TL201 added workers: "all" lists it from the later pass.
    assert [f.code for f in planned.variants[-1].fixes] == ["TL201", "TL202", "TL203"]


def test_without_unsafe_fixes_only_the_safe_ones_are_planned():
    planned = patches.plan(FIXTURES / "loader_bound" / "train.py", select=("TL2",))
    assert [v.name for v in planned.variants] == ["original", "all"]
    assert [f.code for f in planned.variants[1].fixes] == ["TL202"]


def test_a_selection_with_nothing_to_fix_plans_the_original_only():
    planned = patches.plan(FIXTURES / "loader_bound" / "train.py", select=("TL5",))
    assert [v.name for v in planned.variants] == ["original"]


def test_an_unknown_code_is_a_patch_error():
    with pytest.raises(patches.PatchError, match="TL999"):
        patches.plan(FIXTURES / "loader_bound" / "train.py", select=("TL999",))


def _python(code: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_patched_sources_are_served_to_imports_and_run_path(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 'disk'\n", encoding="utf-8")
    (tmp_path / "main.py").write_text("MARK = 'disk'\n", encoding="utf-8")
    code = f"""
        import runpy, sys
        sys.path.insert(0, {str(tmp_path)!r})
        from torchlint.verify.bootstrap import serve
        serve.install({{{str(tmp_path / "helper.py")!r}: "VALUE = 'memory'\\n",
                        {str(tmp_path / "main.py")!r}: "MARK = 'memory'\\n"}})
        import helper
        print(helper.VALUE, helper.__file__.endswith('helper.py'))
        print(runpy.run_path({str(tmp_path / "main.py")!r}, run_name='__mp_main__')['MARK'])
    """
    done = _python(code, REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["memory", "True", "memory"]
    assert (tmp_path / "helper.py").read_text(encoding="utf-8") == "VALUE = 'disk'\n"


def test_the_sitecustomize_hands_over_to_the_environments_own(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n", encoding="utf-8")
    path = os.pathsep.join([str(SITE), str(tmp_path)])
    done = _python(
        "import os, sys; print(os.environ.get('CHAINED'), any('bootstrap' in p for p in sys.path))",
        tmp_path,
        {"PYTHONPATH": path},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["yes", "False"]


def test_process_group_members_are_read_from_proc():
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert process_group_members(sleeper.pid) == [sleeper.pid]
    finally:
        sleeper.kill()
        sleeper.wait()
    deadline = time.monotonic() + 5
    while process_group_members(sleeper.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_group_members(sleeper.pid) == []


def test_the_parent_process_never_imports_torch():
    done = _python(
        """
        import sys
        import torchlint.cli, torchlint.api
        from torchlint.verify import compare, patches, report, runner, verifier
        patches.plan(__import__('pathlib').Path('fixtures/loader_bound/train.py'), select=('TL2',), each=True)
        print('torch' in sys.modules)
        """,
        REPO,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchlint", "verify", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_missing_script_is_a_usage_error():
    done = _cli("nosuch.py")
    assert done.returncode == 2
    assert "nosuch.py: no such file" in done.stderr


def test_an_unknown_rule_code_is_a_usage_error_before_anything_runs():
    done = _cli("fixtures/verify_tiny/train.py", "--select", "TL999")
    assert done.returncode == 2
    assert "TL999" in done.stderr and "[1/" not in done.stderr


def test_script_arguments_without_a_double_dash_are_refused():
    done = _cli("fixtures/verify_tiny/train.py", "--epochs", "1")
    assert done.returncode == 2 and "--epochs" in done.stderr


def test_the_modules_the_script_imports_are_patched_and_other_files_are_not(tmp_path):
    (tmp_path / "train.py").write_text("from pkg import engine\nimport helper\n", encoding="utf-8")
    (tmp_path / "helper.py").write_text("from .nothing import x\n", encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "engine.py").write_text("from . import losses\nimport torch\n", encoding="utf-8")
    (tmp_path / "pkg" / "losses.py").write_text("", encoding="utf-8")
    (tmp_path / "other.py").write_text("import torch\n", encoding="utf-8")
    found = {
        p.relative_to(tmp_path.resolve()).as_posix()
        for p in patches.project_files(tmp_path.resolve() / "train.py")
    }
    assert found == {"train.py", "helper.py", "pkg/__init__.py", "pkg/engine.py", "pkg/losses.py"}


def test_a_package_at_the_project_root_or_on_pythonpath_is_patched_for_a_script_in_a_subfolder(tmp_path):
    root = tmp_path.resolve()
    files = {
        "pyproject.toml": "",
        "projects/adder/adder.py": "import sys\nfrom mingpt.model import GPT\nimport extra\nimport vendored\n",
        "mingpt/__init__.py": "",
        "mingpt/model.py": "from mingpt.utils import CfgNode\n",
        "mingpt/utils.py": "",
        "libs/extra.py": "",
        "venv/lib/python3.11/site-packages/vendored.py": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    pythonpath = os.pathsep.join([str(root / "libs"), str(root / "venv/lib/python3.11/site-packages")])
    found = {
        p.relative_to(root).as_posix()
        for p in patches.project_files(root / "projects/adder/adder.py", pythonpath=pythonpath)
    }
    assert found == {
        "projects/adder/adder.py",
        "mingpt/__init__.py",
        "mingpt/model.py",
        "mingpt/utils.py",
        "libs/extra.py",
    }


def test_a_fix_in_an_imported_module_is_patched_there():
    folder = FIXTURES / "two_module"
    planned = patches.plan(folder / "train.py", select=("TL303", "TL304"))
    patched = {Path(p).name for p in planned.variants[-1].patched}
    assert patched == {"engine.py", "train.py"}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_shows_the_run_its_step_and_the_time_on_a_terminal(monkeypatch):
    from torchlint.verify.report import ProgressDisplay
    from torchlint.verify.runner import RunResult

    monkeypatch.setenv("TERM", "xterm")
    stream = _Terminal()
    display = ProgressDisplay(stream)
    update = display.start("TL201 train.py:12", 1, 4)
    assert update is not None
    update(7, 25, 3.25)
    display.end(RunResult("TL201 train.py:12", 1, "stopped", {"steps": [{}] * 25}, 0, 9.5, Path("log")))
    text = stream.getvalue()
    assert "[2/4] TL201 train.py:12: step 7/25, 3.2 s" in text
    assert text.endswith("TL201 train.py:12: stopped, 25 steps in 9.5 s\n")


def test_without_a_terminal_each_run_gets_a_plain_line():
    from torchlint.verify.report import ProgressDisplay

    stream = io.StringIO()
    assert ProgressDisplay(stream).start("original", 0, 2) is None
    assert stream.getvalue() == "[1/2] original: running\n"


def test_a_slowdown_in_one_run_each_is_inconclusive_only_on_a_machine_already_busy():
    from torchlint.verify.verifier import ArmResult, VerifyOptions, VerifyReport, _decide

    def decide(load: float) -> tuple[str, int]:
        original = ArmResult(patches.Variant("original", "original"), stats=[_stats([0.05] * 6)])
        fixed = ArmResult(patches.Variant("all", "all"), stats=[_stats([0.1] * 6)])
        report = VerifyReport(VerifyOptions(Path("x.py")), 1, 2, [original, fixed], [], [])
        report.load_before = (load, load, load)
        _decide(report)
        return fixed.verdict, report.exit_code

    assert decide(5.0) == ("inconclusive", 0)
    assert decide(0.5) == ("slower", 1)


def _fix(code: str, applicability: str = "unsafe") -> patches.AppliedFix:
    return patches.AppliedFix(code, "name", "title", applicability, "/x/model.py", 3, 1)


def _decided(fix: patches.AppliedFix, working_before: int, working_after: int) -> tuple[str, int, str]:
    from torchlint.verify.verifier import ArmResult, VerifyOptions, VerifyReport, _decide

    before, after = _stats([0.05] * 6), _stats([0.1] * 6)
    before.working_peak, after.working_peak = working_before, working_after
    original = ArmResult(patches.Variant("original", "original"), stats=[before])
    fixed = ArmResult(patches.Variant("all", "all", [fix]), stats=[after])
    report = VerifyReport(VerifyOptions(Path("x.py")), 1, 2, [original, fixed], [], [])
    _decide(report)
    assert fixed.losses is not None
    return fixed.verdict, report.exit_code, fixed.losses.tolerance.split(":")[0]


def test_checkpointing_that_saves_step_memory_is_judged_on_memory_not_on_its_time():
    assert _decided(_fix("TL401"), 14 * 2**20, 4 * 2**20) == ("less memory", 0, "tight")


def test_checkpointing_that_saves_no_memory_and_costs_time_is_worse():
    assert _decided(_fix("TL401"), 14 * 2**20, 14 * 2**20) == ("slower", 1, "tight")


def test_checkpointing_whose_step_memory_was_not_measured_is_inconclusive_not_worse():
    assert _decided(_fix("TL401"), 14 * 2**20, 0) == ("inconclusive", 0, "tight")


def test_a_fix_that_is_not_checkpointing_is_judged_on_its_time_whatever_the_memory():
    assert _decided(_fix("TL201"), 14 * 2**20, 4 * 2**20) == ("slower", 1, "loose")


def test_working_memory_changes_within_ten_percent_are_the_same():
    def memory(before: int, after: int) -> compare.Memory:
        a, b = _stats([0.05] * 6), _stats([0.05] * 6)
        a.working_peak, b.working_peak = before, after
        return compare.compare_memory([a], [b])

    assert memory(100, 95) == compare.Memory(0.95, "same")
    assert memory(100, 50).verdict == "less"
    assert memory(100, 120).verdict == "more"
    assert memory(100, 0).verdict == "unknown"


def test_working_memory_is_the_peak_of_what_the_profiled_steps_allocated_net_of_frees(monkeypatch):
    from types import SimpleNamespace

    hooks = pytest.importorskip("torchlint.verify.bootstrap.hooks")

    def event(start: int, nbytes: int, device: str = "DeviceType.CPU", name: str = "[memory]"):
        return SimpleNamespace(
            name=lambda: name, start_ns=lambda: start, nbytes=lambda: nbytes, device_type=lambda: device
        )

    events = [
        event(3, -300),  # the forward's activations freed by backward
        event(1, 100),
        event(2, 300),
        event(4, 50),
        event(5, 7, name="aten::mm"),  # not a memory record
        event(2, 1000, device="DeviceType.CUDA"),
    ]
    profiler = SimpleNamespace(
        profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events))
    )
    assert hooks.working_memory(profiler) == {"cpu_peak_bytes": 400, "cuda_peak_bytes": 1000}
    assert hooks.working_memory(SimpleNamespace()) is None


def test_an_idle_gpu_points_at_compiling_unless_the_run_waits_for_data():
    raw = {"memory": {}, "profile": {"wall_seconds": 0.1, "device_busy_ms": 2.0, "device_kernels": 3,
                                     "tensor_core_kernels": 1}}  # fmt: skip
    stats = _stats([0.1] * 3, device="cuda")
    stats.data_wait_share = 0.0
    idle = compare.runtime_findings(raw, stats, lambda f, line: [])
    assert [(f.kind, f.message, f.codes) for f in idle] == [
        ("utilisation", "the GPU is busy 2% of profiled time", ["TL101"])
    ]
    stats.data_wait_share = 0.9
    waiting = compare.runtime_findings(raw, stats, lambda f, line: [])
    assert [(f.kind, f.codes) for f in waiting] == [
        ("data-wait", ["TL201", "TL203", "TL202"]),
        ("utilisation", ["TL2"]),
    ]


def test_a_gpu_with_tensor_cores_that_ran_none_points_at_autocast():
    raw = {"memory": {}, "device": {"type": "cuda", "capability": [9, 0]},
           "profile": {"wall_seconds": 0.1, "device_busy_ms": 90.0, "device_kernels": 5, "tensor_core_kernels": 0}}  # fmt: skip
    stats = _stats([0.1] * 3, device="cuda")
    stats.data_wait_share = 0.0
    found = compare.runtime_findings(raw, stats, lambda f, line: [])
    assert [(f.kind, f.codes) for f in found] == [("tensor-cores", ["TL301"])]


@pytest.mark.parametrize(
    ("kernel", "tensor_cores"),
    [
        # float32 without TF32 on an H200: cuBLAS's xmma GEMM multiplies with FFMA, CUTLASS's with SIMT.
        (
            "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
            False,
        ),  # noqa: E501
        (
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)",
            False,
        ),  # noqa: E501
        (
            "void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*, float const*, float const*, int)",
            False,
        ),
        # bfloat16 under autocast (the compiled fixture's GEMM on the same H200)
        (
            "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_64x64_nn_align1>(cutlass_75_tensorop_bf16_s1688gemm_bf16_64x64_nn_align1::Params)",
            True,
        ),  # noqa: E501
        ("triton_poi_fused__to_copy_2", False),
        # eager bfloat16 / float16 linears and convolutions, float32 with TF32, on the same H200 (CUDA 13)
        ("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", True),
        ("nvjet_sm90_hsh_64x8_64x16_1x4_h_bz_bias_TNT", True),
        (
            "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize256x64x32_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
            True,
        ),  # noqa: E501
        (
            "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize64x64x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
            True,
        ),  # noqa: E501
        (
            "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize128x32x8_stage3_warpsize2x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
            False,
        ),  # noqa: E501
        (
            "void cudnn::winograd_nonfused::winogradWgradData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)",
            False,
        ),  # noqa: E501
    ],
)
def test_tensor_core_kernels_are_told_by_their_names(kernel, tensor_cores):
    hooks = pytest.importorskip("torchlint.verify.bootstrap.hooks")
    assert hooks._tensor_core_kernel(kernel) is tensor_cores


def test_on_a_gpu_the_top_operators_are_ranked_by_gpu_time_with_short_kernel_names():
    from torchlint.verify import report

    kernel = (
        "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
        "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
        "unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float> >)"
    )
    ops = [
        {"name": "Optimizer.step#SGD.step", "self_cpu_ms": 0.012, "self_device_ms": 0.4, "count": 3},
        {"name": kernel, "self_cpu_ms": 0.0, "self_device_ms": 0.25, "count": 3},
    ]
    out = io.StringIO()
    report._write_top_ops(
        {"device": "cuda", "variants": [{"name": "original", "kind": "original", "top_ops": ops}]}, out
    )
    assert out.getvalue().splitlines() == [
        "",
        "top operators by GPU self time (original, profiled steps):",
        "     0.400 ms GPU     0.012 ms CPU  x3     Optimizer.step#SGD.step",
        "     0.250 ms GPU       0.0 ms CPU  x3     at::native::reduce_kernel<…>",
    ]


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("aten::addmm", "aten::addmm"),
        ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
        (
            "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, float)",
            "cudnn::bn_bw_1C11_kernel_new<…>",
        ),  # noqa: E501
        (
            "std::enable_if<true, void>::type internal::gemvx::kernel<int, int, float, 6, false>(int)",
            "internal::gemvx::kernel<…>",
        ),  # noqa: E501
        (
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)",
            "cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>",
        ),  # noqa: E501
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*)",
            "at::native::cunn_SoftMaxForward<…>",
        ),  # noqa: E501
        ("x" * 120, "x" * 89 + "…"),
    ],
)
def test_cuda_kernel_signatures_are_shortened_for_the_table(name, short):
    from torchlint.verify.report import short_operator_name

    assert short_operator_name(name) == short


def test_a_library_on_pythonpath_outside_the_project_is_never_patched_nor_linted(tmp_path):
    """Issue 30: `PYTHONPATH` pointing at a library checkout beside the project made verify lint 394 of its
    files and patch one. What resolves outside the project's folder is not the user's."""
    root = (tmp_path / "project").resolve()
    library = (tmp_path / "library").resolve()
    for path, text in {
        root / "pyproject.toml": "",
        root / "train.py": "import helpers\nimport biglib\n",
        root / "helpers.py": "",
        library / "biglib" / "__init__.py": "from biglib import core\n",
        library / "biglib" / "core.py": "",
    }.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    found = {p.name for p in patches.project_files(root / "train.py", pythonpath=str(library))}
    assert found == {"train.py", "helpers.py"}
