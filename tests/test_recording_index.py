"""The recorder's index: written at close, read from the tail by `summary` and replay, and held
to the records by every full read (engine.stream.reader.indexed, engine.stream.reader.checked)."""

from __future__ import annotations

import io
import zlib
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import msgspec
import pytest

from engine.analysis.index_summary import summary_of
from engine.analysis.summary import SummaryBuilder, summarize
from engine.cli.summary import Summary as SummaryCommand
from engine.stream.reader import RecordingError, load, open_indexed
from engine.stream.recorder import Recorder
from engine.stream.records import STEP_TYPES, EngineAborted, Index, encode
from shipped import shipped

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = shipped()  # recordings/MANIFEST: never a user's own runs
FRAME = 1 << 15  # small frames, so a 1,600-step run has dozens


def rewrite(source: Path, target: Path, frame_bytes: int = FRAME) -> None:
    """Record a shipped run's records again, as a recorder closing normally writes them."""
    run = load(source)
    recorder = Recorder(target, run.header, background_flush=False, frame_bytes=frame_bytes,
                        fold=SummaryBuilder)
    for item in run.items:
        recorder.write(item)
    recorder.close()
    assert recorder.error is None


def summary_cli(path: Path) -> tuple[str, str]:
    import argparse

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        SummaryCommand().cmd(argparse.Namespace(path=str(path), json=True, lenient=False))
    return out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def strict_zst(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("index") / "strict.jsonl.zst"
    rewrite(ROOT / "recordings" / "seed-5578-strict.jsonl.zst", path)
    return path


@pytest.mark.parametrize("suffix", [".jsonl.zst", ".jsonl"])
def test_index_round_trip_points_at_every_frame(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"run{suffix}"
    rewrite(ROOT / "recordings" / "seed-5578-strict.jsonl.zst", path)
    indexed = open_indexed(path)
    assert indexed is not None and len(indexed.index.frames) > 10
    full = load(path)
    assert full.index == indexed.index  # the full read finds the same index, and agrees
    seen = []
    for k, (_, first) in enumerate(indexed.index.frames):
        header, records = indexed.frame_records(k)
        assert (header is not None) == (k == 0)
        steps = [r.step for r in records if type(r) in STEP_TYPES]
        if steps:
            assert steps[0] == first
        seen.extend(steps)
    assert seen == [s.step for s in full.steps]
    assert indexed.frame_of(seen[-1]) == len(indexed.index.frames) - 1
    assert indexed.header() == full.header


@pytest.mark.parametrize("source", SHIPPED, ids=lambda p: p.name)
def test_summary_from_the_index_equals_the_full_read(tmp_path: Path, source: Path) -> None:
    path = tmp_path / source.name
    rewrite(source, path)
    indexed = open_indexed(path)
    assert indexed is not None
    assert summary_of(indexed) == summarize(load(path).all_items())


def test_summary_command_reads_the_index_and_prints_what_a_full_read_does(
        strict_zst: Path, tmp_path: Path) -> None:
    # the same file without its index (cut right before the index frame: every record kept)
    indexed = open_indexed(strict_zst)
    assert indexed is not None
    bare = tmp_path / "bare.jsonl.zst"
    bare.write_bytes(strict_zst.read_bytes()[:indexed.index.index_offset])
    assert open_indexed(bare) is None
    assert summary_cli(strict_zst) == summary_cli(bare)


def test_old_files_without_an_index_still_open() -> None:
    # the shipped seed-5578-off as it was before recordings had indexes
    old = ROOT / "tests" / "fixtures" / "seed-5578-off-before-indexes.jsonl.zst"
    assert open_indexed(old) is None
    run = load(old)
    assert run.index is None and not run.truncated
    out, _ = summary_cli(old)
    assert msgspec.json.decode(out)["steps"] == len(run)


def test_a_file_cut_before_its_index_opens_whole_up_to_the_abort(tmp_path: Path) -> None:
    source = ROOT / "recordings" / "seed-5578-off.jsonl.zst"  # the run that aborts
    full = load(source)
    assert full.abort is not None
    # the writer died at the abort: everything up to it flushed, no index, no final check
    cut = tmp_path / "cut.jsonl"
    recorder = Recorder(cut, full.header, background_flush=False, frame_bytes=FRAME,
                        fold=SummaryBuilder)
    for item in full.items:
        recorder.write(item)
        if isinstance(item, EngineAborted):
            break
    recorder.flush()
    # (not closed: what a kill -9 leaves)
    assert open_indexed(cut) is None
    run = load(cut)
    assert run.index is None and run.abort == full.abort
    assert [s.step for s in run.steps] == [s.step for s in full.steps if s.step < full.abort.step]


def test_a_changed_byte_in_the_index_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    rewrite(ROOT / "recordings" / "seed-5578-strict.jsonl.zst", path)
    data = path.read_bytes()
    at = data.rindex(b'"steps":') + len(b'"steps":')
    tampered = data[:at] + (b"2" if data[at:at + 1] != b"2" else b"3") + data[at + 1:]
    path.write_bytes(tampered)
    assert open_indexed(path) is None  # the final check's CRC no longer covers it
    with pytest.raises(RecordingError, match="checksum"):
        load(path)


def test_a_forged_index_with_a_new_checksum_is_caught_by_a_full_read(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    rewrite(ROOT / "recordings" / "seed-5578-strict.jsonl.zst", path)
    lines = path.read_bytes().split(b"\n")
    index = msgspec.json.decode(lines[-3], type=Index)
    forged = encode(msgspec.structs.replace(index, steps=index.steps - 1)) + b"\n"
    check = msgspec.json.decode(lines[-2])
    check["crc"] = zlib.crc32(forged)
    lines[-3], lines[-2] = forged[:-1], msgspec.json.encode(check)
    path.write_bytes(b"\n".join(lines))
    assert open_indexed(path) is not None  # the tail alone cannot tell...
    with pytest.raises(RecordingError, match="the index says"):
        load(path)  # ...but every full read (verify's included) holds it to the records


def test_a_flipped_byte_in_the_index_frame_is_caught(strict_zst: Path, tmp_path: Path) -> None:
    data = bytearray(strict_zst.read_bytes())
    indexed = open_indexed(strict_zst)
    assert indexed is not None
    data[indexed.index.index_offset + (len(data) - indexed.index.index_offset) // 2] ^= 0x10
    path = tmp_path / "flipped.jsonl.zst"
    path.write_bytes(bytes(data))
    assert open_indexed(path) is None
    with pytest.raises(RecordingError):
        load(path)


def test_verify_refuses_an_index_whose_summary_the_records_contradict(tmp_path: Path) -> None:
    from engine.analysis.verify import index_summary_disagrees, verify_file

    path = tmp_path / "run.jsonl"
    rewrite(ROOT / "recordings" / "seed-5578-strict.jsonl.zst", path)
    assert index_summary_disagrees(load(path)) is None
    lines = path.read_bytes().split(b"\n")
    index = msgspec.json.decode(lines[-3], type=Index)
    summary = dict(index.summary or {})
    summary["swap_outs"] += 1
    forged = encode(msgspec.structs.replace(index, summary=summary)) + b"\n"
    check = msgspec.json.decode(lines[-2])
    check["crc"] = zlib.crc32(forged)
    lines[-3], lines[-2] = forged[:-1], msgspec.json.encode(check)
    path.write_bytes(b"\n".join(lines))
    load(path)  # the records and frames agree with it...
    with pytest.raises(RecordingError, match="swap_outs"):
        verify_file(str(path))  # ...its summary does not, and verify says so before re-running


def test_a_recording_switched_off_mid_run_says_so_from_its_index(tmp_path: Path) -> None:
    from engine.cli.summary import _from_records
    from engine.stream.records import RunFinished

    run = load(ROOT / "recordings" / "seed-5578-strict.jsonl.zst")
    path = tmp_path / "off-at-900.jsonl.zst"
    recorder = Recorder(path, run.header, background_flush=False, frame_bytes=FRAME,
                        fold=SummaryBuilder)
    for item in run.items:
        if type(item) in STEP_TYPES and item.step == 900 or isinstance(item, RunFinished):
            break  # the TUI's `r` key: recording off, the run goes on
        recorder.write(item)
    recorder.close()
    indexed = open_indexed(path)
    assert indexed is not None and not indexed.index.finished
    err = io.StringIO()
    with redirect_stderr(err):
        full = _from_records(str(path), lenient=False)
    assert summary_cli(path) == (msgspec.json.format(msgspec.json.encode(full), indent=2)
                                 .decode() + "\n", err.getvalue())
    assert "switched off after step 899" in err.getvalue()
