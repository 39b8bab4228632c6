"""Output paths (issue 31): a path the user names is written, never replaced by something else.

Every kind of path is made in a temp dir (a FIFO with os.mkfifo, a character device with
os.mknod where root may, a symlink), never on the real /dev. Each writer the user names a file
for is run against each kind: the device stays a device, the FIFO delivers what was written,
the symlink stays a link and its target holds the output.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

import pytest

from engine.analysis.export import export
from engine.errors import ConfigError
from engine.outpath import IN_PLACE, NEW, REGULAR, STDOUT, classify, remove_empty, write_output
from engine.stream.reader import load
from engine.analysis.summary import SummaryBuilder
from engine.stream.recorder import Recorder

ROOT = Path(__file__).resolve().parents[1]
RECORDING = ROOT / "recordings" / "seed-5578-off.jsonl.zst"


def _fifo_reader(path: Path) -> tuple[threading.Thread, list[bytes]]:
    """A thread that opens the FIFO and reads it to EOF, like `cat path`."""
    got: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as f:
            got.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


def _char_device(tmp_path: Path) -> Path:
    """A null device (1, 3) in the temp dir, or a clean skip where one cannot be made/opened."""
    dev = tmp_path / "null"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        with open(dev, "wb") as f:  # a nodev mount refuses to open it
            f.write(b"")
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a character device here ({exc.strerror}); CI runs as root")
    return dev


# ---- the helper -----------------------------------------------------------------------------

def test_classify_names_every_kind(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to("file")
    (tmp_path / "dangling").symlink_to("sub/new.csv")
    os.mkfifo(tmp_path / "fifo")
    read, write = os.pipe()
    try:
        assert classify("-").kind == STDOUT
        assert classify(tmp_path / "new.csv").kind == NEW
        assert classify(tmp_path / "file").kind == REGULAR
        link = classify(tmp_path / "link")
        assert (link.kind, link.path) == (REGULAR, tmp_path.resolve() / "file")
        dangling = classify(tmp_path / "dangling")
        assert (dangling.kind, dangling.path) == (NEW, tmp_path.resolve() / "sub" / "new.csv")
        assert classify(tmp_path / "fifo").kind == IN_PLACE
        assert classify(f"/dev/fd/{write}").kind == IN_PLACE
        assert classify("/dev/stdout").kind == IN_PLACE
    finally:
        os.close(read)
        os.close(write)
    with pytest.raises(IsADirectoryError, match="is a directory"):
        classify(tmp_path)


def test_a_regular_file_is_replaced_atomically_and_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    target.write_text("old")
    os.chmod(target, 0o640)
    before = os.stat(target).st_ino
    write_output(target, b"new")
    assert target.read_bytes() == b"new"
    assert os.stat(target).st_ino != before  # renamed over, not rewritten
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["out.csv"]


def test_a_parent_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"notes.txt is a file, not a directory"):
        write_output(tmp_path / "notes.txt" / "a" / "out.csv", b"x")


def test_a_pipe_through_dev_fd_is_written_in_place(tmp_path: Path) -> None:
    read, write = os.pipe()
    try:
        write_output(f"/dev/fd/{write}", b"through the pipe")
        os.close(write)
        write = -1
        assert os.read(read, 100) == b"through the pipe"
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_dev_stdout_redirected_to_a_file_keeps_the_shells_file(tmp_path: Path) -> None:
    """/dev/stdout -> /proc/self/fd/1 -> a regular file: written in place, so the file the
    shell opened (same inode) holds the CSV."""
    out = tmp_path / "redirected.csv"
    with open(out, "wb") as f:
        inode = os.fstat(f.fileno()).st_ino
        result = subprocess.run([sys.executable, "-m", "tui.cli", "export", str(RECORDING),
                                 "--format", "csv", "-o", "/dev/stdout"], cwd=ROOT, stdout=f,
                                stderr=subprocess.PIPE, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert os.stat(out).st_ino == inode
    assert out.read_text().startswith("step,")


def test_removing_an_unused_recording_never_removes_a_device_or_a_link(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "target").write_text("")
    (tmp_path / "link").symlink_to("target")
    remove_empty(classify(tmp_path / "fifo"))
    remove_empty(classify(tmp_path / "link"))
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
    assert (tmp_path / "link").is_symlink() and not (tmp_path / "target").exists()


# ---- every writer x every kind of path ----------------------------------------------------

def _export(path: Path) -> None:
    export(load(RECORDING), "csv", str(path))


def _record(path: Path) -> None:
    recording = load(RECORDING)
    with Recorder(path, recording.header, background_flush=False, fold=SummaryBuilder) as rec:
        for step in recording.steps[:50]:
            rec.write(step)
    assert rec.error is None


def _import_log(path: Path) -> None:
    from engine.analysis.logs.importer import import_log
    from engine.cli.import_log import write_reference

    log = import_log((ROOT / "tests" / "fixtures" / "logs" / "v0-metrics.log").read_bytes())
    write_reference(log, str(path))


def _fitted_toml(path: Path) -> None:  # what `fit -o` and `sweep.toml` go through
    write_output(path, b'preset = "demo"\n')


WRITERS: dict[str, tuple[Callable[[Path], None], str]] = {
    "export": (_export, ".csv"),
    "record": (_record, ".jsonl"),
    "record-zst": (_record, ".jsonl.zst"),
    "import-log": (_import_log, ".jsonl.zst"),
    "toml": (_fitted_toml, ".toml"),
}


def _check_output(data: bytes, suffix: str) -> None:
    if suffix == ".csv":
        assert data.startswith(b"step,")
    elif suffix == ".toml":
        assert data == b'preset = "demo"\n'
    elif suffix == ".jsonl":
        assert data.startswith(b'{"kind":"header"')
    else:
        assert data[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_symlink_is_followed_and_kept(tmp_path: Path, writer: str) -> None:
    write, suffix = WRITERS[writer]
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / f"out{suffix}"
    target.write_bytes(b"the old contents")
    link = tmp_path / f"link{suffix}"
    link.symlink_to(target)
    write(link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    _check_output(target.read_bytes(), suffix)
    assert sorted(os.listdir(tmp_path / "real")) == [target.name]  # no temporary file left


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_dangling_symlink_gets_its_target_made(tmp_path: Path, writer: str) -> None:
    write, suffix = WRITERS[writer]
    link = tmp_path / f"link{suffix}"
    link.symlink_to(f"later/out{suffix}")
    write(link)
    assert link.is_symlink()
    _check_output((tmp_path / "later" / f"out{suffix}").read_bytes(), suffix)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_fifo_delivers_the_output_and_stays_a_fifo(tmp_path: Path, writer: str) -> None:
    write, suffix = WRITERS[writer]
    fifo = tmp_path / f"fifo{suffix}"
    os.mkfifo(fifo)
    reader, got = _fifo_reader(fifo)
    write(fifo)
    reader.join(timeout=60)
    assert got, "the reader got nothing"
    _check_output(got[0], suffix)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == [fifo.name]


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_character_device_stays_a_device(tmp_path: Path, writer: str) -> None:
    write, suffix = WRITERS[writer]
    dev = _char_device(tmp_path)
    write(dev)
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert sorted(os.listdir(tmp_path)) == ["null"]


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_new_path_and_its_directories_are_made(tmp_path: Path, writer: str) -> None:
    write, suffix = WRITERS[writer]
    target = tmp_path / "a" / "b" / f"out{suffix}"
    write(target)
    _check_output(target.read_bytes(), suffix)


# ---- the commands, end to end ----------------------------------------------------------------

def observatory(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_run_record_into_a_fifo_and_a_device(tmp_path: Path) -> None:
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    reader, got = _fifo_reader(fifo)
    result = observatory("run", "--preset", "demo", "--max-steps", "5", "--record", str(fifo))
    reader.join(timeout=60)
    assert result.returncode in (0, 3), result.stderr
    assert got and got[0].startswith(b'{"kind":"header"') and b'"kind":"index"' in got[0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_run_record_into_a_device_leaves_the_device(tmp_path: Path) -> None:
    dev = _char_device(tmp_path)
    result = observatory("run", "--preset", "demo", "--max-steps", "5", "--record", str(dev))
    assert result.returncode in (0, 3), result.stderr
    assert stat.S_ISCHR(os.lstat(dev).st_mode)
    # a run that never starts (a bad flag found after the file opened) removes nothing it
    # did not make
    bad = observatory("run", "--preset", "demo", "--prompt-len", "999999", "--record", str(dev))
    assert bad.returncode == 2
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


@pytest.mark.parametrize("command", [
    ["run", "--preset", "demo", "--max-steps", "3", "--record"],
    ["sweep", "--preset", "demo", "--max-steps", "3", "--grid", "policy=off", "-o"],
    ["export", str(RECORDING), "--format", "csv", "-o"],
])
def test_a_path_under_a_file_says_so_in_one_line(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    result = observatory(*command, str(tmp_path / "notes.txt" / "out"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{tmp_path / 'notes.txt'} is a file, not a directory" in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_sweep_o_an_existing_file_says_so(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    result = observatory("sweep", "--preset", "demo", "--max-steps", "3", "--grid",
                         "policy=off", "-o", str(tmp_path / "notes.txt"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "is a file, not a directory" in result.stderr and "give another -o DIR" in result.stderr


def test_tiny_model_into_a_symlink_to_an_empty_directory(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    from engine.tiny_model import write_tiny_model

    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to("empty")
    write_tiny_model(tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert (tmp_path / "empty" / "config.json").is_file()


def test_export_to_a_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        export(load(RECORDING), "csv", str(tmp_path))


def test_fit_says_a_path_it_cannot_write_before_any_sim(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    log = ROOT / "tests" / "fixtures" / "logs" / "v0-metrics.log"
    result = observatory("fit", str(log), "-o", str(tmp_path / "notes.txt" / "fitted.toml"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "notes.txt is a file, not a directory" in result.stderr
    assert "fitting" not in result.stderr  # refused before the first sim
