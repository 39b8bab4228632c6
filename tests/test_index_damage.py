"""The index is a cache, never the truth (issue 31): damaged and forged indexes, resealed with
their checksums recomputed, make `summary`, `export` and `replay` print the records' numbers
(with a one-line warning) or refuse in one line with exit 2, and `verify` refuse; never the
index's numbers. Each damage is done to a plain and a zstd recording, written by the real
Recorder from a shipped run."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Callable

import msgspec
import pytest
import zstandard

from engine.analysis.summary import SummaryBuilder, summarize
from engine.cli.registry import main
from engine.stream.reader import RecordingError, load, open_indexed, vouch
from engine.stream.recorder import Recorder
from engine.stream.records import Index, Tally, encode
from shipped import shipped

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"off": ROOT / "recordings" / "seed-5578-off.jsonl.zst",  # aborts at step 805
           "strict": ROOT / "recordings" / "seed-5578-strict.jsonl.zst"}  # finishes
FRAME = 1 << 15  # small frames, so a run has dozens


def record(source: Path, target: Path) -> None:
    run = load(source)
    with Recorder(target, run.header, background_flush=False, frame_bytes=FRAME,
                  fold=SummaryBuilder) as rec:
        for item in run.items:
            rec.write(item)
    assert rec.error is None


# ---- taking a file apart and putting it back, checksums recomputed -------------------------

def _zst(text: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_checksum=True).compress(text)


def _unzst(data: bytes) -> bytes:
    obj = zstandard.ZstdDecompressor().decompressobj()
    return obj.decompress(data)


class Parts:
    """A closed recording as (everything before its last data frame, that frame's text, the
    index line, the final Check line); `join` reseals what was changed."""

    def __init__(self, path: Path) -> None:
        self.zst = path.name.endswith(".zst")
        data = path.read_bytes()
        indexed = open_indexed(path)
        assert indexed is not None
        index = indexed.index
        self.index: Index = index
        last = index.frames[-1][0]
        self.head = data[:last]
        body = data[last:index.index_offset]
        self.body = body  # as written: an unchanged frame is not recompressed
        self.frame = _unzst(body) if self.zst else body
        tail = data[index.index_offset:]
        lines = (_unzst(tail) if self.zst else tail).split(b"\n")
        self.check = msgspec.json.decode(lines[1])
        lines = self.frame.split(b"\n")
        self.tally = msgspec.json.decode(lines[-3], type=Tally)  # tally, its Check, ""
        self.tally_check = msgspec.json.decode(lines[-2])

    def join(self, reseal_frame: bool = False) -> bytes:
        frame = self.frame
        if reseal_frame:  # the tally's block: the tally line alone (the recorder's close)
            lines = frame.split(b"\n")
            tally = encode(self.tally) + b"\n"
            check = dict(self.tally_check, crc=zlib.crc32(tally))
            lines[-3], lines[-2] = tally[:-1], msgspec.json.encode(check)
            frame = b"\n".join(lines)
        body = self.body if frame is self.frame else _zst(frame) if self.zst else frame
        index = msgspec.structs.replace(self.index, index_offset=len(self.head) + len(body))
        line = encode(index) + b"\n"
        check = dict(self.check, crc=zlib.crc32(line))
        tail = line + msgspec.json.encode(check) + b"\n"
        return self.head + body + (_zst(tail) if self.zst else tail)


def forge_summary(parts: Parts, **fields) -> None:
    parts.index = msgspec.structs.replace(parts.index, summary={**parts.index.summary, **fields})


Damage = Callable[[Path, Path], bytes]


def _resealed(change: Callable[[Parts], None], reseal_frame: bool = False) -> Damage:
    def damage(path: Path, _other: Path) -> bytes:
        parts = Parts(path)
        change(parts)
        return parts.join(reseal_frame)
    return damage


def _swap_outs(parts: Parts) -> None:
    forge_summary(parts, swap_outs=parts.index.summary["swap_outs"] + 1000)


def _aborted(parts: Parts) -> None:
    forge_summary(parts, aborted=not parts.index.summary["aborted"], abort_step=None,
                  abort_reason=None)


def _steps(parts: Parts) -> None:
    forge_summary(parts, steps=parts.index.summary["steps"] + 5)
    parts.index = msgspec.structs.replace(parts.index, steps=parts.index.steps + 5)


def _last_step(parts: Parts) -> None:
    parts.index = msgspec.structs.replace(parts.index, last_step=parts.index.last_step + 5)


def _finished(parts: Parts) -> None:
    parts.index = msgspec.structs.replace(parts.index, finished=not parts.index.finished)


def _first_of_last_frame(parts: Parts) -> None:
    frames = list(parts.index.frames)
    frames[-1] = (frames[-1][0], frames[-1][1] + 3)
    parts.index = msgspec.structs.replace(parts.index, frames=frames)


def _offsets(parts: Parts) -> None:
    frames = list(parts.index.frames)
    frames[-1] = (frames[-1][0] + 7, frames[-1][1])
    parts.index = msgspec.structs.replace(parts.index, frames=frames)


def _offsets_dropped(parts: Parts) -> None:
    parts.index = msgspec.structs.replace(parts.index, frames=parts.index.frames[:-1])


def _end_reason(parts: Parts) -> None:
    forge_summary(parts, end_reason="forged", sim_seconds=1.0)


def _peak(parts: Parts) -> None:
    forge_summary(parts, peak_gpu_kv_pct=1.0, generated_tokens=0)


def _extra_field(parts: Parts) -> None:
    forge_summary(parts, forged_field=1)


def _tally_and_index(parts: Parts) -> None:  # the forger also rewrites the tally's frame
    _swap_outs(parts)
    parts.tally = Tally(steps=parts.tally.steps, summary=parts.index.summary)


def _truncated_index(path: Path, _other: Path) -> bytes:
    data = path.read_bytes()
    return data[:-20]


def _second_index(path: Path, _other: Path) -> bytes:
    """A second index frame after the first, saying 5 more steps, pointing at itself."""
    data = path.read_bytes()
    parts = Parts(path)
    _steps(parts)
    parts.index = msgspec.structs.replace(parts.index, index_offset=len(data))
    line = encode(parts.index) + b"\n"
    tail = line + msgspec.json.encode(dict(parts.check, crc=zlib.crc32(line))) + b"\n"
    return data + (_zst(tail) if parts.zst else tail)


def _other_files_index(path: Path, other: Path) -> bytes:
    """This file's records under the other run's index (its offset made this file's)."""
    mine, theirs = Parts(path), Parts(other)
    mine.index = msgspec.structs.replace(theirs.index, index_offset=mine.index.index_offset)
    return mine.join()


def _garbage(path: Path, _other: Path) -> bytes:
    return path.read_bytes() + b"\x00garbage after the index\n"


DAMAGES: dict[str, Damage] = {
    "summary swap_outs resealed": _resealed(_swap_outs),
    "aborted flipped": _resealed(_aborted),
    "steps +5 in index and summary": _resealed(_steps),
    "last_step forged": _resealed(_last_step),
    "finished flipped": _resealed(_finished),
    "first step of the last frame": _resealed(_first_of_last_frame),
    "last frame offset +7": _resealed(_offsets),
    "last frame dropped": _resealed(_offsets_dropped),
    "end_reason and clock": _resealed(_end_reason),
    "peak and tokens lowered": _resealed(_peak),
    "a field no summary has": _resealed(_extra_field),
    "truncated index": _truncated_index,
    "second index frame": _second_index,
    "another file's index": _other_files_index,
    "garbage after it": _garbage,
}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("damage")
    out = {}
    for name, source in SOURCES.items():
        for suffix in (".jsonl", ".jsonl.zst"):
            out[name + suffix] = root / f"{name}{suffix}"
            record(source, out[name + suffix])
    return out


def _truth(path: Path) -> dict:
    return msgspec.to_builtins(summarize(load(path).all_items()))


def _summary(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict | None, str]:
    code = main(["summary", str(path), "--json"])
    out, err = capsys.readouterr()
    return code, (msgspec.json.decode(out) if code == 0 else None), err


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("source", ["off", "strict"])
def test_summary_never_prints_what_the_records_do_not_hold(
        made: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        source: str, damage: str, suffix: str) -> None:
    path = made[source + suffix]
    other = made[("strict" if source == "off" else "off") + suffix]
    damaged = tmp_path / path.name
    damaged.write_bytes(DAMAGES[damage](path, other))
    assert damaged.read_bytes() != path.read_bytes()
    code, printed, err = _summary(damaged, capsys)
    if code == 0:
        truth = _truth(path)
        if damage == "truncated index":  # a cut file: what it holds before the cut
            truth = msgspec.to_builtins(summarize(load(damaged).all_items()))
            assert "cut" in err
        assert printed == truth
        assert err.count("\n") <= 1
        # a plain file's chunks are only where a reader may start: fewer of them in the
        # index is slower, not false (the numbers are the records' either way)
        if damage != "truncated index" and (damage, suffix) != ("last frame dropped",
                                                                  ".jsonl"):
            assert err.startswith("warning:"), err
    else:
        assert code == 2
        assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_export_prints_the_records_or_refuses(made: dict[str, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              damage: str, suffix: str) -> None:
    path, other = made["off" + suffix], made["strict" + suffix]
    damaged = tmp_path / path.name
    damaged.write_bytes(DAMAGES[damage](path, other))
    want = tmp_path / "want.csv"
    assert main(["export", str(path), "--format", "csv", "-o", str(want)]) == 0
    capsys.readouterr()
    got = tmp_path / "got.csv"
    code = main(["export", str(damaged), "--format", "csv", "-o", str(got)])
    err = capsys.readouterr().err
    if code == 0:
        assert got.read_text() == want.read_text() or damage == "truncated index"
    else:
        assert code == 2 and err.count("\n") == 1 and not got.exists()


@pytest.mark.parametrize("damage", [d for d in DAMAGES if d != "truncated index"])
def test_verify_refuses_every_damage_before_running_the_engine(
        made: dict[str, Path], tmp_path: Path, damage: str) -> None:
    from engine.analysis.verify import verify_file

    path, other = made["off.jsonl.zst"], made["strict.jsonl.zst"]
    damaged = tmp_path / path.name
    damaged.write_bytes(DAMAGES[damage](path, other))
    if damage == "first step of the last frame":
        pytest.skip("the frames' first steps are the window's, not the records': a full read "
                    "has nothing to refuse (replay below opens on the records)")
    with pytest.raises(RecordingError):
        verify_file(str(damaged))


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_replay_never_opens_on_a_window_the_records_do_not_vouch_for(
        made: dict[str, Path], tmp_path: Path, damage: str, suffix: str) -> None:
    from engine.stream.reader import Mode, choose

    path, other = made["strict" + suffix], made["off" + suffix]
    assert choose(str(path), window_from_steps=0).mode is Mode.INDEXED
    damaged = tmp_path / path.name
    damaged.write_bytes(DAMAGES[damage](path, other))
    indexed = open_indexed(damaged)
    if (damage, suffix) == ("last frame dropped", ".jsonl"):
        # a plain file's chunk list is where a reader may start, nothing more: one chunk
        # fewer still ends on the records' last step, the window is true
        assert indexed is not None and vouch(indexed) is None
        return
    assert indexed is None or vouch(indexed) is not None
    assert choose(str(damaged), window_from_steps=0).mode is Mode.CHECKING


def test_a_whole_file_replay_of_a_forged_window_opens_on_the_records(
        made: dict[str, Path], tmp_path: Path) -> None:
    path = made["strict.jsonl.zst"]
    damaged = tmp_path / path.name
    damaged.write_bytes(DAMAGES["first step of the last frame"](path, path))
    run = load(damaged)
    assert [s.step for s in run.steps] == [s.step for s in load(path).steps]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_a_forger_who_reseals_the_tallys_frame_too_is_caught_by_verify(
        made: dict[str, Path], tmp_path: Path, suffix: str) -> None:
    """What the index cannot prove (README): a summary forged in the index *and* in the tally,
    the data frame resealed. A full read holds them to the records."""
    from engine.analysis.verify import index_summary_disagrees

    path = made["strict" + suffix]
    damaged = tmp_path / path.name
    damaged.write_bytes(_resealed(_tally_and_index, reseal_frame=True)(path, path))
    with pytest.raises(RecordingError, match="swap_outs"):
        from engine.analysis.verify import verify_file

        verify_file(str(damaged))
    assert "swap_outs" in (index_summary_disagrees(load(damaged)) or "")


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_a_whole_recording_vouches_for_its_index(made: dict[str, Path], suffix: str) -> None:
    for source in SOURCES:
        indexed = open_indexed(made[source + suffix])
        assert indexed is not None and vouch(indexed) is None
        assert indexed.tally is not None and indexed.tally.summary == indexed.index.summary


@pytest.mark.parametrize("command", ["import-log", "fit"])
@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.zst"])
def test_a_recording_given_as_a_log_is_named_a_recording(
        made: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        command: str, suffix: str) -> None:
    argv = ([command, str(made["off" + suffix]), "-o", str(tmp_path / "out")]
            + (["--rounds", "0"] if command == "fit" else []))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "an observatory recording, not a vLLM log" in err
    assert not (tmp_path / "out").exists()


def test_verify_refuses_a_program_engines_recording_made_before_requests_were_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`observatory exec` recordings re-run from their requests (engine.analysis.rerun); one
    made before each request's samples, output limit and fingerprint were recorded cannot be:
    one line, exit 2, before vLLM is imported."""
    import time

    run = load(SOURCES["off"])
    header = msgspec.structs.replace(run.header, engine_config={
        **run.header.engine_config, "attached": {"name": "host/123/0"}})
    path = tmp_path / "exec.jsonl.zst"
    with Recorder(path, header, background_flush=False, fold=SummaryBuilder) as rec:
        for item in run.items:
            rec.write(item)
    started = time.monotonic()
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "made before recordings kept each request's" in err
    assert err.count(str(path)) == 1
    assert time.monotonic() - started < 5


SHIPPED_V1 = shipped("v1-*.jsonl.zst") + [
    ROOT / "tests" / "fixtures" / "stall" / "v1-hol-stall.jsonl.zst"]


@pytest.mark.parametrize("path", SHIPPED_V1, ids=lambda p: p.name)
def test_an_honest_index_sealed_before_todays_fields_is_not_called_forged(path, capsys):
    """The shipped V1 recordings were sealed before the stall fields and before the token
    counts had their own names (`prompt_tokens` then counted the computed ones,
    `prefix_hit_tokens` the cached ones): `summary` reads them without calling the index
    damaged, with today's names, and the old counts land on today's names."""
    from engine.analysis.summary import current_names
    from engine.analysis.verify import index_summary_disagrees

    recording = load(str(path))
    assert index_summary_disagrees(recording) is None
    sealed = current_names(recording.index.summary)
    folded = summarize(recording.all_items())
    assert sealed["prompt_tokens_computed"] == folded.prompt_tokens_computed > 0
    assert sealed["cached_tokens_per_admission"] == folded.cached_tokens_per_admission
    assert folded.prompt_tokens > 0  # the prompts' own, which the old index never had
    assert main(["summary", str(path)]) == 0
    assert "forged" not in capsys.readouterr().err


def test_an_index_missing_a_field_every_summary_has_is_still_damaged(tmp_path):
    """What `current_names` and the later fields forgive is only what an older recorder could
    not have written: a required count gone from the index is still a damaged index."""
    from engine.analysis.verify import index_summary_disagrees

    recording = load(str(SHIPPED_V1[0]))
    summary = dict(recording.index.summary)
    del summary["preemptions"]
    recording.index = msgspec.structs.replace(recording.index, summary=summary)
    assert "preemptions" in (index_summary_disagrees(recording) or "")
