"""TL303/TL304: every import form, every kind of use, arguments that keep their meaning, imports that go."""

from __future__ import annotations

import textwrap

import pytest
from support import codes_and_lines, fix, lint


def fixed(source: str, **kwargs) -> str:
    return fix(source, **kwargs)


@pytest.mark.parametrize(
    "imports, use",
    [
        ("import torch", "torch.cuda.amp.autocast()"),
        ("import torch as T", "T.cuda.amp.autocast()"),
        ("import torch.cuda.amp", "torch.cuda.amp.autocast()"),
        ("import torch.cuda.amp as amp", "amp.autocast()"),
        ("from torch.cuda import amp", "amp.autocast()"),
        ("from torch import cuda", "cuda.amp.autocast()"),
        ("from torch.cuda.amp import autocast", "autocast()"),
        ("from torch.cuda.amp import autocast as ac", "ac()"),
        ("from torch.cuda.amp.autocast_mode import autocast", "autocast()"),
    ],
)
def test_autocast_is_found_however_it_was_imported(imports, use):
    source = f"{imports}\n\nwith {use}:\n    pass\n"
    assert codes_and_lines(source) == [("TL303", 3)]


def test_finding_is_on_each_use_never_on_the_import():
    source = """\
    from torch.cuda.amp import autocast, GradScaler

    scaler = GradScaler()
    with autocast():
        pass
    with autocast(enabled=False):
        pass
    """
    assert codes_and_lines(source) == [("TL304", 3), ("TL303", 4), ("TL303", 6)]


def test_finding_spans_the_callee_and_starts_where_the_call_starts():
    [d] = lint("import torch\nscaler = torch.cuda.amp.GradScaler(\n    enabled=True,\n)\n")
    assert (d.location.line, d.location.column) == (2, 10)
    assert (d.end_location.line, d.end_location.column) == (2, 35)
    assert d.message == (
        '`torch.cuda.amp.GradScaler` is deprecated since torch 2.4: use `torch.amp.GradScaler("cuda", ...)`'
    )


def test_new_api_and_lookalikes_are_not_flagged():
    source = """\
    import torch
    from torch.amp import autocast, GradScaler
    from apex import amp

    with torch.autocast("cuda"), torch.amp.autocast("cuda"), autocast("cpu"):
        pass
    scaler = GradScaler("cuda")
    model, opt = amp.initialize(model, opt)
    my.cuda.amp.autocast()
    """
    assert codes_and_lines(source) == []


def test_a_local_name_shadowing_the_import_is_not_flagged():
    source = """\
    from torch.cuda.amp import autocast

    def run(autocast):
        with autocast():
            pass

    def other():
        autocast = make_context()
        with autocast():
            pass
    """
    assert codes_and_lines(source) == []


def test_imports_inside_functions_and_guarded_imports_are_resolved():
    source = """\
    try:
        from torch.cuda.amp import GradScaler
    except ImportError:
        GradScaler = None

    def main():
        from torch.cuda.amp import autocast
        with autocast():
            return GradScaler()
    """
    assert codes_and_lines(source) == [("TL303", 8), ("TL304", 9)]


def test_conflicting_imports_of_one_name_are_unknown_and_not_flagged():
    source = """\
    try:
        from torch.amp import autocast
    except ImportError:
        from torch.cuda.amp import autocast

    with autocast("cuda"):
        pass
    """
    assert codes_and_lines(source) == []


def test_positional_autocast_arguments_become_keywords():
    source = """\
    import torch
    with torch.cuda.amp.autocast(True, torch.float16, False):
        pass
    """
    assert fixed(source) == textwrap.dedent(
        """\
        import torch
        with torch.amp.autocast("cuda", enabled=True, dtype=torch.float16, cache_enabled=False):
            pass
        """
    )


def test_autocast_with_star_args_is_reported_without_a_fix():
    [d] = lint("import torch\nwith torch.cuda.amp.autocast(*flags):\n    pass\n")
    assert d.fix is None
    assert "`*args` cannot be mapped" in d.message


def test_autocast_with_double_star_kwargs_keeps_them():
    source = "import torch\nwith torch.cuda.amp.autocast(**amp_kwargs):\n    pass\n"
    assert fixed(source) == 'import torch\nwith torch.amp.autocast("cuda", **amp_kwargs):\n    pass\n'


def test_grad_scaler_positional_arguments_stay_aligned():
    source = "import torch\ns = torch.cuda.amp.GradScaler(1024.0, 2.0, *rest, enabled=on)\n"
    assert fixed(source) == 'import torch\ns = torch.amp.GradScaler("cuda", 1024.0, 2.0, *rest, enabled=on)\n'


def test_cpu_variants_get_the_cpu_device():
    source = "import torch\ns = torch.cpu.amp.GradScaler()\nwith torch.cpu.amp.autocast():\n    pass\n"
    assert fixed(source) == (
        'import torch\ns = torch.amp.GradScaler("cpu")\nwith torch.amp.autocast("cpu"):\n    pass\n'
    )


def test_custom_fwd_and_bwd_get_device_type_called_or_bare():
    source = """\
    from torch.cuda.amp import custom_fwd, custom_bwd
    import torch

    class F(torch.autograd.Function):
        @staticmethod
        @custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            return x

        @staticmethod
        @custom_bwd
        def backward(ctx, g):
            return g
    """
    assert fixed(source) == textwrap.dedent(
        """\
        import torch

        class F(torch.autograd.Function):
            @staticmethod
            @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
            def forward(ctx, x):
                return x

            @staticmethod
            @torch.amp.custom_bwd(device_type="cuda")
            def backward(ctx, g):
                return g
        """
    )


def test_name_import_is_rewritten_qualified_adding_import_torch():
    source = """\
    \"\"\"Train.\"\"\"
    import os
    from torch.cuda.amp import GradScaler

    scaler = GradScaler(enabled=os.environ.get("AMP") == "1")
    """
    assert fixed(source) == textwrap.dedent(
        """\
        \"\"\"Train.\"\"\"
        import os
        import torch

        scaler = torch.amp.GradScaler("cuda", enabled=os.environ.get("AMP") == "1")
        """
    )


def test_existing_torch_alias_is_reused():
    source = "import torch as T\nfrom torch.cuda.amp import autocast\nwith autocast():\n    pass\n"
    assert fixed(source) == 'import torch as T\nwith T.amp.autocast("cuda"):\n    pass\n'


def test_import_shared_with_other_names_keeps_them():
    source = "import torch\nfrom torch.cuda.amp import autocast, common\nwith autocast():\n    common.x()\n"
    assert fixed(source) == (
        'import torch\nfrom torch.cuda.amp import common\nwith torch.amp.autocast("cuda"):\n    common.x()\n'
    )


def test_both_names_of_one_import_line_go_together():
    source = """\
    import torch
    from torch.cuda.amp import (
        autocast,
        GradScaler,
    )
    s = GradScaler()
    with autocast():
        pass
    """
    assert (
        fixed(source)
        == 'import torch\ns = torch.amp.GradScaler("cuda")\nwith torch.amp.autocast("cuda"):\n    pass\n'
    )


def test_a_noqa_use_keeps_the_import():
    source = """\
    import torch
    from torch.cuda.amp import autocast
    with autocast():  # noqa: TL303
        pass
    with autocast():
        pass
    """
    assert fixed(source) == textwrap.dedent(
        """\
        import torch
        from torch.cuda.amp import autocast
        with autocast():  # noqa: TL303
            pass
        with torch.amp.autocast("cuda"):
            pass
        """
    )


def test_an_unfixable_use_keeps_the_import():
    source = "import torch\nfrom torch.cuda.amp import autocast\nctx = autocast\nwith autocast():\n    pass\n"
    assert fixed(source) == (
        'import torch\nfrom torch.cuda.amp import autocast\nctx = autocast\nwith torch.amp.autocast("cuda"):\n    pass\n'
    )
    [bare, _] = lint(source)
    assert bare.fix is None and "referenced, not called" in bare.message


def test_annotation_becomes_the_base_class():
    source = "import torch\ndef f(s: torch.cuda.amp.GradScaler) -> None:\n    pass\n"
    assert fixed(source) == "import torch\ndef f(s: torch.amp.GradScaler) -> None:\n    pass\n"


def test_multiline_call_inside_a_block_keeps_its_layout_and_comments():
    source = """\
    import torch

    def main():
        scaler = torch.cuda.amp.GradScaler(  # keep me
            init_scale=2.0**14,
            enabled=True,
        )
    """
    assert fixed(source) == textwrap.dedent(
        """\
        import torch

        def main():
            scaler = torch.amp.GradScaler(  # keep me
                "cuda",
                init_scale=2.0**14,
                enabled=True,
            )
        """
    )


def test_torch_version_setting_silences_rules_whose_replacement_is_newer():
    source = "import torch\ns = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    pass\n"
    assert codes_and_lines(source, torch_version=(2, 2)) == [("TL303", 3)]
    assert codes_and_lines(source, torch_version=(2, 3)) == [("TL304", 2), ("TL303", 3)]
    assert codes_and_lines(source, torch_version=(1, 13)) == []


def test_a_second_fix_run_changes_nothing():
    source = (
        "from torch.cuda.amp import autocast, GradScaler\ns = GradScaler()\nwith autocast(True):\n    pass\n"
    )
    once = fixed(source)
    assert (
        once
        == 'import torch\ns = torch.amp.GradScaler("cuda")\nwith torch.amp.autocast("cuda", enabled=True):\n    pass\n'
    )
    assert fixed(once) == once
