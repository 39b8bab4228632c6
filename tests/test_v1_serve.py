"""vLLM 0.33's own OpenAI server (`vllm serve`) on the observatory's sim executor and a tiny
model made offline, driven by vLLM's own load generator (`vllm bench serve`) and the `openai`
client: a real server and real clients on a CPU-only machine, nothing mocked.

    vllm serve DIR --distributed-executor-backend engine.SimExecutor

runs vLLM's API server and its engine-core process unchanged; the executor (resolved in both
processes from the dotted path) computes nothing. Skips without vLLM 0.33 (CI runs it in the
vllm033 venv, PYTHONHASHSEED=0).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from engine.adapters.versions import installed_version, release_for
from tests.server_harness import Server, free_port, server_env, venv_bin

_release = release_for(installed_version())
pytestmark = pytest.mark.skipif(_release is None or _release.engine != "v1",
                                reason="needs vLLM's V1 engine (the vllm033 venv)")

V1_SIM_ENV = {"VLLM_TARGET_DEVICE": "cpu", "PYTHONHASHSEED": "0"}
"""The CUDA wheel cannot infer a platform on a machine without a GPU, in the API server's
process as in the engine core's (which inherits it): the sim executor runs nothing on it."""


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from engine.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("v1serve") / "tiny").path


@pytest.fixture(scope="module")
def server(tiny_dir):
    port = free_port()
    argv = [venv_bin("vllm"), "serve", str(tiny_dir), "--distributed-executor-backend",
            "engine.SimExecutor", "--host", "127.0.0.1", "--port", str(port)]
    srv = Server(argv, server_env(**V1_SIM_ENV), tiny_dir.parent / "serve.log").start()
    srv.port = port
    yield srv
    srv.stop()


def test_vllm_bench_serve_completes_100_prompts_with_no_failure(server, tiny_dir, tmp_path):
    result = subprocess.run(
        [venv_bin("vllm"), "bench", "serve", "--base-url", f"http://127.0.0.1:{server.port}",
         "--model", str(tiny_dir), "--dataset-name", "random", "--num-prompts", "100",
         "--save-result", "--result-dir", str(tmp_path), "--result-filename", "bench.json"],
        env=server_env(**V1_SIM_ENV), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "bench.json").read_text())
    assert (report["completed"], report["failed"]) == (100, 0)
    assert report["total_output_tokens"] == 100 * 128  # the sim runs each to max_tokens


def test_openai_client_chat_with_n_2(server, tiny_dir):
    import openai

    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="unused")
    reply = client.chat.completions.create(
        model=str(tiny_dir), messages=[{"role": "user", "content": "Which step preempts?"}],
        max_tokens=7, n=2)
    assert [c.index for c in reply.choices] == [0, 1]
    assert all(c.finish_reason == "length" and c.message.content for c in reply.choices)
    assert reply.usage.completion_tokens == 2 * 7


def test_the_servers_own_log_is_left_alone(server):
    """Importing the observatory inside the user's server (vLLM resolves the executor's dotted
    path while it builds its config) takes none of vLLM's log lines: the API server's lines
    from after that import, and the engine core's, are all there."""
    text = server.log_text()
    assert "(APIServer" in text and "Route: /v1/chat/completions" in text
    assert "(EngineCore" in text and "init engine" in text
