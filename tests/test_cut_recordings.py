"""A recording cut at any byte reads every step sealed before the cut, with the cut notice
(issue 31): every cut offset in the last 200 bytes of a plain and a zstd recording, closed by
its recorder (the cut falls in the index, the tally or their checks) and the same file without
its index (a writer killed after its last flush)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import zstandard

from engine.analysis.summary import SummaryBuilder, summarize
from engine.cli.registry import main
from engine.stream.reader import load, open_indexed, parse_header
from engine.stream.recorder import Recorder
from engine.stream.records import STEP_TYPES, RunFinished, decode_record

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "recordings" / "seed-5578-off.jsonl.zst"
STEPS = 120
CUTS = 200


def _small(target: Path) -> None:
    """The first STEPS steps of a shipped run and an end record, as the recorder closes it."""
    run = load(SOURCE)
    with Recorder(target, run.header, background_flush=False, frame_bytes=1 << 14,
                  fold=SummaryBuilder) as rec:
        last = None
        for item in run.items:
            if type(item) in STEP_TYPES:
                if item.step >= STEPS:
                    break
                last = item
            rec.write(item)
        rec.write(RunFinished(steps=STEPS, reason="max_steps", sim_s=last.sim_s,
                              wall_s=last.wall_s))
    assert rec.error is None


def _text(data: bytes) -> bytes:
    """What a cut file's bytes decode to: zstd frames as far as they go (a cut frame yields
    the blocks that arrived whole), plain bytes as they are."""
    if not data.startswith(b"\x28\xb5\x2f\xfd"):
        return data
    out = []
    while data:
        obj = zstandard.ZstdDecompressor().decompressobj()
        try:
            out.append(obj.decompress(data))
        except zstandard.ZstdError:
            break
        if not obj.eof:
            break
        data = obj.unused_data
    return b"".join(out)


def _sealed_summary(data: bytes) -> dict:
    """The summary of the records a whole Check line follows, worked out here line by line
    (not with the reader under test)."""
    text = _text(data)
    lines = text.split(b"\n")
    complete = lines[:-1]  # the last piece has no newline: cut
    header = parse_header(complete[0], "cut")
    kept, pending = [header], []
    for line in complete[1:]:
        if line.startswith(b'{"kind":"check"'):
            kept += pending
            pending = []
        elif not line.startswith((b'{"kind":"index"', b'{"kind":"tally"')):
            pending.append(decode_record(line))
    return msgspec.to_builtins(summarize(kept))


@pytest.fixture(scope="module", params=[".jsonl", ".jsonl.zst"])
def files(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> dict[str, bytes]:
    path = tmp_path_factory.mktemp("cut") / f"small{request.param}"
    _small(path)
    data = path.read_bytes()
    indexed = open_indexed(path)
    assert indexed is not None
    return {"closed": data, "no index": data[:indexed.index.index_offset]}


@pytest.mark.parametrize("which", ["closed", "no index"])
def test_every_cut_in_the_last_200_bytes_reads_what_was_sealed(
        files: dict[str, bytes], which: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    data = files[which]
    whole = _sealed_summary(data)
    assert whole["steps"] == STEPS
    name = "cut.jsonl.zst" if data.startswith(b"\x28\xb5\x2f\xfd") else "cut.jsonl"
    path = tmp_path / name
    for cut in range(len(data) - CUTS, len(data)):
        path.write_bytes(data[:cut])
        code = main(["summary", str(path), "--json"])
        out, err = capsys.readouterr()
        assert code == 0, f"cut at {cut} of {len(data)}: {err}"
        assert msgspec.json.decode(out) == _sealed_summary(data[:cut]), f"cut at {cut}"
        assert "cut" in err and err.count("\n") == 1, f"cut at {cut}: {err!r}"
