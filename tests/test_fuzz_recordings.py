"""Fuzz the recording commands with damaged files (issue #9): every kind of damage the issue
lists, seeded, so each run makes the same 300+ files.

For every damaged file, `summary --json`, `summary --json --lenient` and `export --format csv`
run in-process (as `observatory` would: engine.cli.main) and each must:

- never raise (no traceback) and exit 0, 2 or 3;
- on exit 2, print exactly one line, `observatory: error: FILE...`, and nothing on stdout;
- on exit 0, print exactly what it printed for the undamaged file, unless stderr says why
  (a `warning:` naming the file: cut, or DAMAGED under --lenient; for a schema 1 file, which
  cannot be checked, its `note:` is the reason);
- stay under a memory bound (the growth of the process's peak RSS during the command: the
  kernel's high-water mark, reset before each command) and a time bound (no hang).

`verify` shares the strict loader; it runs on the files the strict summary refused (exit 2,
before any engine is built), since re-running the others means importing vLLM.
"""

from __future__ import annotations

import contextlib
import io
import random
import time
import zlib
from pathlib import Path
from typing import Callable

import msgspec
import pytest
import zstandard

from engine.cli import main
from engine.stream import limits
from engine.stream.records import (SCHEMA_VERSION, Arrivals, Check, EngineAborted, Header,
                                   LogLine, PolicyChanged, RunFinished, StepRecord, encode)
from engine.analysis.summary import SummaryBuilder
from engine.stream.recorder import Recorder

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "recordings" / "seed-5578-watermark.jsonl.zst"
MEMORY_BOUND = 256 << 20  # bytes of peak RSS above the RSS before the command
TIME_BOUND_S = 10.0  # one command on one file
CHECK = b'{"kind":"check"'
MAGIC = b"\x28\xb5\x2f\xfd"
COMMANDS = {
    "summary": ["summary", "{}", "--json"],
    "lenient": ["summary", "{}", "--json", "--lenient"],
    "export": ["export", "{}", "--format", "csv", "-o", "-"],
}


# ---- the undamaged files --------------------------------------------------------------------

def _items(steps: int = 300) -> list:
    """A run's records (no vLLM needed): arrivals, steps that swap, a policy change, vLLM log
    lines, an abort and the end record."""
    header = Header(schema=SCHEMA_VERSION, observatory_version="0.1.0",
                    vllm_version="0.5.0.post1", backend="sim", model="opt-125m",
                    spec={"preset": "demo", "policy": "off"}, engine_config={},
                    started_at="2026-01-01T00:00:00+00:00", host="fuzz")
    items: list = [header, Arrivals(step=0, sim_s=0.0, source="workload",
                                    request_ids=[f"r{i}" for i in range(40)],
                                    prompt_tokens=[120] * 40, arrival_s=[0.0] * 40)]
    for i in range(steps):
        if i == 100:
            items.append(PolicyChanged(step=100, old="off", new="strict", source="tui"))
        if i % 37 == 5:
            items.append(LogLine(step=i, level="WARNING", logger="vllm.core.scheduler",
                                 message=f"Sequence group r{i} is preempted", repeats=1 + i % 4))
        items.append(StepRecord(
            step=i, wall_s=i * 0.002, sim_s=(i + 1) * 0.01, sim_step_s=0.01, policy="off",
            running=4 + i % 7, swapped=(i * 3) % 11, waiting=40 - i % 40, running_seqs=32,
            gpu_used=400 + i % 100, gpu_total=512, cpu_used=(i * 7) % 256, cpu_total=256,
            batched_tokens=300, token_budget=1024,
            prefills=[(f"r{i % 40}", 120)] if i % 5 == 0 else [], decode_groups=4,
            decode_seqs=16, swapped_out=[f"r{i % 40}"] if i % 10 == 3 else [],
            swapped_in=[f"r{i % 40}"] if i % 10 == 7 else [], recomputed=[], ignored=[],
            finished=[f"r{i % 40}"] if i % 13 == 0 else [], first_tokens=[],
            prompt_tokens=120 if i % 5 == 0 else 0, generated_tokens=16 + i % 9,
            withheld=i % 4 == 0, held_back=3 if i % 4 == 0 else 0))
    items.append(EngineAborted(step=steps, message="Aborted due to the lack of CPU swap space",
                               error="RuntimeError", sim_s=steps * 0.01, wall_s=steps * 0.002,
                               running=5, swapped=10, waiting=3, gpu_used=500, gpu_total=512,
                               cpu_used=250, cpu_total=256))
    items.append(RunFinished(steps=steps, reason="aborted", sim_s=steps * 0.01,
                             wall_s=steps * 0.002))
    return items


def _record(path: Path, items: list) -> None:
    """Through the real Recorder, a flush (a Check line, a zstd block) every 20 records and a
    zstd frame every ~8 KB of text (1 MB in a real recording), so frames can be damaged."""
    recorder = Recorder(path, items[0], background_flush=False, frame_bytes=8000,
                        fold=SummaryBuilder)
    for n, item in enumerate(items[1:]):
        recorder.write(item)
        if n % 20 == 19:
            recorder.flush()
    recorder.close()


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    tmp = tmp_path_factory.mktemp("bases")
    items = _items()
    _record(tmp / "p.jsonl", items)
    _record(tmp / "z.jsonl.zst", items)
    old = [msgspec.structs.replace(items[0], schema=1), *items[1:]]
    return {"P": (tmp / "p.jsonl").read_bytes(), "Z": (tmp / "z.jsonl.zst").read_bytes(),
            "S": SHIPPED.read_bytes(),
            "O": b"".join(encode(item) + b"\n" for item in old)}


# ---- kinds of damage --------------------------------------------------------------------------

def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n")


def _join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def _reseal(lines: list[bytes]) -> list[bytes]:
    """Recompute every Check over the lines before it: damage a writer could have sealed."""
    out: list[bytes] = []
    block: list[bytes] = []
    for line in lines:
        if line.startswith(CHECK):
            check = msgspec.json.decode(line, type=Check)
            out.append(encode(msgspec.structs.replace(check, lines=len(block),
                                                      crc=zlib.crc32(_join(block)))))
            block = []
        else:
            out.append(line)
            block.append(line)
    return out


def _frames(data: bytes) -> list[bytes]:
    frames = []
    while data:
        obj = zstandard.ZstdDecompressor().decompressobj()
        obj.decompress(data)
        rest = obj.unused_data
        frames.append(data[:len(data) - len(rest)])
        data = rest
    return frames


def _unzstd(data: bytes) -> bytes:
    return b"".join(zstandard.ZstdDecompressor().decompressobj().decompress(f)
                    for f in _frames(data))


def _zstd(text: bytes, checksum: bool = True) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_checksum=checksum).compress(text)


def _text(data: bytes) -> bytes:
    return _unzstd(data) if data.startswith(MAGIC) else data


def _rezip(original: bytes, text: bytes) -> bytes:
    return _zstd(text) if original.startswith(MAGIC) else text


def flip_byte(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    out[rng.randrange(len(out))] ^= 0x80
    return bytes(out)


def flip_bit(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _line_edit(edit: Callable[[random.Random, list[bytes], int], None]):
    def damage(rng: random.Random, data: bytes) -> bytes:
        lines = _lines(_text(data))
        edit(rng, lines, rng.randrange(1, len(lines) - 1))
        return _rezip(data, _join(lines))
    damage.__name__ = edit.__name__
    return damage


@_line_edit
def dup_line(rng, lines, i):  # noqa: ANN001
    lines.insert(i, lines[i])


@_line_edit
def del_line(rng, lines, i):  # noqa: ANN001
    del lines[i]


@_line_edit
def swap_lines(rng, lines, i):  # noqa: ANN001
    j = min(len(lines) - 1, i + rng.randrange(1, 4))
    lines[i], lines[j] = lines[j], lines[i]


@_line_edit
def junk_line(rng, lines, i):  # noqa: ANN001
    lines.insert(i, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))).replace(
        b"\n", b"x"))


def cut_random(rng: random.Random, data: bytes) -> bytes:
    return data[:rng.randrange(1, len(data))]


def cut_line_end(rng: random.Random, data: bytes) -> bytes:
    ends = [i + 1 for i in range(len(data)) if data[i] == 10]
    return data[:rng.choice(ends[:-1])]


def cut_frame(rng: random.Random, data: bytes) -> bytes:
    frames = _frames(data)
    return b"".join(frames[:rng.randrange(1, len(frames))])


def header_only(rng: random.Random, data: bytes) -> bytes:
    if data.startswith(MAGIC):
        return _frames(data)[0]
    return data[:data.index(b"\n") + 1]


def empty(rng: random.Random, data: bytes) -> bytes:
    return b""


def _blocks(lines: list[bytes]) -> list[list[bytes]]:
    blocks, block = [], []
    for line in lines:
        block.append(line)
        if line.startswith(CHECK):
            blocks.append(block)
            block = []
    return blocks + ([block] if block else [])


def _block_edit(edit: Callable[[random.Random, list], None]):
    def damage(rng: random.Random, data: bytes) -> bytes:
        if data.startswith(MAGIC):
            parts = _frames(data)
            edit(rng, parts)
            return b"".join(parts)
        parts = _blocks(_lines(data))
        edit(rng, parts)
        return _join([line for block in parts for line in block])
    damage.__name__ = edit.__name__
    return damage


@_block_edit
def dup_block(rng, parts):  # noqa: ANN001
    i = rng.randrange(1, len(parts) - 1)
    parts.insert(i, parts[i])


@_block_edit
def del_block(rng, parts):  # noqa: ANN001
    del parts[rng.randrange(1, len(parts) - 1)]


@_block_edit
def swap_blocks(rng, parts):  # noqa: ANN001
    i = rng.randrange(1, len(parts) - 2)
    parts[i], parts[i + 1] = parts[i + 1], parts[i]


ABSURD = [
    (b'"gpu_used":', b'"gpu_used":1000000000000000000000000000000,"x":'),
    (b'"prompt_tokens":', b'"prompt_tokens":9223372036854775807,"x":'),
    (b'"generated_tokens":', b'"generated_tokens":-9223372036854775808,"x":'),
    (b'"swapped":', b'"swapped":-1,"x":'),
    (b'"cpu_used":', b'"cpu_used":100000,"x":'),
    (b'"sim_s":', b'"sim_s":1e400,"x":'),
    (b'"wall_s":', b'"wall_s":-5.0,"x":'),
    (b'"step":', b'"step":999999,"x":'),
    (b'"steps":', b'"steps":12,"x":'),
    (b'"repeats":', b'"repeats":0,"x":'),
]


def absurd(rng: random.Random, data: bytes) -> bytes:
    """A value no run produces, written by a 'writer' that sealed it (Checks recomputed)."""
    lines = _lines(_text(data))
    old, new = rng.choice(ABSURD)
    candidates = [i for i, line in enumerate(lines) if old in line and i > 0]
    i = rng.choice(candidates)
    lines[i] = lines[i].replace(old, new, 1)
    return _rezip(data, _join(_reseal(lines)))


def deep(rng: random.Random, data: bytes) -> bytes:
    depth = rng.choice([1000, 100_000])
    nest = b"[" * depth + b"]" * depth
    lines = _lines(_text(data))
    if rng.random() < 0.5:
        lines[0] = lines[0].replace(b'"engine_config":{', b'"engine_config":{"d":' + nest + b",")
        lines[0] = lines[0].replace(b',}', b'}')
    else:
        lines.insert(rng.randrange(1, len(lines)), b'{"kind":"log","deep":' + nest + b"}")
    return _rezip(data, _join(_reseal(lines)))


def long_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(_text(data))
    size = limits.MAX_LINE_BYTES + rng.randrange(1, 1000)  # MAX_LINE_BYTES is lowered below
    lines.insert(rng.randrange(1, len(lines)), b'{"kind":"log","message":"' + b"x" * size + b'"}')
    return _rezip(data, _join(_reseal(lines)))


def append(rng: random.Random, data: bytes) -> bytes:
    text = _text(data)
    extra = rng.choice([b"garbage\n", text[text.index(b"\n") + 1:], b"\n" * 2_000_000,
                        b"\x00\xff" * 100])
    return data + (_zstd(extra) if data.startswith(MAGIC) else extra)


def control_chars(rng: random.Random, data: bytes) -> bytes:
    """Escape sequences in file strings (sealed): must load and print like any string."""
    lines = _lines(_text(data))
    candidates = [i for i, line in enumerate(lines) if b'"kind":"log"' in line]
    i = rng.choice(candidates)
    lines[i] = lines[i].replace(b'"message":"', b'"message":"\\u001b]0;owned\\u0007\\u001b[2J', 1)
    return _rezip(data, _join(_reseal(lines)))


def no_checksum(rng: random.Random, data: bytes) -> bytes:
    """Frames recompressed without zstd's content checksum, then one byte flipped in one."""
    frames = [_zstd(_unzstd(f), checksum=False) for f in _frames(data)]
    frame = bytearray(frames[i := rng.randrange(len(frames))])
    frame[rng.randrange(6, len(frame))] ^= 0x80
    frames[i] = bytes(frame)
    return b"".join(frames)


def bomb(rng: random.Random, data: bytes) -> bytes:
    text = _text(data)
    compressor = zstandard.ZstdCompressor(level=19).compressobj()
    newlines = b"\n" * (1 << 20)
    parts = [compressor.compress(text[:text.index(b"\n") + 1])]
    parts += [compressor.compress(newlines) for _ in range(200)]  # 200 MB of newlines
    return b"".join(parts) + compressor.flush()


KINDS: list[tuple[Callable[[random.Random, bytes], bytes], str, int]] = [
    (flip_byte, "P", 24), (flip_byte, "Z", 20), (flip_byte, "S", 20), (flip_byte, "O", 8),
    (flip_bit, "P", 10), (flip_bit, "Z", 8),
    (dup_line, "P", 10), (dup_line, "Z", 4), (dup_line, "O", 4),
    (del_line, "P", 10), (del_line, "Z", 4), (del_line, "O", 4),
    (swap_lines, "P", 10), (swap_lines, "Z", 4), (swap_lines, "O", 4),
    (junk_line, "P", 5),
    (cut_random, "P", 10), (cut_random, "Z", 10), (cut_random, "S", 5), (cut_random, "O", 4),
    (cut_line_end, "P", 8), (cut_line_end, "O", 4),
    (cut_frame, "Z", 8), (cut_random, "S", 5),
    (header_only, "P", 1), (header_only, "Z", 1), (header_only, "O", 1), (empty, "P", 1),
    (dup_block, "P", 5), (del_block, "P", 5), (swap_blocks, "P", 5),
    (dup_block, "Z", 5), (del_block, "Z", 5), (swap_blocks, "Z", 5),
    (dup_line, "S", 3), (del_line, "S", 3), (swap_lines, "S", 3),
    (absurd, "P", 20), (absurd, "O", 10), (absurd, "Z", 4),
    (deep, "P", 6), (deep, "O", 2),
    (long_line, "P", 2),
    (append, "P", 6), (append, "Z", 4),
    (control_chars, "P", 3),
    (no_checksum, "Z", 3),
    (bomb, "Z", 1),
]
CASES = [(damage, base, seed) for damage, base, n in KINDS for seed in range(n)]


def test_the_suite_covers_at_least_300_files() -> None:
    assert len(CASES) >= 300


# ---- running the commands ------------------------------------------------------------------

def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def reset_peak_rss() -> int:
    """Reset the kernel's RSS high-water mark (Linux >= 4.0); return the RSS now, in bytes."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kb("VmRSS") * 1024


def peak_rss() -> int:
    return _status_kb("VmHWM") * 1024


def run(argv: list[str]) -> tuple[int, str, str, int, float]:
    """engine.cli.main in-process: (exit code, stdout, stderr, peak RSS growth, seconds)."""
    out_bytes = io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8")
    err = io.StringIO()
    rss_before = reset_peak_rss()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    seconds = time.perf_counter() - started
    peak = peak_rss() - rss_before
    out.flush()
    return code, out_bytes.getvalue().decode("utf-8", "replace"), err.getvalue(), peak, seconds


@pytest.fixture(scope="module")
def originals(bases: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("orig")
    out: dict[str, dict[str, str]] = {}
    for base, data in bases.items():
        path = tmp / ("x.jsonl.zst" if data.startswith(MAGIC) else "x.jsonl")
        path.write_bytes(data)
        out[base] = {}
        for name, argv in COMMANDS.items():
            code, stdout, stderr, _, _ = run([a.format(path) for a in argv])
            assert code == 0, stderr
            out[base][name] = stdout
            out[base]["stderr"] = stderr
    return out


@pytest.fixture(autouse=True)
def _small_line_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 1 << 20)  # so long_line stays fast


@pytest.mark.parametrize("damage, base", sorted({(d, b) for d, b, _ in CASES},
                                                key=lambda c: (c[0].__name__, c[1])),
                         ids=lambda v: v.__name__ if callable(v) else v)
def test_damaged_recordings(damage: Callable, base: str, bases: dict[str, bytes],
                            originals: dict[str, dict[str, str]], tmp_path: Path) -> None:
    unchecked = {b: "cannot be fully checked" in originals[b]["stderr"] for b in bases}
    seeds = [seed for d, b, seed in CASES if d is damage and b == base]
    failures: list[str] = []
    for seed in seeds:
        rng = random.Random(f"{damage.__name__}/{base}/{seed}")
        data = damage(rng, bases[base])
        suffix = ".jsonl.zst" if bases[base].startswith(MAGIC) else ".jsonl"
        path = tmp_path / f"{damage.__name__}-{base}-{seed}{suffix}"
        path.write_bytes(data)
        strict_code = None
        for name, argv in COMMANDS.items():
            code, stdout, stderr, peak, seconds = run([a.format(path) for a in argv])
            what = f"{path.name} {name}: exit {code}"
            if name == "summary":
                strict_code = code
            if "Traceback" in stderr or code not in (0, 2, 3):
                failures.append(f"{what}: {stderr[-300:]}")
            elif code == 2:
                lines = stderr.strip().splitlines()
                if (len(lines) != 1 or not lines[0].startswith("observatory: error: ")
                        or str(path) not in lines[0] or stdout):
                    failures.append(f"{what}: not one error line naming the file: {stderr!r}")
            elif stdout != originals[base][name]:
                # A file that cannot be fully checked says so; for the others only a warning
                # (cut, or DAMAGED under --lenient) explains different numbers.
                why = ("warning:", "note:") if unchecked[base] else ("warning:",)
                if not any(line.startswith(why) and str(path) in line
                           for line in stderr.splitlines()):
                    failures.append(f"{what}: output changed with no warning (silent wrong "
                                    f"numbers); stderr {stderr!r}")
            if peak > MEMORY_BOUND:
                failures.append(f"{what}: memory peak {peak / 2**20:.0f} MB")
            if seconds > TIME_BOUND_S:
                failures.append(f"{what}: took {seconds:.1f} s")
        if strict_code == 2:  # verify loads strictly, before building any engine
            code, stdout, stderr, _, _ = run(["verify", str(path)])
            if code != 2 or "Traceback" in stderr:
                failures.append(f"{path.name} verify: exit {code}: {stderr[-300:]}")
    assert not failures, "\n".join(failures[:20])
