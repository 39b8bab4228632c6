"""A sweep's directory: its spec, its rows and its kept recordings.

    DIR/sweep.toml      the sweep's own spec (base RunSpec, axes, options): --resume reads it
    DIR/results.jsonl   one JSON row per finished cell, appended and fsynced as each arrives
    DIR/results.csv     the same rows in grid order, rewritten from the JSONL
    DIR/cells/          one recording per cell with --record-cells
    DIR/ray.log         what Ray itself logged in the driver (never the terminal)

results.jsonl is the source of truth: it is append-only, so a killed sweep loses at most the
row being written (a torn last line is skipped on reading). The CSV is derived from it.
A lock file stops two sweeps from writing to one directory at once.
"""

from __future__ import annotations

import csv
import fcntl
import os
import tomllib
from pathlib import Path
from typing import Any, IO

import msgspec

from engine.errors import ConfigError, RecordingError
from engine.outpath import ensure_dir, write_output
from engine.spec import RunSpec
from engine.sweep import toml_out
from engine.sweep.grid import Axis, make_axis

SPEC_VERSION = 1


class SweepSpec(msgspec.Struct, kw_only=True):
    """Everything needed to run the sweep again: what `sweep.toml` holds."""

    base: RunSpec
    axes: list[Axis]
    record_cells: bool = False
    max_cells: int = 1000

    def to_toml(self) -> str:
        return toml_out.dumps({
            "version": SPEC_VERSION,
            "record_cells": self.record_cells,
            "max_cells": self.max_cells,
            "base": self.base.to_dict(),
            "axes": [{"key": a.key, "values": list(a.texts)} for a in self.axes],
        })

    @classmethod
    def from_toml(cls, text: str, where: str) -> "SweepSpec":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: not valid TOML ({exc})") from None
        if data.get("version") != SPEC_VERSION:
            raise ConfigError(f"{where}: sweep spec version {data.get('version')!r}, this "
                              f"observatory reads version {SPEC_VERSION}")
        try:
            axes = [make_axis(entry["key"], [str(v) for v in entry["values"]])
                    for entry in data.get("axes", [])]
            return cls(base=RunSpec.from_dict(data["base"]), axes=axes,
                       record_cells=bool(data.get("record_cells", False)),
                       max_cells=int(data.get("max_cells", 1000)))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise ConfigError(f"{where}: {exc}") from None
            raise ConfigError(f"{where}: malformed sweep spec ({type(exc).__name__}: "
                              f"{exc})") from None


class SweepDir:
    """Paths inside a sweep directory, and reading and writing what lives there."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.spec_path = self.path / "sweep.toml"
        self.jsonl_path = self.path / "results.jsonl"
        self.csv_path = self.path / "results.csv"
        self.cells_path = self.path / "cells"
        self.ray_log_path = self.path / "ray.log"
        self._lock: IO[str] | None = None
        self._rows_file: IO[bytes] | None = None

    # ---- spec ---------------------------------------------------------------------------
    def read_spec(self) -> SweepSpec:
        try:
            text = self.spec_path.read_text()
        except FileNotFoundError:
            raise ConfigError(f"{self.path}: no sweep.toml here; is this a sweep directory "
                              f"(observatory sweep ... -o DIR)?") from None
        except OSError as exc:
            raise ConfigError(f"cannot read {self.spec_path}: {exc.strerror}") from None
        return SweepSpec.from_toml(text, str(self.spec_path))

    def create(self, spec: SweepSpec) -> None:
        """Make a new sweep directory; refuses one that already holds a sweep."""
        if self.spec_path.exists():
            raise ConfigError(f"{self.path} already holds a sweep: continue it with --resume "
                              f"{self.path}, or give another -o DIR")
        try:
            ensure_dir(self.path)
            write_output(self.spec_path, spec.to_toml().encode())
        except OSError as exc:
            raise ConfigError(f"cannot write the sweep to {self.path}: "
                              f"{exc.strerror or exc}: give another -o DIR") from None

    # ---- rows ---------------------------------------------------------------------------
    def read_rows(self) -> tuple[dict[str, dict[str, Any]], int]:
        """Rows by cell key (a later row for a key replaces an earlier one), and the number of
        unreadable lines skipped (a torn last line after a kill, or damage)."""
        rows: dict[str, dict[str, Any]] = {}
        bad = 0
        try:
            data = self.jsonl_path.read_bytes()
        except FileNotFoundError:
            return rows, 0
        except OSError as exc:
            raise RecordingError(f"cannot read {self.jsonl_path}: {exc.strerror}") from None
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                row = msgspec.json.decode(line)
            except msgspec.DecodeError:
                bad += 1
                continue
            if isinstance(row, dict) and isinstance(row.get("key"), str):
                rows[row["key"]] = row
            else:
                bad += 1
        return rows, bad

    def append_row(self, row: dict[str, Any]) -> None:
        """Append one row and fsync it: once this returns, a kill cannot lose the row."""
        if self._rows_file is None:
            self._rows_file = open(self.jsonl_path, "ab")  # noqa: SIM115 (closed in close())
            if self._rows_file.tell() > 0 and not self.jsonl_path.read_bytes().endswith(b"\n"):
                self._rows_file.write(b"\n")  # a torn line from a killed run stays on its own
        self._rows_file.write(msgspec.json.encode(row) + b"\n")
        self._rows_file.flush()
        os.fsync(self._rows_file.fileno())

    def write_csv(self, rows: list[dict[str, Any]], columns: list[str]) -> None:
        write_output(self.csv_path, rows_to_csv(rows, columns).encode())

    def write_recording(self, name: str, data: bytes) -> str:
        """Keep a cell's recording; returns its path relative to the sweep directory."""
        self.cells_path.mkdir(exist_ok=True)
        target = self.cells_path / name
        target.write_bytes(data)
        return str(target.relative_to(self.path))

    # ---- lock ---------------------------------------------------------------------------
    def lock(self) -> None:
        """One writer per directory; a second sweep on it gets a one-line error."""
        self._lock = open(self.path / ".lock", "w")  # noqa: SIM115 (closed in close())
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise ConfigError(f"another sweep is writing to {self.path}; wait for it or stop "
                              f"it first") from None

    def close(self) -> None:
        if self._rows_file is not None:
            self._rows_file.close()
            self._rows_file = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def rows_to_csv(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """CSV with a header; None is an empty field, booleans are true/false as in the JSONL."""
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_value(row.get(name)) for name in columns])
    return out.getvalue()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value
