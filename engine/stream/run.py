"""The index of one run: the one place that knows "what has this run recorded so far".

A recording loads into a `Run` (`engine.stream.reader.load`); a follower, a live engine stream
and a replay all append to one as records arrive. Everything that reads a run (summary, compare,
export, verify, every TUI widget) reads it from here, so there is one index, built once:

- step N in O(1) (`step`, `get`), even across a gap left by a lenient read;
- the steps at which each kind of thing happened (`step_kinds`), for "jump to the next swap-out";
- display events (`log`: one line each, for an event log and for n/N jumps);
- per-step columns, extended lazily in bulk (`column`), and downsampled windows of them for
  plots (`series`), cached for closed ranges so moving a replay cursor costs nothing.

It needs only msgspec (and numpy, imported on the first plot series): loading a recording never
imports vLLM or torch, and `summary`, `verify` or `export` do not pay numpy's import either.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal

import msgspec

from engine.adapters.setup_lines import setup_line
from engine.conventions import counted, pct_text, request_ids
from engine.kinds import kind_of
from engine.stream.records import (Arrivals, EngineAborted, Header, Index, LogLine, measured,
                                   PolicyChanged, Record, RunFinished, StepRecord, Tally,
                                   V1StepRecord)
from engine.stream.timeaxis import axis_of

if TYPE_CHECKING:
    import numpy as np

# ---- kinds of happenings --------------------------------------------------------------------

STEP_KINDS: dict[str, str] = {
    "swap_out": "swapped_out",
    "swap_in": "swapped_in",
    "recompute": "recomputed",
    "ignored": "ignored",
    "withheld": "withheld",
}
"""Steps where something happened, by name: the StepRecord field that is non-empty (or true)
at such a step."""
_step_flags = attrgetter(*STEP_KINDS.values())  # all five in one C call: indexing is hot


def record_kind(item: Record) -> str:
    """The `kind` tag a record carries in a file ("policy", "abort", "log", ...)."""
    return type(item).__struct_config__.tag  # type: ignore[attr-defined]


def _numeric_columns() -> dict[str, Callable[[StepRecord], float]]:
    getters: dict[str, Callable[[StepRecord], float]] = {}
    # V0's fields, then V1's own (recomputed_tokens, preemptions_total...): a V1 column is
    # asked only of a V1 run, whose records also answer V0's names (as V1 has them)
    for struct in (StepRecord, V1StepRecord):
        for field in msgspec.structs.fields(struct):
            base = getattr(field.type, "__origin__", field.type)  # Annotated[int, Meta] -> int
            if base in (int, float, bool) and field.name not in getters:
                getters[field.name] = attrgetter(field.name)
    getters.update({
        "gpu_pct": attrgetter("gpu_pct"),
        "cpu_pct": attrgetter("cpu_pct"),
        "prefill_tokens": lambda s: sum(t for _, t in s.prefills),
        "n_prefills": lambda s: len(s.prefills),
        "n_swapped_out": lambda s: len(s.swapped_out),
        "n_swapped_in": lambda s: len(s.swapped_in),
        "n_recomputed": lambda s: len(s.recomputed),
        "n_finished": lambda s: len(s.finished),
        "n_first_tokens": lambda s: len(s.first_tokens),
        # the committed demand over GPU + CPU blocks, a ratio (engine.conventions: it passes
        # 1, where the swap space can run out, so it is no percentage); 0 in recordings made
        # before it was recorded
        "committed_x": lambda s: (s.committed_blocks / s.capacity_blocks
                                  if s.committed_blocks is not None and s.capacity_blocks
                                  else 0.0),
    })
    return getters


COLUMNS: dict[str, Callable[[StepRecord], float]] = _numeric_columns()
"""Names `Run.column()` accepts: every numeric StepRecord field plus a few derived ones."""

TPS_COLUMNS = {"prompt_tps": "prompt_tokens", "gen_tps": "generated_tokens",
               "recomputed_tps": "recomputed_tokens"}
"""The rate series and the token column each is a rate of (recomputed: V1 only)."""

SERIES = ("gpu_pct", "cpu_pct", "committed_x", "running", "swapped", "waiting", "prompt_tps",
          "gen_tps", "n_recomputed", "recomputed_tps", "preemptions_total", "recompute_pct")
"""Names `Run.series()` accepts. The *_tps ones are tokens per second of the run's time axis
(engine.stream.timeaxis: simulated on the sim, measured executor time on a GPU). `n_recomputed` is
the step's preemptions by recompute (V1's only kind), `preemptions_total` V1's so far;
`recomputed_tps` V1's tokens computed again; `recompute_pct` the share of each bin's computed
tokens that were computed again (V1's recompute tax, per bin rather than so far)."""

ABORT_KNOWN = frozenset({
    "step", "wall_s", "sim_s", "sim_step_s", "policy", "running", "swapped", "waiting",
    "gpu_used", "gpu_total", "cpu_used", "cpu_total", "gpu_pct", "cpu_pct", "committed_blocks",
    "committed_slack", "token_budget", "finished_total", "computed_total", "recomputed_total",
    "preemptions_total", "cpu_chunks", "cpu_chunks_total"})
"""The fields the aborting step's record (`Run.aborting_step`) states: the abort's clock,
queues and blocks, and what carries over from the step before (the policy, the budget, the
committed demand, the running totals). The rest are decisions vLLM never returned: `export`
leaves them blank."""

# ---- display events -------------------------------------------------------------------------

EventKind = Literal["policy", "swapout", "abort", "log", "burst", "finished", "notice", "error"]
JUMP_KINDS: tuple[str, ...] = ("policy", "swapout", "abort", "error")
"""The display events that n/N jump between."""

SWAPOUT_QUIET_STEPS = 20
"""A swap-out starts a new "burst" event after this many steps without one, so a run that swaps
on every step for a while shows one event, not hundreds."""


@dataclass(frozen=True)
class Event:
    """Something worth a line in an event log (and, for JUMP_KINDS, a place to jump to)."""

    step: int
    kind: str  # an EventKind
    text: str
    level: str = "info"  # "info" | "warning" | "error"


def _describe(item: Record, last_step: int, engine: str = "v0") -> Event | None:
    """The display event a record stands for, if any (steps are handled by `_add_step`), in
    the vocabulary of the `engine` kind that made it (V1 has no swap space)."""
    if isinstance(item, PolicyChanged):
        return Event(item.step, "policy", f"policy {item.old} → {item.new} from step "
                                          f"{item.step} (source {item.source})")
    if isinstance(item, EngineAborted):
        state = (f"running {item.running}, waiting {item.waiting}, GPU KV "
                 f"{pct_text(item.gpu_pct)}%" if not kind_of(engine).swaps
                 else f"swapped {item.swapped}, CPU KV {pct_text(item.cpu_pct)}%")
        return Event(item.step, "abort", f"ABORTED at step {item.step}: {item.error}: "
                                         f"{item.message} ({state})", "error")
    if isinstance(item, LogLine):
        repeats = f" (×{item.repeats:,})" if item.repeats > 1 else ""
        level = {"WARNING": "warning", "ERROR": "error", "CRITICAL": "error"}.get(item.level,
                                                                                 "info")
        if level == "warning" and setup_line(item.logger, item.message) is not None:
            level = "info"  # the observatory's own setup made vLLM say it: shown with INFO
        return Event(item.step, "log", f"vLLM {item.level} {item.logger}: {item.message}"
                                       f"{repeats}", level)
    if isinstance(item, Arrivals):
        if item.source == "workload":
            return None
        return Event(item.step, "burst", f"{len(item.request_ids)} requests added "
                                         f"({item.source})")
    step = getattr(item, "step", last_step)
    if record_kind(item) == "observer_error":  # the observatory's own bug, not vLLM's
        return Event(step, "error", f"OBSERVATORY ERROR at step {step} in "
                                    f"{getattr(item, 'where', '?')}: {getattr(item, 'error', '')}"
                                    f": {getattr(item, 'message', '')} (a bug in the "
                                    f"observatory, not vLLM)", "error")
    return None


def _preemptions_text(s: StepRecord | V1StepRecord) -> str:
    """The event that opens a run of preemptions: what this step preempted, by id (a request
    id is a name: engine.conventions), and where the queues stood. The next such event comes
    only after SWAPOUT_QUIET_STEPS steps without one."""
    what = []
    if s.swapped_out:
        what.append(f"{counted(len(s.swapped_out), 'group')} swapped out "
                    f"({request_ids(s.swapped_out, 5)})")
    if s.recomputed:
        what.append(f"{counted(len(s.recomputed), 'request')} preempted for recompute "
                    f"({request_ids(s.recomputed, 5)})")
    where = (f"GPU KV {pct_text(s.gpu_pct)}%, {s.waiting:,} waiting" if type(s) is V1StepRecord
             else f"swapped {s.swapped}, CPU KV {pct_text(s.cpu_pct)}%")
    return f"preemptions begin: {', '.join(what)}; {where}"


# ---- the index ------------------------------------------------------------------------------

class Run:
    """All records of one run seen so far, indexed as they arrive."""

    def __init__(self, header: Header | None = None, path: str = "<memory>") -> None:
        self.path = path
        self.header = header
        self.items: list[Record] = []  # every record after the header, in order
        self.steps: list[StepRecord] = []  # index = step - first_step (gaps are bridged)
        self.log: list[Event] = []  # display events, in stream order
        self.abort: EngineAborted | None = None
        self.finished: RunFinished | None = None
        # What a reader found (engine.stream.reader.checked; engine.stream.reader.notes says it):
        self.truncated = False  # the file is cut: it ends without the recorder's closing mark
        self.cut_note = ""  # where it is cut and what was dropped, one phrase
        self.skipped_lines = 0  # lines skipped by a lenient read of a damaged file
        self.problem_count = 0  # violations a lenient read skipped
        self.problems: list[str] = []  # the first few, one line each ("line 12: ...")
        self.unchecked = False  # written before Check lines existed: flips are undetectable
        self.missing: set[int] = set()  # steps absent from the stream, held as repeats (_bridge)
        self.index: Index | None = None  # the recorder's index, if the file ends with one
        self.tally: Tally | None = None  # the recorder's summary, sealed in the last data frame
        self.version = 0  # bumped on every change, so a widget can skip a redundant redraw
        self._by_kind: dict[str, list[Record]] = {}
        self._kind_steps: dict[str, list[int]] = {k: [] for k in STEP_KINDS}
        self._log_steps: list[int] = []
        self._last_swapout: int | None = None
        self._columns: dict[str, list[float]] = {}
        self._windows: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._floats: dict[str, tuple[np.ndarray, int]] = {}  # column -> (buffer, filled)
        self._aborting: tuple[tuple[int, int], StepRecord | V1StepRecord] | None = None

    # -- building -------------------------------------------------------------------------

    @classmethod
    def from_items(cls, items: Iterable[Header | Record], path: str = "<memory>") -> "Run":
        run = cls(path=path)
        run.extend(items)
        return run

    def extend(self, items: Iterable[Header | Record]) -> None:
        add = self.add
        for item in items:
            add(item)

    def add(self, item: Header | Record) -> None:
        """Take the next item of a stream or recording (a Header is kept, not indexed)."""
        self.version += 1
        if type(item) is StepRecord or type(item) is V1StepRecord:
            self._add_step(item)
            self.items.append(item)
            return
        if isinstance(item, Header):
            if self.header is None:
                self.header = item
            return
        self.items.append(item)
        kind = record_kind(item)
        self._by_kind.setdefault(kind, []).append(item)
        self._kind_steps.setdefault(kind, []).append(getattr(item, "step", self.last_step))
        if type(item) is EngineAborted:
            self.abort = item
        elif type(item) is RunFinished:
            self.finished = item
        if type(item) is RunFinished:
            event = self._finished_event(item)
        else:
            event = _describe(item, self.last_step,
                              self.header.engine if self.header is not None else "v0")
        if event is not None:
            self._event(event)

    append = add  # the name a list-like builder expects

    def _finished_event(self, item: RunFinished) -> Event:
        """"run finished: completed; steps 0–9,530 completed": the range names the last step
        and the count at once (engine.conventions), at the step that raised if vLLM aborted."""
        steps = self.steps
        done = (f"steps {steps[0].step:,}–{steps[-1].step:,} completed" if steps
                else "no step completed")
        at = steps[-1].step if steps else self.first_step
        if self.abort is not None:
            at = max(at, self.abort.step)
        return Event(at, "finished", f"run finished: {item.reason}; {done}",
                     "error" if item.reason == "aborted" else "info")

    def notice(self, text: str, level: str = "info") -> None:
        """An event from outside the stream (a UI notice), logged at the newest step."""
        self.version += 1
        self._event(Event(self.last_step, "notice", text, level))

    def _event(self, event: Event) -> None:
        self.log.append(event)
        self._log_steps.append(event.step)

    def _add_step(self, s: StepRecord) -> None:
        steps = self.steps
        if steps and s.step != steps[-1].step + 1:
            if not self._bridge(s):
                return
        steps.append(s)
        if not (s.swapped_out or s.swapped_in or s.recomputed or s.ignored or s.withheld):
            return  # most steps: nothing to index (checked field by field: no tuple built)
        flags = _step_flags(s)
        kind_steps = self._kind_steps
        for kind, flag in zip(STEP_KINDS, flags):
            if flag:
                kind_steps[kind].append(s.step)
        if s.swapped_out or s.recomputed:
            if self._last_swapout is None or s.step - self._last_swapout > SWAPOUT_QUIET_STEPS:
                self._event(Event(s.step, "swapout", _preemptions_text(s), "warning"))
            self._last_swapout = s.step

    def _bridge(self, s: StepRecord) -> bool:
        """Steps are contiguous by contract; a lenient read of a damaged file can skip some.
        Keep step N at index N - first_step by repeating the last step over the gap, and say
        so, rather than show steps at the wrong place. False: drop `s` (it came again)."""
        last = self.steps[-1]
        if s.step <= last.step:
            self._event(Event(last.step, "notice", f"step {s.step} arrived again after step "
                                                   f"{last.step}; ignored", "warning"))
            return False
        self._event(Event(last.step + 1, "notice", f"steps {last.step + 1}–{s.step - 1} are "
                                                   f"missing from the stream; shown as "
                                                   f"repeats of step {last.step}", "warning"))
        self.steps.extend(msgspec.structs.replace(last, step=n)
                          for n in range(last.step + 1, s.step))
        self.missing.update(range(last.step + 1, s.step))
        return True

    # -- random access --------------------------------------------------------------------

    def __len__(self) -> int:
        """Steps the stream actually held (repeats standing in for missing ones not counted)."""
        return len(self.steps) - len(self.missing)

    @property
    def engine(self) -> str:
        """The engine kind that made the run (Header.engine): "v0" until a header says."""
        return self.header.engine if self.header is not None else "v0"

    @property
    def first_step(self) -> int:
        if self.steps:
            return self.steps[0].step
        return self.header.starts_at_step if self.header is not None else 0

    @property
    def last_step(self) -> int:
        return self.steps[-1].step if self.steps else self.first_step

    def get(self, n: int) -> StepRecord | None:
        """What to show for step `n` (a repeat of the step before, if `n` is missing), or None
        if it is outside the run."""
        i = n - self.first_step
        return self.steps[i] if 0 <= i < len(self.steps) else None

    def step(self, n: int) -> StepRecord:
        """The recorded step `n`; IndexError if the run does not hold it (or it is missing)."""
        s = self.get(n)
        if s is None or n in self.missing:
            raise IndexError(f"step {n} is not in {self.path} (it holds steps "
                             f"{self.first_step}..{self.last_step})")
        return s

    def clamp(self, n: int) -> int:
        return max(self.first_step, min(self.last_step, n))

    def aborting_step(self) -> StepRecord | V1StepRecord | None:
        """The step vLLM raised in, as the screens and `export` show it (engine.conventions):
        the abort's step number, clock, queues and blocks, the running totals so far, and no
        decisions (vLLM never returned them; ABORT_KNOWN names what it does state). None when
        the run did not abort, or aborted before any step it holds (nothing to carry the
        totals from)."""
        abort = self.abort
        if abort is None or not self.steps or abort.step <= self.steps[-1].step:
            return None
        last = self.steps[-1]
        key = (id(abort), id(last))
        if self._aborting is not None and self._aborting[0] == key:
            return self._aborting[1]
        state = dict(step=abort.step, wall_s=max(measured(abort.wall_s), last.wall_s),
                     sim_s=max(abort.sim_s, last.sim_s), sim_step_s=0.0, exec_s=0.0,
                     running=abort.running, waiting=abort.waiting, gpu_used=abort.gpu_used,
                     gpu_total=abort.gpu_total, batched_tokens=0, prompt_tokens=0,
                     generated_tokens=0, finished=[], first_tokens=[], withheld=False,
                     held_back=0)
        if type(last) is V1StepRecord:
            state.update(new=[], resumed=[], scheduled=[], preempted=[], prefix_hit_tokens=0,
                         recomputed_tokens=0, decode_reqs=0, cpu_chunks=abort.cpu_used,
                         cpu_loads=0, cpu_load_bytes=0, cpu_stores=0, cpu_store_bytes=0,
                         cpu_evictions=0, cpu_hit_tokens=0, cpu_in_flight=0, cpu_wait_s=0.0,
                         waiting_by_reason=None, head_reason=None, head_need=None,
                         head_limit=None)
        else:
            state.update(swapped=abort.swapped, cpu_used=abort.cpu_used,
                         cpu_total=abort.cpu_total, prefills=[], decode_groups=0,
                         decode_seqs=0, swapped_out=[], swapped_in=[], recomputed=[],
                         ignored=[], swapped_out_seqs=None, swapped_in_seqs=None,
                         swap_blocks=0)
        record = msgspec.structs.replace(last, **state)
        self._aborting = (key, record)
        return record

    def records(self, kind: str) -> list[Any]:
        """Records of one kind ("policy", "arrivals", "log", ...), in order."""
        return list(self._by_kind.get(kind, ()))

    @property
    def policy_changes(self) -> list[PolicyChanged]:
        return self._by_kind.setdefault("policy", [])  # type: ignore[return-value]

    @property
    def arrivals(self) -> list[Arrivals]:
        return self._by_kind.setdefault("arrivals", [])  # type: ignore[return-value]

    def steps_of(self, kind: str) -> list[int]:
        """Steps at which `kind` happened: a STEP_KINDS name or a record kind."""
        if kind not in self._kind_steps and kind not in STEP_KINDS:
            known = sorted({*STEP_KINDS, *self._kind_steps})
            raise KeyError(f"unknown kind {kind!r}; known here: {', '.join(known)}")
        return self._kind_steps.get(kind, [])

    def next_step_of(self, kind: str, step: int) -> int | None:
        """The first step after `step` at which `kind` happened, or None."""
        steps = self.steps_of(kind)
        i = bisect.bisect_right(steps, step)
        return steps[i] if i < len(steps) else None

    def prev_step_of(self, kind: str, step: int) -> int | None:
        """The last step before `step` at which `kind` happened, or None."""
        steps = self.steps_of(kind)
        i = bisect.bisect_left(steps, step)
        return steps[i - 1] if i > 0 else None

    def all_items(self) -> list[Header | Record]:
        """Header then records: what a session's subscriber saw (e.g. for summarize())."""
        return [self.header, *self.items] if self.header is not None else list(self.items)

    # -- display events ---------------------------------------------------------------------

    def events_until(self, step: int | None, limit: int) -> list[Event]:
        """The last `limit` display events at or before `step` (None: the newest ones)."""
        end = len(self.log) if step is None else bisect.bisect_right(self._log_steps, step)
        return self.log[max(0, end - limit):end]

    def next_event(self, step: int, kinds: tuple[str, ...] = JUMP_KINDS) -> Event | None:
        for event in self.log[bisect.bisect_right(self._log_steps, step):]:
            if event.kind in kinds:
                return event
        return None

    def prev_event(self, step: int, kinds: tuple[str, ...] = JUMP_KINDS) -> Event | None:
        for event in reversed(self.log[:bisect.bisect_left(self._log_steps, step)]):
            if event.kind in kinds:
                return event
        return None

    # -- time -------------------------------------------------------------------------------

    def step_at_wall(self, wall_s: float) -> int:
        """The last step that had ended by `wall_s` (a replay's 1x pace is the recorded one)."""
        index = bisect.bisect_right(self.column("wall_s"), wall_s) - 1
        return self.first_step + max(0, index)

    def wall_of(self, step: int) -> float:
        s = self.get(step)
        return s.wall_s if s is not None else 0.0

    # -- columns and plot series ------------------------------------------------------------

    def column(self, name: str) -> list[float]:
        """One value per held step (a StepRecord field or a derived count), kept current."""
        getter = COLUMNS.get(name)
        if getter is None:
            raise KeyError(f"unknown column {name!r}; known: {', '.join(COLUMNS)}")
        values = self._columns.setdefault(name, [])
        if len(values) < len(self.steps):
            values.extend(map(getter, self.steps[len(values):]))
        return values

    def floats(self, name: str) -> np.ndarray:
        """A column as a compact float array, one entry per held step: what plots read. It
        grows in place (capacity doubles), so a live run's next step costs one entry, not a
        copy of the run."""
        import numpy as np

        values = self.column(name)
        buffer, filled = self._floats.get(name, (None, 0))
        n = len(values)
        if buffer is None or filled < n:
            if buffer is None or len(buffer) < n:
                grown = np.empty(max(1024, 2 * n), dtype=float)
                if buffer is not None:
                    grown[:filled] = buffer[:filled]
                buffer = grown
            buffer[filled:n] = values[filled:]
            self._floats[name] = (buffer, n)
        return buffer[:n]

    def prepare_plots(self, pause: Callable[[], None] | None = None) -> None:
        """Build every plot series' columns now: a background loader calls this so that the
        screen's first plot of a long run walks no records. `pause` is called before each
        series (~15 ms of work on 100,000 steps), where a background loader waits for the UI."""
        for name in SERIES:
            if pause is not None:
                pause()
            try:
                self.series(name, self.first_step, self.last_step, 1)
            except (AttributeError, KeyError):  # a series this run's records do not have
                pass

    def _array(self, name: str, a: int, b: int) -> np.ndarray:
        """Held steps a..b-1 of a column as floats. Percentages are computed from the block
        counts in bulk: a Python property call per step costs more than the rest of a plot."""
        import numpy as np

        if name in ("gpu_pct", "cpu_pct"):
            prefix = name[:3]
            used = self.floats(prefix + "_used")[a:b]
            total = self.floats(prefix + "_total")[a:b]
            return np.divide(100.0 * used, total, out=np.zeros_like(used), where=total > 0)
        return self.floats(name)[a:b]

    def series(self, name: str, lo: int, hi: int, points: int) -> tuple[np.ndarray, np.ndarray]:
        """Steps lo..hi (inclusive) of one plot series, downsampled to at most `points` points.

        Each point covers a bin of steps: counts and percentages take the bin's maximum (so a
        peak right before the abort is not averaged away), token rates are the bin's tokens
        over its simulated seconds. Closed ranges are cached.
        """
        import numpy as np

        if name not in SERIES:
            raise KeyError(f"unknown series {name!r}; known: {', '.join(SERIES)}")
        first = self.first_step
        a, b = max(0, lo - first), min(len(self.steps), hi - first + 1)
        if b <= a:
            return np.empty(0), np.empty(0)
        points = max(1, points)
        key = (name, a, b, points)
        cached = self._windows.get(key)
        if cached is not None:
            return cached
        n = b - a
        size = -(-n // points)  # ceil
        nbins = -(-n // size)
        pad = nbins * size - n
        xs = np.arange(a, b, size, dtype=float) + first
        if name == "recompute_pct":
            again = self.floats("recomputed_tokens")[a:b]
            computed = self.floats("batched_tokens")[a:b]
            if pad:
                again = np.concatenate([again, np.zeros(pad)])
                computed = np.concatenate([computed, np.zeros(pad)])
            t = again.reshape(nbins, size).sum(axis=1)
            c = computed.reshape(nbins, size).sum(axis=1)
            ys = np.divide(100.0 * t, c, out=np.zeros_like(t), where=c > 0)
        elif name.endswith("_tps"):
            tokens = self.floats(TPS_COLUMNS[name])[a:b]
            secs = self.floats(axis_of(self.header).step_field)[a:b]
            if pad:
                tokens = np.concatenate([tokens, np.zeros(pad)])
                secs = np.concatenate([secs, np.zeros(pad)])
            t = tokens.reshape(nbins, size).sum(axis=1)
            s = secs.reshape(nbins, size).sum(axis=1)
            ys = np.divide(t, s, out=np.zeros_like(t), where=s > 0)
        else:
            values = self._array(name, a, b)
            if pad:
                values = np.concatenate([values, np.full(pad, values[-1])])
            ys = values.reshape(nbins, size).max(axis=1)
        if len(self._windows) > 64:
            self._windows.clear()
        self._windows[key] = (xs, ys)
        return xs, ys


Recording = Run
"""The name the recording commands use for a loaded run."""
