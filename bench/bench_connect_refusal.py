"""How long `observatory live --connect` takes to give up, whole process, for each way a
connection is refused: a wrong token (a real `observatory serve`), a closed port, an HTTP
server, and a peer that accepts and says nothing. Prints the median of N runs and the exit
status and the line each one printed. The target (issue 22): non-zero within 5 s, one line.

    python bench/bench_connect_refusal.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_tui_live_states import Peer, closed_port  # noqa: E402  (a test helper, reused)


def attempt(address: str, token_file: Path) -> tuple[float, int, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "tui.cli", "live", "--connect", address,
                           "--token-file", str(token_file)], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60)
    took = time.monotonic() - start
    lines = [line for line in done.stderr.splitlines() if line.startswith("observatory:")]
    return took, done.returncode, lines[-1] if lines else done.stderr[-200:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    token_file = tmp / "wrong-token"
    token_file.write_text("not-the-token\n")
    from test_service_remote import Serve

    serve = Serve(tmp)  # writes its own token to tmp/token
    cases = {"wrong token (serve)": lambda: (serve.address, None),
             "closed port": lambda: (closed_port(), None),
             "http server": lambda: (lambda p: (p.address, p))(
                 Peer(b"HTTP/1.0 400 Bad Request\r\n\r\n")),
             "silent peer": lambda: (lambda p: (p.address, p))(Peer(None))}
    try:
        for name, make in cases.items():
            times, last = [], None
            for _ in range(args.runs):
                address, peer = make()
                try:
                    took, code, line = attempt(address, token_file)
                finally:
                    if peer is not None:
                        peer.close()
                times.append(took)
                last = (code, line)
            print(f"{name:22s} median {statistics.median(times):5.2f} s  max {max(times):5.2f} s"
                  f"  exit {last[0]}  {last[1]}")
    finally:
        serve.stop()


if __name__ == "__main__":
    main()
