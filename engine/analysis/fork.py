"""`observatory fork REC --at STEP --policy P`: what if the fix had been switched on at STEP?

A fork re-runs REC on the sim (engine.analysis.rerun: its own spec, or its recorded requests
and engine), with REC's own policy changes before STEP, and switches to P before STEP runs. Up
to STEP it makes REC's decisions (a sim run is a pure function of its spec and requests; the
re-run is checked against REC step by step as it goes, and a step where it differs is said:
for a recording of a real engine that is where the sim's fidelity ends); from STEP on it is P's
run. It stops when the work is done, when vLLM aborts, or after `max_steps` (by default twice
REC's steps, so a run that REC lost is seen well past the step REC aborted at).

The fork is a recording like any other: its header's spec re-runs it (`verify` checks it),
and `compare REC FORK` or `replay REC FORK` show both with the first differing step marked.
Requests arrive in a fork at the steps they arrived at in REC (a recording of a program's own
engine) or as REC's spec makes them (a run of the observatory).

`ForkPlan` and the verdict are pure; `run_fork` imports vLLM (through engine.host).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

import msgspec

from engine.analysis.divergence import decision_diff
from engine.analysis.rerun import RerunPlan, rerun_plan
from engine.errors import ConfigError
from engine.policy import parse_policy
from engine.spec import MAX_STEP, RunSpec, preset_fix
from engine.stream.records import STEP_TYPES, EngineAborted, RunFinished



def fix_for(spec: dict[str, Any], engine: str) -> str:
    """The fix a recording's `f` forks it with: the one live's `f` switches on for its preset
    (engine.spec.preset_fix; a program's own engine records the kind's default preset), else
    the engine kind's."""
    return preset_fix(str(spec.get("preset")), engine)


MIN_EXTRA_STEPS = 200
"""A fork of a short recording runs at least this many steps past its fork step by default."""


@dataclass
class ForkPlan:
    """The fork of `recording` at `at` under `policy`."""

    recording: Any  # engine.stream.run.Recording
    at: int
    policy: str
    spec: RunSpec  # REC's re-run with the fork's toggles and step limit
    bursts: dict[int, list[int]] = field(default_factory=dict)

    @property
    def original_end(self) -> int:
        """The step REC ended at: its aborting step, or its last step."""
        rec = self.recording
        if rec.abort is not None:
            return rec.abort.step
        return rec.steps[-1].step if rec.steps else 0


def last_forkable_step(recording: Any) -> int:
    """The latest step a fork can switch before: REC's aborting step (the switch would govern
    it), or the step after REC's last."""
    if recording.abort is not None:
        return recording.abort.step
    return recording.steps[-1].step + 1 if recording.steps else 0


def plan_fork(recording: Any, at: int, policy: str,
              max_steps: int | None = None) -> ForkPlan:
    """The fork of `recording` switched to `policy` before step `at` (ConfigError, one line,
    for a step or policy that cannot be)."""
    name = os.path.basename(recording.path)
    parsed = parse_policy(policy)  # ConfigError naming the policies
    engine = recording.header.engine if recording.header is not None else "v0"
    if engine not in parsed.engine_kinds:
        raise ConfigError(f"policy {parsed} acts on the {', '.join(parsed.engine_kinds)} "
                          f"engine; {name} is a {engine} recording")
    if not recording.steps and recording.abort is None:
        raise ConfigError(f"{name}: holds no steps: nothing to fork")
    last = last_forkable_step(recording)
    if at < 0 or at > last:
        end = (f"aborted at step {recording.abort.step}" if recording.abort is not None
               else f"ends after step {last - 1}")
        raise ConfigError(f"--at {at}: {name} {end}: fork at a step from 0 to {last}")
    plan: RerunPlan = rerun_plan(recording)
    toggles = [(step, new) for step, new in plan.spec.toggles if step < at]
    toggles.append((at, str(parsed)))
    if max_steps is None:
        max_steps = max(2 * (last + 1), at + MIN_EXTRA_STEPS)
    spec = msgspec.structs.replace(plan.spec, toggles=toggles,
                                   max_steps=min(max_steps, MAX_STEP))
    return ForkPlan(recording, at, str(parsed), spec, plan.bursts)


def fork_path(recording_path: str, at: int, policy: str) -> Path:
    """`<dir>/<stem>-fork<STEP>-<policy>.jsonl.zst` beside REC (`-2`, `-3`... if taken)."""
    name = os.path.basename(recording_path)
    for suffix in (".zst", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    stem = f"{name}-fork{at}-{policy.replace(':', '_').replace('+', '_')}"
    folder = Path(os.path.dirname(recording_path) or ".")
    path, n = folder / f"{stem}.jsonl.zst", 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.jsonl.zst"
    return path


class PrefixCheck:
    """A sink on the fork's stream: its steps before the fork step against REC's, and the
    first one that differs (where the sim's re-run parts from the recording); then the first
    step whose decisions differ from REC's at all (the divergence); and how the fork ended."""

    def __init__(self, plan: ForkPlan) -> None:
        self.plan = plan
        self._recorded = {s.step: s for s in plan.recording.steps}
        self.unfaithful: tuple[int, str] | None = None  # (step, what differs) before `at`
        self.divergence: int | None = None
        self.last_step: int | None = None
        self.abort: EngineAborted | None = None
        self.finished: RunFinished | None = None

    def __call__(self, item: Any) -> None:
        kind = type(item)
        if kind in STEP_TYPES:
            self.last_step = item.step
            recorded = self._recorded.get(item.step)
            if self.divergence is None:
                if recorded is None:
                    self.divergence = item.step
                elif decision_diff(recorded, item):
                    self.divergence = item.step
            if (self.unfaithful is None and item.step < self.plan.at and recorded is not None
                    and decision_diff(recorded, item)):
                self.unfaithful = (item.step, ", ".join(decision_diff(recorded, item)))
        elif kind is EngineAborted:
            self.abort = item
            if self.divergence is None and self.plan.recording.abort is None:
                self.divergence = item.step
        elif kind is RunFinished:
            self.finished = item


@dataclass
class ForkResult:
    path: str
    plan: ForkPlan
    check: PrefixCheck

    @property
    def aborted(self) -> bool:
        return self.check.abort is not None


def verdict(result: ForkResult) -> list[str]:
    """What the fork says, in plain lines: whether P at STEP saved the run (or came too late),
    where it parts from REC, and whether the re-run was REC's up to STEP."""
    plan, check = result.plan, result.check
    rec = plan.recording
    name = os.path.basename(rec.path)
    lines: list[str] = []
    original = (f"{name} aborted at step {rec.abort.step:,}" if rec.abort is not None
                else f"{name} ran {len(rec.steps):,} steps "
                     f"({rec.finished.reason if rec.finished else 'cut'})")
    if check.abort is not None:
        late = "too late: " if rec.abort is not None else ""
        lines.append(f"{late}switched to {plan.policy} at step {plan.at:,}, vLLM still aborts, "
                     f"at step {check.abort.step:,} ({original}): {check.abort.message}")
    elif check.finished is not None:
        reason = check.finished.reason
        end = (f"completed every request in {check.finished.steps:,} steps"
               if reason == "completed" else
               f"ran {check.finished.steps:,} steps without aborting (stopped: {reason})")
        saved = "in time: " if rec.abort is not None else ""
        lines.append(f"{saved}switched to {plan.policy} at step {plan.at:,}, the fork {end} "
                     f"({original})")
    if check.unfaithful is not None:
        step, what = check.unfaithful
        lines.append(f"note: the sim's re-run of {name} differs from it at step {step:,} "
                     f"({what}), before the fork step: from there the fork is the sim's run, "
                     f"not the recording's (`observatory verify {name}` says more)")
    if check.divergence is not None:
        lines.append(f"decisions first differ from {name}'s at step {check.divergence:,}")
    else:
        lines.append(f"the fork makes {name}'s decisions at every step it ran")
    return lines


def run_fork(plan: ForkPlan, out: str, progress: TextIO | None = None,
             on_item: Callable[[Any], None] | None = None) -> ForkResult:
    """Run the fork to its end, recording to `out`; `progress` gets a line about once a
    second, `on_item` every item of its stream."""
    from engine.host import EngineHost

    host = EngineHost(plan.spec, out)
    host.open_recording()  # a bad path fails before vLLM loads
    check = PrefixCheck(plan)
    host.subscribe(check)
    bursts = plan.bursts
    if bursts:
        def issue(item: Any) -> None:
            if type(item) in STEP_TYPES:
                for size in bursts.get(item.step + 1, ()):
                    host.session.add_burst(size, source="fork")
        host.subscribe(issue)
    if on_item is not None:
        host.subscribe(on_item)
    if progress is not None:
        host.subscribe(_ForkProgress(plan, progress))
    host.prepare()
    for size in bursts.get(0, ()):
        host.session.add_burst(size, source="fork")
    host.start()
    host.wait()
    if host.finished is None and host.start_error is not None:
        raise ConfigError(host.start_error)
    return ForkResult(out, plan, check)


class _ForkProgress:
    """One line about once a second: re-running REC up to the fork step, then the fork."""

    def __init__(self, plan: ForkPlan, stream: TextIO) -> None:
        self.plan, self.stream = plan, stream
        self.last = 0.0

    def __call__(self, item: Any) -> None:
        if type(item) not in STEP_TYPES:
            return
        now = time.monotonic()
        if now - self.last < 1.0:
            return
        self.last = now
        at = self.plan.at
        where = (f"re-running {os.path.basename(self.plan.recording.path)}: step {item.step:,} "
                 f"of {at:,}" if item.step < at else
                 f"fork under {self.plan.policy}: step {item.step:,}")
        try:
            self.stream.write(f"fork: {where}\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass
