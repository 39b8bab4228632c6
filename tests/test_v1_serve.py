"""vLLM's own V1 OpenAI server (`vllm serve`) on the observatory's sim executor and a tiny
model made offline, driven by vLLM's own load generator (`vllm bench serve`) and the `openai`
client, watched and steered: a real server and real clients on a CPU-only machine, nothing
mocked (issue #19, items 5 and 6).

Two servers start at once (each takes about a minute, mostly imports):

- the explicit forms: `vllm serve DIR --distributed-executor-backend engine.SimExecutor
  --scheduler-cls engine.ObservedScheduler`, configured by OBSERVATORY_RECORD. vLLM resolves
  both dotted paths itself, in its API server's process and its engine core's;
- the acceptance command: `observatory exec --sim --serve 127.0.0.1:PORT --token-file F
  --record DIR -- vllm serve DIR`, with a client of the observatory's stream protocol (what
  `observatory live --connect` speaks) that sees the steps and switches the policy.

Skips without a V1 release (CI runs it in every V1 release's venv, PYTHONHASHSEED=0); on
0.18 the explicit forms skip (its platform is not chosen by VLLM_TARGET_DEVICE).
"""

from __future__ import annotations

import json
import queue
import secrets
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.adapters.v1.platform import PLATFORM_KEYS, sim_env
from server_harness import Server, free_port, server_env, venv_bin
from v1_required import needs_v1

pytestmark = needs_v1

V1_SIM_ENV = {**{k: v for k, v in sim_env().items() if k in PLATFORM_KEYS},
              "PYTHONHASHSEED": "0"}
"""What `observatory exec --sim` sets for the platform, given by hand for the explicit forms:
the CUDA wheel cannot infer a platform without a GPU, in the API server's process as in the
engine core's (which inherits it); the sim executor runs nothing on it. Up to 0.33
`VLLM_TARGET_DEVICE=cpu`; from 0.34 (and on 0.24, 0.27.1) PYTHONPATH with the observatory's
platform plugin's directory (engine.adapters.v1.platform.PLUGIN_PATH)."""
GRACE = ("--shutdown-timeout", "5")
"""vLLM (0.33 on) kills its engine-core process at once on shutdown unless given a grace period;
with one, the process ends normally and seals its recording (RunFinished)."""
PROMPTS = 100
OUTPUT_LEN = 128  # vllm bench serve's random dataset default


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    from engine.tiny_model import write_tiny_model

    base = tmp_path_factory.mktemp("v1serve")
    model = write_tiny_model(base / "tiny").path
    token_file = base / "token"
    token_file.write_text(secrets.token_urlsafe(16) + "\n")
    ports = SimpleNamespace(explicit=free_port(), watched=free_port(), hub=free_port())
    vllm = venv_bin("vllm")
    explicit = Server(
        [vllm, "serve", str(model), "--host", "127.0.0.1", "--port", str(ports.explicit),
         "--distributed-executor-backend", "engine.SimExecutor",
         "--scheduler-cls", "engine.ObservedScheduler", *GRACE],
        server_env(**V1_SIM_ENV, OBSERVATORY_RECORD=str(base / "explicit-rec")),
        base / "explicit.log")
    watched = Server(
        [sys.executable, "-m", "engine.cli", "exec", "--sim", "--serve",
         f"127.0.0.1:{ports.hub}", "--token-file", str(token_file), "--record",
         str(base / "exec-rec"), "--", vllm, "serve", str(model), "--host", "127.0.0.1",
         "--port", str(ports.watched)],  # vLLM's default shutdown: its Ctrl-C kills the core
        server_env(), base / "exec.log", own_group=True)
    started = []
    try:
        for server in (explicit, watched) if _EXPLICIT_RUNS else (watched,):
            started.append(server.launch())
        for server in started:
            server.wait_ready()
        yield SimpleNamespace(model=model, base=base, token=token_file.read_text().strip(),
                              ports=ports, explicit=explicit, watched=watched)
    finally:
        for server in started:
            server.stop()


def _recording(directory: Path):
    from engine.stream.reader import load
    from engine.stream.records import PolicyChanged, RunFinished, V1StepRecord

    (path,) = directory.glob("*.jsonl.zst")  # one engine: one file, named host-pid-index
    items = load(path).all_items()
    steps = [i for i in items if type(i) is V1StepRecord]
    changes = [i for i in items if type(i) is PolicyChanged]
    assert type(items[-1]) is RunFinished, items[-1]
    return steps, changes, items[-1]


def _explicit_runs() -> bool:
    """Whether the installed release picks its CPU platform from VLLM_TARGET_DEVICE (0.33), so
    the explicit forms start here without the observatory in the process first; 0.18 does not
    (engine.adapters.v1.family_v018.PLATFORM_FROM_ENV), and without a GPU finds no platform."""
    from v1_required import V1_INSTALLED

    if not V1_INSTALLED:
        return False
    from engine.adapters.v1.current import fam

    return fam.PLATFORM_FROM_ENV


_EXPLICIT_RUNS = _explicit_runs()


@pytest.mark.skipif(not _EXPLICIT_RUNS, reason="this vLLM picks its CPU platform only in a CPU "
                    "build (not from VLLM_TARGET_DEVICE): `vllm serve` with the sim executor "
                    "by hand finds no platform on a machine without a GPU; `observatory exec "
                    "--sim` installs it (the other test)")
def test_explicit_forms_serve_the_openai_client_and_record(servers):
    import openai

    client = openai.OpenAI(base_url=f"http://127.0.0.1:{servers.ports.explicit}/v1",
                           api_key="unused")
    reply = client.chat.completions.create(
        model=str(servers.model), messages=[{"role": "user", "content": "Which step preempts?"}],
        max_tokens=7, n=2)
    assert [c.index for c in reply.choices] == [0, 1]
    assert all(c.finish_reason == "length" and c.message.content for c in reply.choices)
    assert reply.usage.completion_tokens == 2 * 7
    servers.explicit.stop()
    # importing the observatory inside the user's server (to resolve the dotted paths) takes
    # none of vLLM's log lines: the API server's from after that import, the engine core's
    text = servers.explicit.log_text()
    assert "(APIServer" in text and "Route: /v1/chat/completions" in text
    assert "(EngineCore" in text and "init engine" in text
    steps, changes, end = _recording(servers.base / "explicit-rec")
    assert end.reason == "completed" and end.steps == len(steps)  # sealed at the server's end
    assert changes == [] and {s.policy for s in steps} == {"off"}
    assert sum(s.generated_tokens for s in steps) == 2 * 7  # n=2 is two requests in V1
    assert sum(len(s.finished) for s in steps) == 2


def test_exec_serves_vllm_bench_and_a_client_switches_the_policy(servers, tmp_path, capsys):
    from engine.stream.client import connect
    from engine.stream.reader import open_indexed
    from engine.stream.protocol import Ack
    from engine.stream.reader import load
    from engine.stream.records import PolicyChanged, V1StepRecord

    link = connect(f"127.0.0.1:{servers.ports.hub}", servers.token, client="pytest")
    items: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [items.put(i) for i in link.items()], daemon=True).start()
    command_id = link.send("policy", "whole-context")  # applied at the next step boundary
    bench = subprocess.run(
        [venv_bin("vllm"), "bench", "serve", "--base-url",
         f"http://127.0.0.1:{servers.ports.watched}", "--model", str(servers.model),
         "--dataset-name", "random", "--num-prompts", str(PROMPTS), "--save-result",
         "--result-dir", str(tmp_path), "--result-filename", "bench.json"],
        env=server_env(**V1_SIM_ENV), capture_output=True, text=True, timeout=600)
    assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr[-3000:]
    report = json.loads((tmp_path / "bench.json").read_text())
    assert (report["completed"], report["failed"]) == (PROMPTS, 0)
    assert report["total_output_tokens"] == PROMPTS * OUTPUT_LEN  # each runs to max_tokens
    seen: list = []
    while not (seen and type(seen[-1]) is Ack and seen[-1].id == command_id):
        seen.append(items.get(timeout=120))
    assert seen[-1].ok, seen[-1].message
    (change,) = [i for i in seen if type(i) is PolicyChanged]
    assert (change.old, change.new, change.source) == ("off", "whole-context", "remote:pytest")
    assert any(type(i) is V1StepRecord for i in seen)  # the client saw the steps
    link.close()
    servers.watched.interrupt()  # Ctrl-C: exec returns once the recording is sealed
    steps, changes, end = _recording(servers.base / "exec-rec")
    # the core ended its stream itself (SIGINT reached it too), or vLLM killed it first and
    # its scribe ended it: either way whole, indexed, every step
    assert end.reason in ("completed", "process_ended") and end.steps == len(steps)
    assert [s.step for s in steps] == list(range(len(steps)))
    (path,) = (servers.base / "exec-rec").glob("*.jsonl.zst")
    assert open_indexed(path) is not None and not load(path).truncated
    assert [(c.old, c.new, c.source) for c in changes] == [
        ("off", "whole-context", "remote:pytest")]
    first = changes[0].step
    assert {s.policy for s in steps if s.step < first} <= {"off"}
    assert {s.policy for s in steps if s.step >= first} == {"whole-context"}
    # every token the bench received was generated in a recorded step (its warm-up request
    # included)
    assert sum(s.generated_tokens for s in steps) >= PROMPTS * OUTPUT_LEN
    assert sum(len(s.finished) for s in steps) >= PROMPTS
    # a recording of a served engine is a workload (issue #38): its requests, at the steps
    # they came in, re-run every decision on the sim, the client's switch included
    from rerun_checks import trace_reruns_every_decision, verify_passes_and_names_a_changed_step

    capsys.readouterr()
    trace_reruns_every_decision(path, tmp_path, capsys)
    verify_passes_and_names_a_changed_step(path, tmp_path, capsys,
                                           step=steps[len(steps) // 2].step)
