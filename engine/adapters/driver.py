"""The seam between a Session and one kind of vLLM engine.

A Session (engine.session) owns the loop, the clocks, the commands and the stream; what differs
between vLLM's V0 `LLMEngine` (0.5-0.10.2) and its V1 `EngineCore` (0.11+) is behind this one
interface, implemented once per engine kind (engine/adapters/v0/driver.py,
engine/adapters/v1/driver.py): build the engine with the observatory's hooks attached, add a
request, step, read the step's record, switch the policy, and read the state when vLLM
raised. `open_driver` picks the kind from the installed release (engine.adapters.versions).

Failures keep their two meanings: `step()` raises HookError when the observatory's own hook
code failed inside vLLM's step, and anything else it raises is vLLM's.

What the observatory reads of an engine is one interface whoever drives it, `EngineTap`: the
Session's drivers are taps that also drive, and the taps `engine.attach` puts on a user's own
engine (engine/adapters/v0/attach.py, engine/adapters/v1/attach.py) are taps that are told
when a step ran (`AttachedTap`). Each kind reads a step and its abort state once, in its
step_record module, for both.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, NamedTuple, Protocol

from engine.adapters.guard import Guard
from engine.costmodel import CostModel
from engine.policy import Policy
from engine.spec import RunSpec
from engine.stream.records import StepRecord, V1StepRecord
from engine.workload import Request


class HookError(Exception):
    """The observatory's own hook code raised inside vLLM's `step()`.

    The hooks run in the middle of vLLM's scheduler, so without this an observatory bug would
    look exactly like vLLM aborting. Only the hooks' own code is wrapped; whatever vLLM's
    methods raise passes through untouched. The original exception is `__cause__`.
    """

    def __init__(self, where: str, cause: BaseException) -> None:
        super().__init__(f"{where}: {type(cause).__name__}: {cause}")
        self.where = where
        self.cause = cause


class RequestFacts(NamedTuple):
    """What a re-run needs of a request as it arrives (engine.analysis.rerun), read by the
    kind's adapter (engine/adapters/<kind>/request_facts.py): no token id, no text."""

    n: int  # samples (vLLM's SamplingParams.n)
    max_tokens: int  # its output limit
    prefix: tuple[int, int]  # its prompt's fingerprint, engine.fingerprint's (shared, own)


class Arrived(NamedTuple):
    """A request vLLM took: its prompt tokens as vLLM counts them, and what a re-run needs."""

    prompt_tokens: int
    facts: RequestFacts


class EngineTap(Protocol):
    """One vLLM engine with the observatory's hooks on: what a stream reads of it."""

    kind: str  # "v0" or "v1" (records.ENGINE_KINDS): the Header's `engine`
    vllm_version: str
    model: str
    engine_config: dict[str, Any]
    # the policy in force and the switches asked for: an engine.adapters.hook_base.PolicySwitch
    # (not imported: hook_base imports HookError from here)
    hook: Any

    def record(self, step: int, cost: CostModel, sim_start_s: float,
               wall_s: float) -> StepRecord | V1StepRecord:
        """The record of the step that just ran, `exec_s` included."""

    def abort_state(self) -> dict[str, int]:
        """The queues and blocks when vLLM raised out of a step: EngineAborted's running,
        swapped, waiting, gpu_used, gpu_total, cpu_used and cpu_total."""


class AttachedTap(EngineTap, Protocol):
    """A tap on an engine a user's program drives (`engine.attach`, `observatory exec`)."""

    guard: Guard  # our failures never reach the user's engine

    def hear(self, before_step: Callable[[], None], after_step: Callable[[], None],
             aborted: Callable[[BaseException], None],
             added: Callable[[str, int, RequestFacts], None]) -> None:
        """Call these as the user's engine steps, aborts and takes requests (its id, prompt
        tokens and facts)."""

    def detach(self) -> None:
        """Put vLLM's own methods back."""


class EngineDriver(EngineTap, Protocol):
    """A tap on an engine the observatory builds and drives itself (a Session's)."""

    engine: Any  # the real vLLM engine object (tests and power users)
    max_model_len: int
    count_tokens: Callable[[str], list[int]] | None  # sim with --tokenizer: real token ids

    def blocks_line(self) -> str:
        """One line for the build progress: the KV cache the engine got."""

    def add_request(self, request: Request, arrival_time: float) -> Arrived:
        """Hand `request` to vLLM; return its prompt tokens as vLLM counts them, and its
        facts."""

    def has_unfinished_requests(self) -> bool: ...

    def step(self) -> None:
        """One engine step (HookError: the observatory's hook failed inside it)."""

    def set_policy(self, policy: Policy, source: str) -> None:
        """Govern the next step with `policy` (already checked for this kind)."""


class BuiltDriver:
    """What every driver keeps of the engine its kind's build made (both builds' results answer
    these names), set once here so that the two drivers' constructors say only what differs."""

    def __init__(self, spec: RunSpec, built: Any) -> None:
        self.spec = spec
        self.built = built
        self.engine = built.engine
        self.scheduler = built.scheduler
        self.vllm_version = built.vllm_version
        self.model = built.model
        self.max_model_len = built.max_model_len
        self.engine_config = built.engine_config


def import_vllm(spec: RunSpec) -> None:
    """Import the installed release's adapter family, and vLLM and torch with it (seconds:
    the first start-up stage a user waits through, named apart from building the engine).
    Raises ConfigError (an unsupported release, a sim process vLLM already set up)."""
    from engine.adapters.versions import family, require_supported

    release = require_supported()
    if release.engine == "v1" and spec.backend == "sim":
        from engine.adapters.v1.platform import prepare_sim_process

        prepare_sim_process()  # before anything imports vLLM, which then picks its platform
    import torch  # noqa: F401  first: its import gives its loggers their own stderr handlers,

    from engine import logs

    logs.install()  # which are taken over here, before vLLM sets torch warning
    family(spec.backend)


def open_driver(spec: RunSpec, policy: Policy) -> EngineDriver:
    """Build the engine of the installed release's kind for `spec`. Raises ConfigError."""
    from engine.adapters.versions import require_supported

    import_vllm(spec)
    module = importlib.import_module(f"engine.adapters.{require_supported().engine}.driver")
    return module.build_driver(spec, policy)


def resolve_engine(spec: RunSpec) -> Any:
    """What the installed kind's build makes of `spec`, without building it (a dry run).
    Raises ConfigError."""
    from engine.adapters.versions import require_supported

    if require_supported().engine == "v1":
        if spec.backend == "sim":  # before anything imports vLLM's V1 modules
            from engine.adapters.v1.platform import prepare_sim_process

            prepare_sim_process()
        from engine.adapters.v1.build import resolve
    else:
        from engine.adapters.v0.build import resolve
    return resolve(spec)


def installed_engine_kind() -> str:
    """"v0" or "v1": the kind of engine the installed vLLM runs (ConfigError if none)."""
    from engine.adapters.versions import require_supported

    return require_supported().engine
