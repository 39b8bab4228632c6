"""Decompress a recording's stream of zstd frames with bounded memory, frame by frame.

Why not `zstandard.decompress` or one `decompressobj` over everything:

- A recording is one complete frame per flush. Walking frames one by one tells a cut last frame
  (the writer was killed mid-write) from a whole file, even when the cut falls on a line end.
- Input is fed ZSTD_FEED_BYTES at a time and the output is checked against a size and a ratio
  limit after each piece, so a small file that expands to gigabytes is refused after ~16 MB.
- Each frame's header says whether it carries zstd's content checksum (XXH64 of the frame's
  text, checked by the decompressor); frames without one are counted, so an old recording is
  reported as not fully checkable instead of silently trusted.
- A frame that fails to decode (a flipped byte, a bad checksum) is an error; in lenient mode
  decoding resumes at the next frame's magic number, so the frames after the damage still
  load. What the damaged frame produced before the error is kept only if `keep_damaged` (the
  recorder's Check lines then vouch for each block of it, or drop it); without Check lines
  (schema 1) nothing would, so the caller passes False and it is dropped.
"""

from __future__ import annotations

from engine.stream import limits

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHECKSUM_FLAG = 0x04  # bit 2 of the frame header descriptor (the byte after the magic)
_WRITE_SIZE = 1 << 16  # output buffer per call: one allocation covers a typical piece


class ZstdLimitError(Exception):
    """The data expands past a limit (see engine.stream.limits); the message says which."""


class ZstdDamage(Exception):
    """A frame could not be decoded; `offset` is where it started in the compressed data."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class FrameWalk:
    """The result of `decompress`: the text plus what the walk saw."""

    def __init__(self) -> None:
        self.text = b""
        self.frames = 0  # complete frames decoded
        self.unchecked_frames = 0  # of those, frames without a content checksum
        self.cut = False  # the last frame is incomplete
        self.damaged: list[str] = []  # lenient: damaged frames, one line each
        self.damaged_frames = 0
        # Text bytes from the start that only complete frames with a content checksum
        # produced: zstd has already proved them as written, so a CRC over them adds nothing.
        self.verified = 0
        self.frame_starts: list[int] = []  # byte offset of each complete frame


def decompress(data: bytes, *, lenient: bool = False, keep_damaged: bool = False,
               max_bytes: int = limits.MAX_RECORDING_BYTES,
               max_ratio: int = limits.MAX_ZSTD_RATIO) -> FrameWalk:
    """Decode concatenated zstd frames. Raises ZstdLimitError past a limit and, unless
    `lenient`, ZstdDamage at the first frame that does not decode."""
    import zstandard  # only .zst recordings pay for it

    dctx = zstandard.ZstdDecompressor()
    walk = FrameWalk()
    out: list[bytes] = []
    total = 0
    pos = 0
    size = len(data)
    view = memoryview(data)  # slices without copies
    feed = limits.ZSTD_FEED_BYTES
    chain = True  # every frame so far was complete and checksummed
    while pos < size:
        frame_start, frame_out = pos, len(out)
        checked = False
        try:
            if data[pos:pos + 4] != ZSTD_MAGIC:
                raise zstandard.ZstdError("no zstd frame starts here")
            checked = pos + 4 < size and bool(data[pos + 4] & _CHECKSUM_FLAG)
            if not checked:
                walk.unchecked_frames += 1
            obj = dctx.decompressobj(write_size=_WRITE_SIZE)
            while pos < size:
                chunk = view[pos:pos + feed]
                piece = obj.decompress(chunk)
                if piece:
                    out.append(piece)
                    total += len(piece)
                    if total > max_bytes:
                        raise ZstdLimitError(f"decompresses to more than {max_bytes:,} bytes "
                                             f"(the reader's limit)")
                    if (total > limits.ZSTD_RATIO_FREE_BYTES
                            and total > max_ratio * (pos + len(chunk))):
                        raise ZstdLimitError(f"decompresses more than {max_ratio}:1 (a zstd "
                                             f"bomb, not a recording)")
                if obj.eof:
                    pos += len(chunk) - len(obj.unused_data)
                    walk.frames += 1
                    walk.frame_starts.append(frame_start)
                    chain = chain and checked
                    if chain:
                        walk.verified = total
                    break
                pos += len(chunk)
            else:
                walk.cut = True  # the data ended inside this frame
        except zstandard.ZstdError as exc:
            lines = sum(piece.count(b"\n") for piece in out)
            message = (f"zstd frame {walk.frames + 1} (byte {frame_start:,}) is damaged "
                       f"after line {lines:,} ({exc})")
            if not lenient:
                raise ZstdDamage(message, frame_start) from None
            walk.damaged_frames += 1
            chain = False
            if not keep_damaged:
                del out[frame_out:]
                total = sum(map(len, out))
            following = data.find(ZSTD_MAGIC, frame_start + 1)
            walk.damaged.append(message + ("; skipped to the next frame" if following >= 0
                                           else "; nothing after it can be read"))
            if following < 0:
                break
            pos = following
    walk.text = b"".join(out)
    return walk
