"""`torchlint lsp`: the Language Server (pygls over stdio).

Only `torchlint.cli` imports this package, and only inside the `lsp` command, so that the linter, the
other commands and a pre-commit run never pay for pygls (an import contract in pyproject.toml keeps it so).
The modules:

- `documents`: the open buffers (a notebook's is its Python cells joined), and the file system that
  answers their unsaved text for their paths;
- `checker`: one buffer through the linter, with the workspace's settings, cached per document version;
- `convert`: torchlint's offsets -> LSP positions (UTF-16 by default), diagnostics, minimal text edits;
- `views`: where a checked text's offsets land: one text document, or a notebook's cell documents;
- `actions`: quick fixes, fix-all and "disable for this line", as LSP code actions;
- `worker`: the one thread the checks run on, off the event loop;
- `server`: the pygls wiring (notifications, debouncing, hover, the lifecycle, error handling).
"""

from __future__ import annotations

import sys


def serve() -> None:
    """Run the server over stdin/stdout until the client's `exit` or stdin closes; exit with `exit`'s code
    (1 when no `shutdown` came first, as LSP says)."""
    from torchlint.lsp.server import build_server

    server = build_server()
    server.start_io()
    if server.protocol.exit_code:
        sys.exit(server.protocol.exit_code)
