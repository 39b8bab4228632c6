"""Defaults and refusals a user expects (issue #37): a preset of the other engine kind is refused
in one line naming the install command; the default preset of either kind is said in --help; a
trace's lines meet the model's context before vLLM is even imported; --max-model-len reaches
vLLM; and vLLM's advice in a refusal names the observatory's own flags.

Each command runs as a user runs it (a subprocess of the CLI) where its exit status and its
stderr are the subject; the engine path (EngineHost) where the stages before a refusal are.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.adapters.advice import in_our_words
from engine.adapters.versions import installed_engine
from engine.errors import ConfigError
from engine.host import EngineHost
from engine.spec import preset_spec
from engine.stream.protocol import Progress

V1_ADVICE = ("To serve at least one request with the model's max seq len (16384), (0.56 GiB KV "
             "cache is needed, which is larger than the available KV cache memory (0.27 GiB). "
             "Based on the available memory, the estimated maximum model length is 7984. Try "
             "increasing `gpu_memory_utilization` when initializing the engine (this flag also "
             "controls CPU memory reservation on the CPU backend, despite its name). Decreasing "
             "`max_model_len` also reduces what is needed.")  # vLLM 0.34, --num-gpu-blocks 500


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          text=True, timeout=600)


def test_a_preset_of_the_other_engine_is_one_line_naming_the_install_command():
    """`run --preset v1-thrash` in a V0 environment ran on V0 without a word (and a V0 preset
    in a V1 one failed on --prompt-len, after vLLM loaded)."""
    other, extra = ("v1-thrash", "vllm033") if installed_engine() == "v0" else ("demo", "vllm050")
    out = cli("run", "--preset", other, "--no-record")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert f"preset {other} is made for vLLM's" in lines[0]
    assert f"'.[{extra},test]'" in lines[0] and "observatory versions" in lines[0]


def test_help_says_the_default_preset_of_either_engine():
    out = cli("run", "--help")
    text = " ".join(out.stdout.split())
    assert "(default: seed-5578 where the installed vLLM runs V0, v1-thrash where it runs V1)" \
        in text
    assert "--max-model-len TOKENS" in text


def test_a_trace_line_too_long_is_refused_before_vllm_loads(tmp_path):
    """On V1 the line was refused only after the engine was built (48 s); now before vLLM is
    imported, with the model's context: the packaged config's, or --max-model-len's."""
    trace = tmp_path / "long.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 100, "output_length": 10, '
                     '"hash_ids": [1]}\n{"timestamp": 10, "input_length": 3000, '
                     '"output_length": 10, "hash_ids": [2]}\n')
    preset = "seed-5578" if installed_engine() == "v0" else "v1-thrash"
    # opt-125m's own context, then --max-model-len's under the preset's model
    for max_len, model in ((None, "opt-125m"), (2048, None)):
        spec = preset_spec(preset, trace=str(trace), max_model_len=max_len,
                           model=model).validated()
        stages: list[str] = []
        host = EngineHost(spec, None)
        host.subscribe(lambda item: isinstance(item, Progress) and stages.append(item.stage))
        host.start()
        assert host.done.wait(300)
        assert host.start_error is not None, "the run started"
        assert "line 2: a prompt of 3,000 tokens does not fit the model's context of " \
            "2,048" in host.start_error
        assert stages == ["checking the trace"]  # never "importing vLLM"


def test_vllms_advice_is_said_in_the_observatorys_flags():
    said = in_our_words(V1_ADVICE)
    assert "Try increasing --num-gpu-blocks. Decreasing --max-model-len also" in said
    assert "gpu_memory_utilization" not in said and "max_model_len" not in said
    assert "CPU backend" not in said and "when initializing" not in said
    # a bare word is left alone unless it is an identifier: "model", "seed" are prose
    assert in_our_words("the model seed max_num_seqs") == "the model seed --max-num-seqs"


def test_max_model_len_is_given_to_vllm():
    from engine.session import Session

    spec = preset_spec("demo" if installed_engine() == "v0" else "v1-async-seats",
                       max_model_len=1000, max_steps=1).validated()
    session = Session(spec)
    session.prepare()
    assert session.driver.max_model_len == 1000
    with pytest.raises(ConfigError):  # beyond the model's own: vLLM's refusal, in one line
        Session(preset_spec(spec.preset, max_model_len=10**6).validated()).prepare()
