"""The one call-argument reader: what a call surely lacks, through a signature and `**kwargs` dicts."""

from __future__ import annotations

from support import facts_of

from torchlint.facts import Signature

CHECKPOINT = Signature(("function",), star_args=True)
SOURCE = """\
from torch.utils.checkpoint import checkpoint

def f(fn, x, kw_param):
    a = checkpoint(fn, x)
    b = checkpoint(fn, x, use_reentrant=False)
    kw = {"preserve_rng_state": True}
    c = checkpoint(fn, x, **kw)
    ok = {"use_reentrant": False}
    d = checkpoint(fn, x, **ok)
    e = checkpoint(fn, x, **kw_param)
"""


def lacking(signature: Signature) -> list[int]:
    facts = facts_of(SOURCE)
    return [
        facts.line_of(ref.call)
        for ref in facts.references_to({"torch.utils.checkpoint.checkpoint"})
        if facts.call_arguments(ref.call, ref.scope, signature).lacks("use_reentrant")
    ]


def test_an_argument_is_lacking_only_when_every_way_of_passing_it_is_known():
    # 4: extra positionals go to *args; 7: the dict is known to lack it; 10: an unknown dict may pass it.
    assert lacking(CHECKPOINT) == [4, 7]


def test_without_star_args_an_unaccounted_positional_argument_makes_the_reading_incomplete():
    assert lacking(Signature(("function",))) == []
