"""`--trace-format auto`: the format from the file's first bytes, or one line saying it cannot
tell. Each format has a mark no other has: a Mooncake line is a JSON object with
input_length; a vllm-bench result is one object with input_lens; the CSVs' header rows name
ContextTokens (Azure) or Request tokens (BurstGPT); an observatory recording starts with its
header line, or with zstd's magic number (.jsonl.zst)."""

from __future__ import annotations

from engine.traces.rows import TraceError

FORMATS = ("mooncake", "azure", "burstgpt", "vllm-bench", "recording")
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_HEAD_BYTES = 1 << 16


def detect(path: str, head: bytes) -> str:
    """The format of the file at `path` whose first bytes are `head`."""
    if head.startswith(ZSTD_MAGIC):
        return "recording"  # an observatory recording (.jsonl.zst): engine.traces.recording
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if not text:
        raise TraceError(f"trace {path}: the file is empty: nothing to replay")
    first = text.split(b"\n", 1)[0].lower()
    if first.startswith(b'{"kind":"header"'):
        return "recording"
    if text[:1] == b"{":
        if b'"input_length"' in first:
            return "mooncake"
        if b'"input_lens"' in text or b'"output_lens"' in text:
            return "vllm-bench"
        if b'"completed"' in text and b'"duration"' in text:
            raise TraceError(f"trace {path}: a vllm bench serve result without per-request "
                             f"lengths: save it with --save-result --save-detailed")
    elif b"contexttokens" in first and b"generatedtokens" in first:
        return "azure"
    elif b"request tokens" in first and b"response tokens" in first:
        return "burstgpt"
    raise TraceError(f"trace {path}: cannot tell the trace's format from its first line: give "
                     f"--trace-format {'|'.join(FORMATS)}")


def head_of(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read(_HEAD_BYTES)
