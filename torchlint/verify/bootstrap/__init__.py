"""What runs inside the measured process: the entry (`entry.py`, run as a script), the measuring hooks
(`hooks.py`), the patched sources served from memory (`serve.py`) and the `sitecustomize` that installs
them in every Python process the script starts (`site/`).

Only the standard library and torch are imported here (never the linter: it is not needed in the user's
process, and LibCST would slow every DataLoader worker's start).
"""

SPEC_ENV = "TORCHLINT_VERIFY_SPEC"  # the run's spec file (JSON), for every process of the run
