"""What one file may cost to analyse, decided before any parser sees it.

Analysing a file costs memory in proportion to its text: LibCST's tree, the facts and CPython's own parse
take up to about 1,200 bytes per byte of source on code-shaped text (measured: 2.2 GB for 2 MB of
functions, 0.95 GB for 2 MB of list literals). Files that size are generated (embedded weights, tables),
not training code, and one of them would take a CI runner or a laptop down with it; under a memory limit
(`ulimit -v`, RLIMIT_AS) LibCST's native parser aborts the whole process instead of raising. So a file
over the budget is never parsed: the run reports it as not analysed (TL002, never a pass) and goes on.
"""

from __future__ import annotations

MEMORY_BUDGET = 3 * 1024**3 // 2  # 1.5 GiB for one file's analysis
FULL_COST = 1200  # bytes of memory per byte of source, worst measured: LibCST, facts and CPython's parse
SYNTAX_COST = 180  # the same for CPython's parse alone (a file no enabled rule could fire on)


def over_budget(size: int, full: bool = True) -> str | None:
    """Why a file of `size` bytes (or characters) must not be parsed here, or None when it may be. `full`:
    the file goes through LibCST and the facts, not only through CPython's syntax check."""
    need = size * (FULL_COST if full else SYNTAX_COST)
    if need > MEMORY_BUDGET:
        return (
            f"not analysed: {_megabytes(size)} of source could need {_megabytes(need)} of memory to analyse, "
            f"over the {_megabytes(MEMORY_BUDGET)} one file may take; a file that size is usually generated: "
            "exclude it"
        )
    room = _address_space_left()
    if room is not None and need > room:
        return (
            f"not analysed: {_megabytes(size)} of source could need {_megabytes(need)} of memory to analyse, "
            f"and the process's address-space limit (ulimit -v) leaves {_megabytes(room)}"
        )
    return None


def _address_space_left() -> int | None:
    """Bytes of address space this process may still map under its soft RLIMIT_AS (None: no such limit,
    or no way to tell on this platform)."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    try:
        with open("/proc/self/statm", "rb") as status:  # the first field: pages mapped now
            mapped = int(status.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return None
    return max(soft - mapped, 0)


def _megabytes(size: int) -> str:
    if size >= 1024**3:
        return f"{size / 1024**3:.1f} GiB"
    return f"{size / 1024**2:.1f} MiB"
