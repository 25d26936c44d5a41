"""`torchlint verify`: run a training script before and after its fixes and measure what changed.

The parent process (the CLI) never imports torch: it computes the patched sources with the linter
(`patches`), starts one subprocess per run (`runner`), and compares what the runs report (`compare`,
`report`). Everything that runs inside the user's process lives in `bootstrap/` and imports only the
standard library and torch. The JSON report's schema is documented in `SCHEMA.md` next to this file.
"""
