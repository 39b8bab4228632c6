"""engine.kinds: the two engine kinds, looked up by the Header's name (issue #41 item 3)."""

from __future__ import annotations

from engine.kinds import KINDS, V0, V1, common_kind, kind_of, newest_of
from engine.stream.records import ENGINE_KINDS


def test_every_kind_a_header_can_name_is_a_kind():
    assert tuple(kind.name for kind in KINDS) == ENGINE_KINDS


def test_a_name_that_is_no_kind_is_v0_as_the_headers_default():
    assert kind_of("v1") is V1 and kind_of("v0") is V0
    assert kind_of(None) is V0 and kind_of("") is V0 and kind_of("v9") is V0


def test_rows_with_any_v1_row_read_as_v1():
    assert newest_of(["v0", None, "v1"]) is V1
    assert newest_of(["v0", "v0"]) is V0 and newest_of([]) is V0


def test_the_common_kind_is_none_when_runs_differ():
    assert common_kind(["v1", "v1"]) is V1
    assert common_kind(["v0", "v1"]) is None and common_kind([]) is None


def test_the_kinds_answer_their_differences():
    assert V0.swaps and not V1.swaps
    assert V1.watches_stalls and not V0.watches_stalls
    assert (V0.default_preset, V1.default_preset) == ("seed-5578", "v1-thrash")
