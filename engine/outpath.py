"""Writing a file the user named: never replace what they named with something else.

Every command that writes to a path the user gives (`export -o`, `run --record`, `import-log
-o`, `fit -o`, the files of `sweep -o DIR`) goes through here, because the obvious atomic
write (a temporary file beside the target, renamed over it) is wrong for anything that is not a
regular file: run as root, `-o /dev/null` would delete the device and leave a plain file in its
place for every program on the machine; a FIFO, `/dev/stdout` or a terminal would be replaced
by a file nobody reads; a symlink would become a file and stop pointing where its owner meant.

So the target is classified first (`classify`):

- `-`: standard output, written as is;
- *in place*: anything that exists and is not a regular file once symlinks are followed (a
  character or block device, a FIFO, a socket), and anything reached through /proc or
  /dev/fd (`/dev/stdout` is a link to /proc/self/fd/1, which may even name a regular file the
  shell opened: replacing that file would detach the shell's descriptor from what we write);
- *regular* or *new*: symlinks followed to the file they name (the link is kept), and replaced
  atomically there, so a failure leaves the old file whole and a reader never sees half of it.

A parent that is not a directory (`--record notes.txt/run.jsonl`) is said in one line, not as
errno's "File exists" or "Not a directory".
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

STDOUT, IN_PLACE, REGULAR, NEW = "stdout", "in-place", "regular", "new"
_MAGIC = ("/proc/", "/dev/fd/")  # paths the kernel resolves to an open descriptor
_MAX_LINKS = 40  # the kernel's own limit (ELOOP)


@dataclass(frozen=True)
class Target:
    """Where `given` is written: `path` (symlinks followed, except through /proc or /dev/fd)
    and how (`kind`: STDOUT, IN_PLACE, REGULAR or NEW)."""

    given: str
    path: Path
    kind: str

    @property
    def replaceable(self) -> bool:
        """A regular file or a new path: written by temporary file and rename."""
        return self.kind in (REGULAR, NEW)


def classify(given: str | os.PathLike[str]) -> Target:
    """What writing to `given` must do. Follows the symlink chain by hand, so a hop through
    /proc or /dev/fd is seen even when the final name is a regular file."""
    text = os.fspath(given)
    if text == "-":
        return Target(text, Path("-"), STDOUT)
    path = os.path.abspath(text)
    for _ in range(_MAX_LINKS):
        if path.startswith(_MAGIC) or path in ("/dev/stdout", "/dev/stderr", "/dev/stdin"):
            return Target(text, Path(path), IN_PLACE)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return Target(text, Path(_real_parent(path)) / os.path.basename(path), NEW)
        except NotADirectoryError:
            raise _not_a_directory(path) from None
        if stat.S_ISLNK(st.st_mode):
            link = os.readlink(path)
            path = os.path.normpath(os.path.join(os.path.dirname(path), link))
            continue
        if stat.S_ISREG(st.st_mode):
            return Target(text, Path(_real_parent(path)) / os.path.basename(path), REGULAR)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{text} is a directory")
        return Target(text, Path(path), IN_PLACE)
    raise OSError(errno.ELOOP, f"{text}: too many levels of symbolic links")


def _real_parent(path: str) -> str:
    return os.path.realpath(os.path.dirname(path))


def ensure_parent(target: Target) -> None:
    """Make the directories above a new file; one readable OSError when a parent is a file."""
    if target.kind != NEW:
        return
    ensure_dir(target.path.parent)


def ensure_dir(directory: str | os.PathLike[str]) -> None:
    """`mkdir -p directory`, with an OSError whose strerror names the part that is not a
    directory (errno alone says "File exists")."""
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise _not_a_directory(os.fspath(directory)) from None


def _not_a_directory(path: str) -> OSError:
    """The first existing ancestor-or-self of `path` that is not a directory, named."""
    probe = Path(os.path.abspath(path))
    culprit = probe
    for part in reversed([probe, *probe.parents]):
        if part.exists() and not part.is_dir():
            culprit = part
            break
    what = "a file" if culprit.is_file() else "not a directory"
    return NotADirectoryError(errno.ENOTDIR, f"{culprit} is {what}, not a directory"
                              if what == "a file" else f"{culprit} is not a directory")


def open_output(given: str | os.PathLike[str]) -> tuple[IO[bytes], Target]:
    """A file to stream into (a recording): standard output, or `given` opened in place
    (symlinks followed; a regular file truncated, a device or FIFO written as it is). A
    stream cannot be atomic: a follower must see it grow."""
    target = classify(given)
    if target.kind == STDOUT:
        stdout = getattr(sys.stdout, "buffer", None)
        if stdout is None:  # started with stdout closed
            raise OSError(errno.EBADF, "stdout is closed")
        return stdout, target
    ensure_parent(target)
    return open(target.path, "wb"), target  # noqa: SIM115 (the caller closes it)


def write_output(given: str | os.PathLike[str], data: bytes) -> Target:
    """`data` to `given`: standard output, in place (a device, a FIFO, /dev/stdout), or
    atomically at the regular file a symlink chain ends in (the links stay links)."""
    target = classify(given)
    if target.kind == STDOUT:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return target
    if target.kind == IN_PLACE:
        with open(target.path, "wb") as f:
            f.write(data)
        return target
    ensure_parent(target)
    _replace(target.path, data)
    return target


def _replace(path: Path, data: bytes) -> None:
    """A temporary file in the same directory, flushed to disk, then renamed over `path`; it
    keeps an existing file's mode; removed if anything fails."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def remove_empty(target: Target) -> None:
    """Undo opening a file that stayed empty (a run that never started): the file is removed
    where it is a file (new, or a regular file already truncated); a device, a FIFO or
    standard output is left alone, and a symlink stays (only the file it named goes)."""
    if not target.replaceable:
        return
    try:
        os.unlink(target.path)
    except OSError:
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
