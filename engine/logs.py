"""Capture vLLM's log output so it never writes over a TUI or into a `--record -` stream.

vLLM 0.5 normally attaches a stdout handler to the "vllm" logger at import. `engine/__init__`
turns that off (VLLM_CONFIGURE_LOGGING=0) and `install()` puts one handler on the "vllm" and
"py.warnings" loggers that keeps lines in memory. Whoever shows them (the session turns them into
`LogLine` records; the CLI prints them to stderr) drains them with `drain()`.

Identical consecutive lines are folded into one with a repeat count: without a tokenizer vLLM 0.5
warns once per request that the EOS id is None, 10,000 times for the seed's workload.

Loggers are not the only way text reaches a terminal: torch, NCCL and CUDA write to file
descriptors 1 and 2 from C. An engine running in its own process (engine.child) calls
`capture_fds()`, which points its own fds 1 and 2 at pipes read by a thread, so those lines
become captured lines too (loggers "stdout" / "stderr") instead of landing on the TUI's screen.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

# logger name -> lowest level kept (transformers is chatty at INFO about config files; torch
# warns about its own deprecations and a missing CUDA runtime as vLLM imports it)
_CAPTURED = {"vllm": logging.INFO, "py.warnings": logging.WARNING, "transformers": logging.WARNING,
             "torch": logging.WARNING}
_MAX_PENDING = 10_000


@dataclass
class CapturedLine:
    level: str
    logger: str
    message: str
    repeats: int = 1


class _CaptureHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self._lock_lines = threading.Lock()
        self.pending: list[CapturedLine] = []
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string in someone's log call must not kill a step
            message = str(record.msg)
        message = message.splitlines()[0] if message else ""
        self.add(record.levelname, record.name, message)

    def add(self, level: str, logger: str, message: str) -> None:
        """Keep a line that did not come through `logging` (see `capture_fds`)."""
        with self._lock_lines:
            last = self.pending[-1] if self.pending else None
            if last is not None and last.message == message and last.logger == logger:
                last.repeats += 1
            elif len(self.pending) < _MAX_PENDING:
                self.pending.append(CapturedLine(level, logger, message))
            else:
                self.dropped += 1

    def take(self) -> list[CapturedLine]:
        if not self.pending:  # the common step: nothing logged, no lock (read once per step)
            return []
        with self._lock_lines:
            lines, self.pending = self.pending, []
        return lines


_handler = _CaptureHandler()


def install() -> None:
    """Route vLLM's (transformers', torch's) log lines and Python warnings into memory.
    Idempotent. torch gives each of its own loggers a stderr handler as it is imported: called
    again once torch is (engine.adapters.driver.import_vllm), it takes those over too."""
    logging.captureWarnings(True)
    for name, level in _CAPTURED.items():
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if handler is not _handler:
                logger.removeHandler(handler)
        if _handler not in logger.handlers:
            logger.addHandler(_handler)
        logger.setLevel(level)
        logger.propagate = False
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.startswith("torch.") and isinstance(logger, logging.Logger):
            for handler in list(logger.handlers):  # torch's own: theirs go to "torch", ours
                logger.removeHandler(handler)
            logger.propagate = True


def drain() -> list[CapturedLine]:
    """Everything logged since the last drain, oldest first, with repeats folded."""
    return _handler.take()


_MAX_LINE = 4096


def capture_fds() -> None:
    """Point this process's fds 1 and 2 at pipes whose lines become captured lines.

    Only for a process that owns no terminal of its own (the engine child): after this, nothing
    this process writes to stdout or stderr, from Python or from C, reaches the terminal.
    """
    for fd, logger, level in ((1, "stdout", "INFO"), (2, "stderr", "WARNING")):
        read_end, write_end = os.pipe()
        os.dup2(write_end, fd)
        os.close(write_end)
        threading.Thread(target=_pump, args=(read_end, logger, level), daemon=True,
                         name=f"observatory-capture-{logger}").start()


def _pump(read_end: int, logger: str, level: str) -> None:
    """Turn the bytes written to one captured fd into lines, until every writer is gone."""
    partial = b""
    while True:
        try:
            chunk = os.read(read_end, 65536)
        except OSError:
            return
        if not chunk:
            break
        lines = (partial + chunk).split(b"\n")
        partial = lines.pop()[-_MAX_LINE:]
        for raw in lines:
            text = raw.decode("utf-8", "replace").rstrip("\r").rstrip()
            if text:
                _handler.add(level, logger, text[:_MAX_LINE])
    if partial.strip():
        _handler.add(level, logger, partial.decode("utf-8", "replace").strip())
