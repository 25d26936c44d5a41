"""How long an editor waits for squiggles: `textDocument/didOpen` -> `publishDiagnostics`, and
`didChange` -> `publishDiagnostics`, on a generated 1,000-line training script; `ruff server` side by side
in the same run when ruff is installed next to this Python (or on PATH).

Run: .venv/bin/python bench/lsp_latency.py [--runs 15] [--lines 1000] [--file ROOT:FILE ...]
Prints the median (and min/max) in ms per server and event; the target for torchlint is under 100 ms.
With --file, a real file of an extracted project instead (torchlint only): its first open, then each
one-line edit to its diagnostics, where the other files its questions reach weigh, and issue 29's targets
(met or not): the first diagnostics after didOpen under 300 ms, each edit's under 100 ms. Where a file's
questions reach other files the server publishes twice (what the file alone shows, then the full check's):
both are timed, the full check's end by a hover request, which the server answers after it. Not a
test.

Both servers are driven by the same small JSON-RPC client over stdio. Each open is of a fresh URI with a
text none of whose statements was seen before (the run number is in every class docstring), so neither the
per-version cache nor the per-statement parse cache answers it; each change edits one docstring in the
middle of the file as a new version (then only that statement is parsed again). The
change is measured with torchlint's debounce off (`debounceMs: 0`), i.e. the server's own work: in an
editor the server adds its 200 ms pause on top by design, once per pause in typing (ruff does not
debounce). A warm-up open comes first (imports, LibCST's first parse); it is not counted.
"""

from __future__ import annotations

import argparse
import json
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BLOCK = '''

class Block{i}(nn.Module):
    """Residual block {i}{salt}."""

    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        h = self.norm(x)
        h = torch.relu(self.fc1(h))
        return x + self.fc2(h)


def evaluate_{i}(model, dataset, device):
    loader = DataLoader(dataset, batch_size=256)
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            total += nn.functional.mse_loss(model(x), y).item()
    return total / max(1, len(loader))
'''

HEAD = '''"""A generated training script for bench/lsp_latency.py."""

import argparse
import os  # unused: one finding for ruff too, so that both servers are seen to publish something

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
'''

MAIN = """

def train(args):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(*[Block0(args.width) for _ in range(args.depth)]).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = torch.cuda.amp.GradScaler()
    dataset = TensorDataset(torch.randn(4096, args.width), torch.randn(4096, args.width))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    for epoch in range(args.epochs):
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            with torch.cuda.amp.autocast():
                loss = nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        print(epoch, evaluate_0(model, dataset, device))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    train(parser.parse_args())
"""


def training_script(lines: int, salt: str = "") -> str:
    """About `lines` lines; `salt` goes into every block, so that no statement was seen before."""
    blocks = []
    i = 0
    while len((HEAD + "".join(blocks) + MAIN).splitlines()) < lines:
        blocks.append(BLOCK.format(i=i, salt=salt))
        i += 1
    return HEAD + "".join(blocks) + MAIN


class Client:
    """A minimal LSP client over a server's stdio: frames out, a reader thread parsing frames in."""

    def __init__(self, command: list[str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.messages: queue.Queue = queue.Queue()
        self.last: dict[str, dict] = {}  # the last publishDiagnostics of each document
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            message = json.loads(stream.read(length))
            if message.get("method") == "textDocument/publishDiagnostics":
                self.last[message["params"]["uri"]] = message
            self.messages.put(message)

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.process.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.wait(lambda m: m.get("id") == self.next_id and "method" not in m)

    def wait(self, matches, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            message = self.messages.get(timeout=max(0.01, deadline - time.monotonic()))
            if "method" in message and "id" in message:  # a request from the server: answer it empty
                self.send({"id": message["id"], "result": None})
            if matches(message):
                return message

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.send({"method": "exit"})
            self.process.wait(timeout=10)
        except Exception:  # noqa: BLE001 - a benchmark's teardown
            self.process.kill()


def started(command: list[str], root: Path, options: dict) -> Client:
    """A server on `root`, initialized."""
    client = Client(command, root)
    client.request(
        "initialize",
        {
            "processId": None,
            "rootUri": root.as_uri(),
            "capabilities": {"textDocument": {"publishDiagnostics": {"versionSupport": True}}},
            "initializationOptions": options,
        },
    )
    client.send({"method": "initialized", "params": {}})
    return client


def published(uri: str, version: int | None = None):
    def matches(message: dict) -> bool:
        if message.get("method") != "textDocument/publishDiagnostics" or message["params"]["uri"] != uri:
            return False
        return version is None or message["params"].get("version") in (version, None)

    return matches


def measure(command: list[str], folder: Path, lines: int, runs: int, options: dict) -> dict[str, list[float]]:
    client = started(command, folder, options)
    times: dict[str, list[float]] = {"didOpen": [], "open full": [], "didChange": [], "change full": []}
    for run in range(runs + 1):  # run 0 warms up
        uri = (folder / f"train_{run}.py").as_uri()
        text = training_script(lines, salt=f" (run {run})")
        start = time.perf_counter()
        client.send(
            {
                "method": "textDocument/didOpen",
                "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
            }
        )
        client.wait(published(uri))
        opened = time.perf_counter() - start
        settle(client, uri)
        opened_full = time.perf_counter() - start
        findings = len(client.last[uri]["params"]["diagnostics"])
        middle = text.count("class Block") // 2  # one keystroke's worth, in the middle of the file
        changed_text = text.replace(f"Residual block {middle} (", f"Residual block {middle}, edited (")
        start = time.perf_counter()
        client.send(
            {
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": uri, "version": 2},
                    "contentChanges": [{"text": changed_text}],
                },
            }
        )
        client.wait(published(uri, 2))
        changed = time.perf_counter() - start
        settle(client, uri)
        changed_full = time.perf_counter() - start
        client.send({"method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
        if run:
            for event, seconds in (
                ("didOpen", opened),
                ("open full", opened_full),
                ("didChange", changed),
                ("change full", changed_full),
            ):
                times[event].append(seconds * 1000)
            times.setdefault("findings", []).append(findings)
    client.close()
    return times


def settle(client: Client, uri: str) -> None:
    """Returns once the check of the document's last published version has ended: the server may publish
    a first look before its full check, and answers a hover only after that check."""
    client.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}
    )


def measure_file(
    command: list[str], root: Path, file: Path, runs: int, options: dict, running: bool = False
) -> tuple[list, list]:
    """A real file in its project: the first open (everything the file's questions reach is parsed), then
    `runs` edits of it (a comment line appended). Each as (ms to the first publish, ms to the full check's
    diagnostics): the server publishes what the file alone shows first, when its questions reach others.
    `running`: the server has checked another document before (an untitled one), so the open does not
    wait for its start-up (imports, LibCST's first parse), which an editor pays once per session."""
    client = started(command, root, options)
    if running:
        warm = "untitled:warm-up"
        document = {"uri": warm, "languageId": "python", "version": 1, "text": "import torch\n"}
        client.send({"method": "textDocument/didOpen", "params": {"textDocument": document}})
        client.wait(published(warm))
        settle(client, warm)
    uri, text = file.as_uri(), file.read_text()
    start = time.perf_counter()
    document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    client.send({"method": "textDocument/didOpen", "params": {"textDocument": document}})
    client.wait(published(uri))
    first = time.perf_counter() - start
    settle(client, uri)
    opened = [first * 1000, (time.perf_counter() - start) * 1000]
    changes = []
    for version in range(2, runs + 2):
        start = time.perf_counter()
        change = {"text": f"{text}\n# edit {version}\n"}
        params = {"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}
        client.send({"method": "textDocument/didChange", "params": params})
        client.wait(published(uri, version))
        first = time.perf_counter() - start
        settle(client, uri)
        changes.append([first * 1000, (time.perf_counter() - start) * 1000])
    client.close()
    return opened, changes


TORCHLINT_LSP = [sys.executable, "-m", "torchlint", "lsp"]
# Issue 29's targets for a real file of a real project (yolov5's models/common.py and train.py).
OPEN_TARGET_MS = 300
EDIT_TARGET_MS = 100


def ruff_command() -> list[str] | None:
    local = Path(sys.executable).parent / "ruff"
    found = str(local) if local.exists() else shutil.which("ruff")
    return [found, "server"] if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="ROOT:FILE",
        help="a real file (FILE, relative to its project ROOT) to open and edit instead (once or more)",
    )
    args = parser.parse_args()
    if args.file:
        for item in args.file:
            root, _, name = item.partition(":")
            where = (TORCHLINT_LSP, Path(root).resolve(), Path(root, name).resolve())
            opened, changes = measure_file(*where, args.runs, {"debounceMs": 0})
            running, _ = measure_file(*where, 0, {"debounceMs": 0}, running=True)
            firsts, fulls = [c[0] for c in changes], [c[1] for c in changes]
            median, full_median = statistics.median(firsts), statistics.median(fulls)
            print(
                f"torchlint lsp  {name}: didOpen first {opened[0]:.0f} ms, full {opened[1]:.0f} ms"
                f" (in a running server: first {running[0]:.0f} ms, full {running[1]:.0f} ms);"
                f" didChange first median {median:.0f} ms (min {min(firsts):.0f}, max {max(firsts):.0f}),"
                f" full median {full_median:.0f} ms (min {min(fulls):.0f}) over {args.runs} edits"
            )
            for label, value, limit in (
                ("first diagnostics after didOpen, fresh server", opened[0], OPEN_TARGET_MS),
                ("first diagnostics after didOpen, running server", running[0], OPEN_TARGET_MS),
                ("first diagnostics after an edit (median)", median, EDIT_TARGET_MS),
                ("every diagnostic after didOpen, fresh server", opened[1], OPEN_TARGET_MS),
                ("every diagnostic after an edit (median)", full_median, EDIT_TARGET_MS),
            ):
                met = "met" if value < limit else "NOT MET"
                print(f"  target: {label} < {limit} ms: {value:.0f} ms: {met}")
        return
    text = training_script(args.lines, salt=" (run 0)")
    servers = [("torchlint lsp", TORCHLINT_LSP, {"debounceMs": 0})]
    ruff = ruff_command()
    if ruff is None:
        print("ruff is not installed here: measuring torchlint only")
    else:
        servers.append(("ruff server", ruff, {}))
    print(f"{len(text.splitlines())}-line training script, {args.runs} runs each (after one warm-up)")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
        for name, command, options in servers:
            times = measure(command, root, args.lines, args.runs, options)
            findings = times.pop("findings")
            for event, values in times.items():
                print(
                    f"{name:14} {event:11} median {statistics.median(values):7.1f} ms"
                    f"  (min {min(values):.1f}, max {max(values):.1f})  {findings[0]} diagnostics"
                )


if __name__ == "__main__":
    main()
