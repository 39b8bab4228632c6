"""The one time axis of a recording: simulated seconds for the sim, measured seconds on a GPU.

A sim run's wall clock says how fast a laptop ran a do-nothing executor, so its only meaningful
time is the cost model's (`sim_s`, `sim_step_s`). A gpu run's cost-model time is a guess next to
a measurement, so its meaningful time is measured: the session's wall clock (`wall_s`, which its
arrivals are paced by) for "when", and the CUDA-synchronised executor time (`exec_s`) for "how
long a step computed". Mixing the two is how a modelled number ends up on a chart as if it were
real, so every plot, table and export asks the header's axis (`Header.time_axis`) instead of
reading a time field itself, and labels its numbers with the axis' unit.

Recordings made before the header named an axis are on the simulated one (`Header.time_axis`
defaults to "sim"): that is what every reader showed for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.stream.records import EngineAborted, Header, StepRecord


@dataclass(frozen=True)
class TimeAxis:
    name: str  # "sim" or "gpu", as in Header.time_axis
    unit: str  # how labels name a second on this axis: "sim s" or "GPU s"
    description: str  # one phrase for titles and exports
    clock_field: str  # StepRecord field: seconds since the run started, at the end of the step
    step_field: str  # StepRecord field: the step's duration

    def clock(self, record: StepRecord | EngineAborted) -> float:
        """When `record` happened, in seconds on this axis."""
        return getattr(record, self.clock_field)

    def step_seconds(self, step: StepRecord) -> float:
        """How long `step` took on this axis."""
        return getattr(step, self.step_field)

    def label(self, what: str) -> str:
        """`what` qualified by the unit: label("TTFT mean s") -> "TTFT mean s (sim)"."""
        return f"{what} ({self.short})"

    @property
    def short(self) -> str:
        return self.unit.removesuffix(" s")


SIM = TimeAxis("sim", "sim s", "simulated time (cost model)", "sim_s", "sim_step_s")
GPU = TimeAxis("gpu", "GPU s", "measured time (CUDA-synchronised executor, wall clock)",
               "wall_s", "exec_s")
AXES = {axis.name: axis for axis in (SIM, GPU)}


def axis_named(name: str) -> TimeAxis:
    """The axis for a `Header.time_axis` value; unknown names (a newer writer) read as sim."""
    return AXES.get(name, SIM)


def axis_of(header: Header | None) -> TimeAxis:
    """The recording's axis (sim until a header says otherwise)."""
    return axis_named(header.time_axis) if header is not None else SIM
