"""`observatory verify`: re-run a recording on the sim backend and check every decision.

A sim run is deterministic for a given spec (the fake executor's tokens, the workload and the
cost model are all seeded), so a recording is a regression test for the scheduler: rebuild the
run (engine.analysis.rerun: from the header's spec, or for a program's own engine from its
recorded requests and vLLM's settings), apply the recorded policy changes at their recorded
steps and re-issue the recorded bursts before theirs, then compare the re-run's stream with the
file as it is produced. Wall-clock fields are the only ones allowed to differ. The first
difference stops the re-run.

For a recording of a real engine (the gpu backend, a program's own engine on a GPU) the first
difference is a fidelity report: the step where the sim, given the same requests, output
lengths and prompt blocks, decided otherwise than the real engine, and what differs.
"""

from __future__ import annotations

import os
import time
from typing import Any, TextIO

import msgspec

from engine.errors import ConfigError, RecordingError
from engine.safe_text import safe
from engine.stream.reader import load
from engine.stream.run import Recording
from engine.stream.records import (STEP_TYPES, Arrivals, EngineAborted, Header, PolicyChanged,
                                   RunFinished, StepRecord)

_IGNORED_FIELDS = frozenset({"wall_s", "exec_s"})  # measured: real time differs every run
_LATER_ARRIVAL_FIELDS = frozenset({"n", "max_tokens", "prefix"})
# Fields added later: a recording made before them reads None, and its re-run is compared on
# everything else.
_LATER_FIELDS = frozenset({"committed_blocks", "committed_slack", "waiting_by_reason",
                           "head_reason", "head_need", "head_limit", "seq_finished",
                           "finished_lens", "new_prefix_hit_tokens"})


def predates_swap_blocks(steps: list[StepRecord]) -> bool:
    """Whether the recording was written before steps carried `swap_blocks`: it swapped, yet
    no step says a block moved (the field reads its default, 0). Its re-run is compared on
    everything else."""
    swapped = any(s.swapped_out or s.swapped_in for s in steps)
    return swapped and not any(s.swap_blocks for s in steps)


class VerifyResult(msgspec.Struct, kw_only=True):
    ok: bool
    message: str  # one line: what matched, or the first difference
    steps_checked: int
    diff_step: int | None = None
    diff_field: str | None = None


def _first_diff(recorded: msgspec.Struct, rerun: msgspec.Struct,
                ignored: frozenset[str] = _IGNORED_FIELDS) -> tuple[str, Any, Any] | None:
    for name in recorded.__struct_fields__:
        if name in ignored:
            continue
        a, b = getattr(recorded, name), getattr(rerun, name)
        if a is None and name in _LATER_FIELDS:
            continue
        if a != b:
            return name, a, b
    return None


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def refuse_other_vllm(name: str, recorded: str) -> None:
    """A recording's decisions are vLLM's for its release: re-running it on another release
    compares two schedulers, not the recording. Say which install would verify it."""
    from engine.adapters.versions import installed_version, release_for

    installed = installed_version()
    if release_for(recorded) == release_for(installed) and release_for(recorded) is not None:
        return
    if recorded.split("+")[0] == (installed or "").split("+")[0]:
        return
    release = release_for(recorded)
    fix = (f"verify it in an environment made with {release.install}" if release is not None
           else "no supported release can verify it")
    here = f"vLLM {installed}" if installed else "no vLLM"
    raise ConfigError(f"{name}: recorded with vLLM {recorded} and this environment has {here}: "
                      f"{fix}")


def rerun_spec(recording: Recording) -> Any:
    """The recording's re-run on the sim backend (engine.analysis.rerun: its own spec, or its
    requests), with recorded policy changes as toggles and a step limit that stops the re-run
    where the recording stopped (one step later for runs that ended on their own, so a re-run
    that would go on is caught)."""
    return rerun_plan_for(recording).spec


def rerun_plan_for(recording: Recording) -> Any:
    """rerun_spec's plan (engine.analysis.rerun.RerunPlan): the spec and the bursts."""
    from engine.analysis.rerun import rerun_plan

    header = recording.header
    name = recording.path
    refuse_other_vllm(name, header.vllm_version)
    if header.starts_at_step > 0:
        raise ConfigError(f"{name}: recording starts at step {header.starts_at_step} (switched on "
                          f"mid-run), so the run cannot be rebuilt from its header; record from "
                          f"the start to verify")
    if not recording.steps and recording.abort is None:
        raise ConfigError(f"{name}: holds no steps: nothing to verify")
    plan = rerun_plan(recording)
    if recording.abort is not None:
        max_steps = recording.abort.step + 1
    elif recording.finished is not None and recording.finished.reason == "completed":
        max_steps = len(recording.steps) + 1
    else:
        max_steps = len(recording.steps)
    plan.spec = msgspec.structs.replace(plan.spec, max_steps=max_steps)
    return plan


class _Checker:
    """Session sink: compares each re-run item with the recording as it arrives."""

    def __init__(self, recording: Recording, session: Any, progress: TextIO | None,
                 bursts: dict[int, list[int]]) -> None:
        self.recording = recording
        self.limit: int = session.spec.max_steps
        self.session = session
        self.progress = progress
        self.bursts = bursts
        self.arrivals = recording.arrivals
        self.changes = recording.policy_changes
        self.ignored = (_IGNORED_FIELDS | {"swap_blocks"} if predates_swap_blocks(recording.steps)
                        else _IGNORED_FIELDS)
        self.n_arrivals = 0
        self.n_changes = 0
        self.steps = 0
        self.abort: EngineAborted | None = None
        self.end: RunFinished | None = None
        self.failure: VerifyResult | None = None
        self._last_progress = time.monotonic()

    def fail(self, step: int | None, field: str | None, message: str) -> None:
        if self.failure is None:
            self.failure = VerifyResult(ok=False, message=message, steps_checked=self.steps,
                                        diff_step=step, diff_field=field)
            self.session.stop()

    def issue_bursts(self, step: int) -> None:
        for size in self.bursts.get(step, ()):
            self.session.add_burst(size, source="verify")

    def __call__(self, item: Header | Any) -> None:
        if self.failure is not None:
            return
        kind = type(item)
        if kind in STEP_TYPES:
            self.check_step(item)
            self.issue_bursts(item.step + 1)  # applied at the next boundary, before that step
        elif kind is Arrivals:
            self.check_event(item, self.arrivals, "n_arrivals", "arrivals")
        elif kind is PolicyChanged:
            self.check_event(item, self.changes, "n_changes", "policy change")
        elif kind is EngineAborted:
            self.check_abort(item)
        elif kind is RunFinished:
            self.end = item

    def check_step(self, step: StepRecord) -> None:
        recorded = self.recording.steps
        n = step.step
        if n >= len(recorded):
            abort = self.recording.abort
            if abort is not None and abort.step == n:
                self.fail(n, "abort", f"step {n}: the recording aborted here ({abort.message}), "
                                      f"the re-run completed the step")
            else:
                self.fail(n, None, f"step {n}: the re-run went on, the recording has "
                                   f"{len(recorded)} steps")
            return
        diff = _first_diff(recorded[n], step, self.ignored)
        if diff is not None:
            field, a, b = diff
            self.fail(n, field, f"step {n}: field {field} differs: recorded {_short(a)}, "
                                f"re-run {_short(b)}")
            return
        self.steps = n + 1
        if self.progress is not None and time.monotonic() - self._last_progress >= 1.0:
            self._last_progress = time.monotonic()
            self.progress.write(f"verify: step {n} of {len(recorded)} matches\n")
            self.progress.flush()

    def check_event(self, item: Any, recorded: list[Any], counter: str, what: str) -> None:
        i = getattr(self, counter)
        setattr(self, counter, i + 1)
        if i >= len(recorded):
            self.fail(item.step, what, f"step {item.step}: the re-run has a {what} the recording "
                                       f"lacks ({_short(item)})")
            return
        fields = (("step", "old", "new") if what == "policy change" else
                  ("step", "source", "request_ids", "prompt_tokens", "arrival_s", "sim_s", "n",
                   "max_tokens", "prefix"))
        for field in fields:
            a, b = getattr(recorded[i], field), getattr(item, field)
            if a is None and field in _LATER_ARRIVAL_FIELDS:
                continue
            if a != b:
                self.fail(item.step, f"{what}.{field}",
                          f"step {item.step}: {what} field {field} differs: recorded "
                          f"{_short(a)}, re-run {_short(b)}")
                return

    def check_abort(self, abort: EngineAborted) -> None:
        self.abort = abort
        recorded = self.recording.abort
        if recorded is None:
            self.fail(abort.step, "abort", f"step {abort.step}: the re-run aborted "
                                           f"({abort.message}), the recording did not")
            return
        diff = _first_diff(recorded, abort)
        if diff is not None:
            field, a, b = diff
            self.fail(abort.step, f"abort.{field}", f"step {abort.step}: abort field {field} "
                                                    f"differs: recorded {_short(a)}, re-run "
                                                    f"{_short(b)}")

    def result(self) -> VerifyResult:
        if self.failure is not None:
            return self.failure
        rec = self.recording
        if rec.abort is not None and self.abort is None:
            return VerifyResult(ok=False, steps_checked=self.steps, diff_step=rec.abort.step,
                                diff_field="abort",
                                message=f"step {rec.abort.step}: the recording aborted "
                                        f"({rec.abort.message}), the re-run did not")
        if self.steps < len(rec.steps):
            reason = self.end.reason if self.end else "?"
            return VerifyResult(ok=False, steps_checked=self.steps, diff_step=self.steps,
                                diff_field="steps",
                                message=f"step {self.steps}: the re-run ended ({reason}), the "
                                        f"recording has {len(rec.steps)} steps")
        # Events recorded at or after the step limit (a cut recording) are not re-run.
        expected = {what: sum(1 for e in events if e.step < self.limit)
                    for what, events in (("arrivals", self.arrivals),
                                         ("policy changes", self.changes))}
        missing = [what for what, seen in (("arrivals", self.n_arrivals),
                                           ("policy changes", self.n_changes))
                   if seen < expected[what]]
        if missing:
            return VerifyResult(ok=False, steps_checked=self.steps, diff_field=missing[0],
                                message=f"the re-run has fewer {missing[0]} than the recording")
        abort = f", abort at step {rec.abort.step} matches" if rec.abort else ""
        return VerifyResult(ok=True, steps_checked=self.steps,
                            message=f"{os.path.basename(rec.path)}: all {self.steps} steps "
                                    f"match{abort}")


def verify(recording: Recording, progress: TextIO | None = None) -> VerifyResult:
    """Re-run `recording` on the sim backend and compare; never raises for a mismatch."""
    plan = rerun_plan_for(recording)  # refuses what cannot be re-run before vLLM is imported
    from engine.session import Session  # imports vLLM: only verify pays for it

    session = Session(plan.spec)
    checker = _Checker(recording, session, progress, plan.bursts)
    session.subscribe(checker)
    session.prepare()
    checker.issue_bursts(0)
    session.run()
    return checker.result()


def verify_file(path: str, progress: TextIO | None = None) -> VerifyResult:
    """Load `path` strictly (a damaged file is a RecordingError, never a partial verify) and
    verify it; a cut or old (unchecked) file is verified as far as it goes, with a note."""
    from engine.stream.reader import notes

    recording = load(path)
    wrong = index_summary_disagrees(recording)
    if wrong is not None:
        raise RecordingError(f"{path}: {wrong}: the index is damaged or forged")
    if progress is not None:
        for note in notes(recording):
            progress.write(safe(note) + "\n")
    return verify(recording, progress)


def index_summary_disagrees(recording: Recording) -> str | None:
    """What the summary in the recorder's index says that the records do not, or None. (The
    reader holds the index's steps and frames to the file; this holds its summary, which
    `summary` prints without reading the records.)"""
    index = recording.index
    if index is None or index.summary is None:
        return None
    from engine.analysis.summary import LATER_SUMMARY_FIELDS, current_names, summarize

    sealed = current_names(index.summary)
    folded = msgspec.to_builtins(summarize(recording.all_items()))
    for name, value in folded.items():
        if name not in sealed and name in LATER_SUMMARY_FIELDS:
            continue  # sealed before the field existed
        if sealed.get(name) != value:
            return (f"the index's summary says {name} {_short(sealed.get(name))}, the "
                    f"records say {_short(value)}")
    if set(sealed) - set(folded):
        return "the index's summary has fields no summary has"
    tally = recording.tally
    if tally is not None and (tally.summary != index.summary or tally.steps != index.steps):
        return "the tally sealed with the records is not the records' summary"
    return None
