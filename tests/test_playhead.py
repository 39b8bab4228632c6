"""The one playhead that replay, the A/B replay and sweep cells share: pure, no app, explicit
clock readings."""

from __future__ import annotations

import pytest

from engine.stream.reader import load
from tui.playhead import MAX_SPEED, MIN_SPEED, Playhead, StepPace, WallPace
from tui.replay.ab_timeline import Timeline, TimelinePace
from tui.run_view import RunView

from screens_harness import OFF, TOGGLED


def head(first: int = 0, last: int = 99, **state) -> Playhead:
    return Playhead(StepPace(10.0), first, last, first, **state)


def test_play_advances_at_the_pace_times_the_speed_and_stops_at_the_end():
    h = head(speed=2.0)
    h.toggle(now=0.0)
    assert h.playing
    assert h.tick(now=1.0) and h.position == 20  # 10 steps/s at 2x for 1 s
    h.tick(now=1.02)  # under a step: it does not move yet, and the fraction is kept
    assert h.position == 20
    h.tick(now=1.07)
    assert h.position == 21
    assert h.tick(now=100.0) and h.position == 99 and not h.playing  # ended: stops


def test_pause_holds_the_position_whatever_the_clock_does():
    h = head()
    h.toggle(now=0.0)
    h.tick(now=1.0)
    h.toggle(now=1.0)
    assert not h.playing
    assert not h.tick(now=50.0) and h.position == 10


def test_play_at_the_end_starts_again_and_speed_is_bounded():
    h = head()
    h.seek(99)
    h.toggle(now=0.0)
    assert h.playing and h.position == 0
    for _ in range(20):
        h.scale_speed(2)
    assert h.speed == MAX_SPEED
    for _ in range(20):
        h.scale_speed(0.5)
    assert h.speed == MIN_SPEED


def test_moves_clamp_and_stop_playing():
    h = head(first=5, last=50)
    h.toggle(now=0.0)
    h.step(-100)
    assert (h.position, h.playing) == (5, False)
    h.step(+100)
    assert h.position == 50
    h.start()
    assert h.position == 5
    h.seek(30)
    h.toggle(now=0.0)
    h.go(7)
    assert (h.position, h.playing) == (7, False)


def test_following_holds_the_newest_position_until_a_move():
    h = head(last=10, following=True, ended=False)
    assert h.position == 10
    h.extend(0, 25)
    assert h.position == 25 and h.following
    h.step(-5)
    assert h.position == 20 and not h.following
    h.extend(0, 40)  # more arrives: a user who moved back stays where they are
    assert h.position == 20
    h.end()  # the end of a run that is still growing: follow again
    assert h.following and h.position == 40
    assert not h.tick(now=5.0)  # following is not playing
    h.toggle(now=5.0)  # play from the newest position on
    assert h.playing and not h.following and h.position == 40


def test_end_of_a_finished_run_is_its_last_position():
    h = head(ended=True)
    h.end()
    assert h.position == 99 and not h.following


def test_jumps_go_to_what_the_finder_says():
    events = {20: "policy → strict", 60: "abort"}

    def find(position: int, direction: int):
        ahead = sorted(p for p in events if (p > position if direction > 0 else p < position))
        if not ahead:
            return None
        p = ahead[0] if direction > 0 else ahead[-1]
        return p, events[p]

    h = head()
    h.toggle(now=0.0)
    assert h.jump(1, find) == "policy → strict" and h.position == 20 and not h.playing
    assert h.jump(1, find) == "abort" and h.position == 60
    assert h.jump(1, find) is None and h.position == 60
    assert h.jump(-1, find) == "policy → strict" and h.position == 20


def test_wall_pace_plays_a_recording_at_its_recorded_speed():
    view = load(str(OFF), into=RunView)
    h = Playhead(WallPace(view), view.first_step, view.last_step, view.first_step)
    h.toggle(now=0.0)
    h.tick(now=1.0)  # one recorded wall-clock second
    assert view.wall_of(h.position) <= view.wall_of(view.first_step) + 1.0 \
        < view.wall_of(h.position + 1)


def test_timeline_pace_plays_steps_or_simulated_time():
    views = [load(str(OFF), into=RunView), load(str(TOGGLED), into=RunView)]
    steps = Timeline(views, "step")
    h = Playhead(TimelinePace(steps, 60.0), 0, len(steps) - 1)
    h.toggle(now=0.0)
    h.tick(now=0.5)
    assert h.position == 30  # 60 steps a second at 1x
    times = Timeline(views, "time")
    h.retime(TimelinePace(times, 60.0), times.index_of_step(0, steps.step_at(0, h.position)))
    start_ms = times.positions[h.position]
    h.toggle(now=0.0)
    h.toggle(now=0.0)
    assert h.playing
    h.tick(now=0.25)  # a quarter of a simulated second
    assert times.positions[h.position] <= start_ms + 250.0 < times.positions[h.position + 1]


@pytest.mark.parametrize("speed", [0.1, 1000.0])
def test_a_speed_out_of_bounds_is_clamped(speed):
    assert MIN_SPEED <= head(speed=speed).speed <= MAX_SPEED
