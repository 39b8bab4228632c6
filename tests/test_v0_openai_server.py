"""vLLM 0.6.3.post1's own OpenAI server (verl's rollout vLLM, the V0 engine) on the
observatory's sim executor and a tiny model made offline, driven by the `openai` client with
n >= 2, watched and steered (issue #19, item 6):

    observatory exec --sim --serve 127.0.0.1:PORT --token-file F --record DIR -- \\
        python -m vllm.entrypoints.openai.api_server --model DIR --host 127.0.0.1 --port P \\
        --guided-decoding-backend lm-format-enforcer

0.6.3.post1 has no command-line way to pick an executor class (`--distributed-executor-backend`
takes only ray or mp), so `exec --sim` gives its engine process the sim executor. The
guided-decoding flag is for vLLM 0.6.3 itself: it sends every request through guided decoding,
whose default backend (outlines 0.0.46) cannot load in a fresh install: it imports pyarrow
(through datasets), and the one pip resolves beside numpy<2 needs NumPy 2; pinning pyarrow<22
only moves the failure to `pyairports`, whose only PyPI release (0.0.1) has no module. Every
request would fail with a 500. lm-format-enforcer loads.

vLLM 0.6.3.post1 binds its port on every interface whatever --host says (api_server.py's
`sock.bind(("", args.port))`, its workaround for vLLM issue #8204). So the server and every
client of it run in a private network namespace that has only a loopback: the module's one outer
test re-runs this file inside `unshare -n` (root), and the real tests run there. Without root
or unshare it skips, rather than open a port on the machine's interfaces. Skips without vLLM
0.6.3.post1 (CI runs it in the vllm063 venv).
"""

from __future__ import annotations

import os
import queue
import secrets
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engine.adapters.versions import installed_version
from server_harness import Server, free_port, server_env

pytestmark = pytest.mark.skipif(installed_version() != "0.6.3.post1",
                                reason="needs vLLM 0.6.3.post1 (the vllm063 venv)")

IN_PRIVATE_NET = "OBSERVATORY_TEST_PRIVATE_NET"  # set inside the namespace by the outer test
inside = pytest.mark.skipif(os.environ.get(IN_PRIVATE_NET) != "1",
                            reason="runs inside the private network namespace (outer test)")


def _can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    return probe.returncode == 0


# the whole inner session in one test: 3 minutes on an idle 2-core machine, past pytest's
# 600-s default when the machine is shared (CI runs two lanes at once)
@pytest.mark.timeout(1800)
@pytest.mark.skipif(os.environ.get(IN_PRIVATE_NET) == "1", reason="the outer test")
@pytest.mark.skipif(not _can_unshare(),
                    reason="needs root and unshare: vLLM 0.6.3 binds every interface")
def test_in_a_private_network_namespace():
    """The tests below, inside a network namespace whose only interface is loopback."""
    here = Path(__file__)
    inner = f"ip link set lo up && exec {sys.executable} -m pytest {here} -q -p no:cacheprovider"
    env = {**os.environ, IN_PRIVATE_NET: "1"}
    result = subprocess.run(["unshare", "-n", "sh", "-c", inner], env=env, cwd=here.parents[1],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and " skipped" in result.stdout  # inner ran, outer skipped


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from engine.tiny_model import write_tiny_model

    base = tmp_path_factory.mktemp("v0server")
    model = write_tiny_model(base / "tiny").path
    token_file = base / "token"
    token_file.write_text(secrets.token_urlsafe(16) + "\n")
    port, hub = free_port(), free_port()
    srv = Server(
        [sys.executable, "-m", "engine.cli", "exec", "--sim", "--serve", f"127.0.0.1:{hub}",
         "--token-file", str(token_file), "--record", str(base / "rec"), "--",
         sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--host", "127.0.0.1", "--port", str(port),
         "--guided-decoding-backend", "lm-format-enforcer"],
        server_env(), base / "server.log")
    srv.model, srv.port, srv.hub, srv.token = model, port, hub, token_file.read_text().strip()
    try:
        yield srv.start()
    finally:
        srv.stop()


@inside
def test_openai_client_with_n_2_under_exec_and_a_policy_switched_remotely(server):
    import openai

    from engine.stream.client import connect
    from engine.stream.protocol import Ack
    from engine.stream.reader import load
    from engine.stream.records import PolicyChanged, RunFinished, StepRecord

    model = str(server.model)
    link = connect(f"127.0.0.1:{server.hub}", server.token, client="pytest")
    items: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [items.put(i) for i in link.items()], daemon=True).start()
    command_id = link.send("policy", "strict")  # applied at the engine's next step

    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="unused")
    chat = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Which group is swapped?"}],
        max_tokens=6, n=3)
    assert [c.index for c in chat.choices] == [0, 1, 2]
    assert all(c.finish_reason == "length" and c.message.content for c in chat.choices)
    completion = client.completions.create(model=model, prompt="def schedule(self):",
                                           max_tokens=5, n=2)
    assert [c.index for c in completion.choices] == [0, 1]
    generated = chat.usage.completion_tokens + completion.usage.completion_tokens
    assert generated == 3 * 6 + 2 * 5

    seen: list = []
    while not (seen and type(seen[-1]) is Ack and seen[-1].id == command_id):
        seen.append(items.get(timeout=120))
    assert seen[-1].ok, seen[-1].message
    (change,) = [i for i in seen if type(i) is PolicyChanged]
    assert (change.old, change.new, change.source) == ("off", "strict", "remote:pytest")
    link.close()
    server.stop()

    (path,) = (server.log_path.parent / "rec").glob("*.jsonl.zst")
    recorded = load(path).all_items()
    steps = [i for i in recorded if type(i) is StepRecord]
    changes = [(i.old, i.new, i.source) for i in recorded if type(i) is PolicyChanged]
    assert changes == [("off", "strict", "remote:pytest")]
    assert {s.policy for s in steps} == {"strict"}  # switched before the first step
    assert sum(s.generated_tokens for s in steps) == generated  # what the client received
    assert sum(len(s.finished) for s in steps) == 2  # one sequence group per request
    assert type(recorded[-1]) is RunFinished
