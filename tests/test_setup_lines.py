"""Quiet by default: what vLLM and torch say because of how the observatory sets a sim engine up
(no tokenizer, no CUDA, an in-process engine core with fixed ids) is a setup line, shown with
the INFO lines, never as a ⚠ in the events panel; what the engine's decisions or the user's
settings make vLLM say still is (engine.adapters.setup_lines)."""

from __future__ import annotations

from engine.adapters.setup_lines import setup_line
from engine.stream.records import LogLine
from engine.stream.run import Run
from tui.widgets.event_log import fold


def test_the_setup_lines_of_every_release_seen_are_named():
    for logger, message in [
        ("vllm.engine.llm_engine", "Using None for EOS token id because tokenizer is not "
                                   "initialized"),  # V0 0.5: once per request
        ("vllm.renderers.base", "Using None for EOS token id because tokenizer is not "
                                "initialized"),  # V1 0.34
        ("vllm._custom_ops", "Failed to import from vllm._C with ImportError('libcuda.so.1')"),
        ("vllm.v1.engine.input_processor", "Passing raw prompts to InputProcessor is "
                                           "deprecated and will be removed"),
        ("torch._library.opaque_object", "register_opaque_type is deprecated, use x"),
        ("torch.utils.cpp_extension", "No CUDA runtime is found, using CUDA_HOME='/usr/local'"),
        ("vllm.platforms.cpu", "CPU backend prefers block_size is multiples of 32, otherwise "
                               "the performance is not optimized."),  # V1 0.29
        ("transformers.configuration_utils", "`torch_dtype` is deprecated! Use `dtype` "
                                             "instead!"),  # V0 0.10.2
        # torch printed it before its logger was taken over: an engine child's captured fd 2
        ("stderr", "W1207 03:16:07.672000 14346 torch/_opaque_base.py:6] torch._opaque_base "
                   "is deprecated, use torch._custom_class_base instead"),
    ]:
        assert setup_line(logger, message), (logger, message)
    for logger, message in [  # the engine's own story; a look-alike from another logger
        ("vllm.core.scheduler", "Sequence group 31 is preempted by PreemptionMode.SWAP mode"),
        ("vllmx", "Enforce eager set"),
        ("stderr", "Segmentation fault"),
    ]:
        assert setup_line(logger, message) is None, (logger, message)


def test_a_setup_warning_is_an_info_event_and_a_real_one_stays_a_warning():
    run = Run()
    run.extend([LogLine(step=0, level="WARNING", logger="vllm.engine.llm_engine",
                        message="Using None for EOS token id because tokenizer is not "
                                "initialized", repeats=10_000),
                LogLine(step=454, level="WARNING", logger="vllm.core.scheduler",
                        message="Sequence group 31 is preempted by PreemptionMode.SWAP mode")])
    levels = [(e.step, e.level) for e in run.log]
    assert levels == [(0, "info"), (454, "warning")]
    shown = [entry.event.step for entry in fold(run.log, show_info=False)]
    assert shown == [454]  # the panel's default: the preemption, not the EOS chatter
    assert [entry.event.step for entry in fold(run.log, show_info=True)] == [0, 454]
