"""`observatory versions [RELEASE]`: every vLLM release the release table knows (engine/adapters/
releases.json), the one installed here, the family each resolves to or why it is refused, and
the command that installs each. Reads package metadata only, so it works (and says what to
do) when vLLM is missing or unsupported.

The listing fits the terminal (80 columns when there is none): the table holds the short
columns, the install commands follow one per release (a long one continued with ` \\`, still a
command a shell runs), and the refused releases are grouped by what is missing, since most
refusals say the same thing. `versions RELEASE` prints one release whole: its family and the
bench figures that earned it, or its refusal in full."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import textwrap
from collections.abc import Iterator

from engine.adapters.release_table import Row, load
from engine.adapters.versions import KNOWN, Release, installed_version, nearest, release_for
from engine.cli.base import CLISubcommand
from engine.errors import ConfigError
from engine.exit_status import ExitStatus

INDENT = "   "


class Versions(CLISubcommand):
    name = "versions"
    help = "supported vLLM releases and how to install each"
    description = ("Every vLLM release from 0.5.0 on, from the release table (engine/adapters/"
                   "releases.json): the adapter family it resolves to and the date a bench "
                   "earned it, or why it is refused; `ci` marks the releases a CI line runs. "
                   "With RELEASE, that release whole: its install command and the bench's "
                   "figures, or its refusal in full.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("release", metavar="RELEASE", nargs="?",
                            help="one release, e.g. 0.24.0 (default: all of them)")

    def cmd(self, args: argparse.Namespace) -> int:
        width = max(60, shutil.get_terminal_size((80, 24)).columns)
        out = sys.stdout
        if args.release is not None:
            out.write("\n".join(_one(args.release, width)) + "\n")
            return ExitStatus.OK
        out.write("\n".join(_all(width)) + "\n")
        return ExitStatus.OK


def _installed_line() -> str:
    version = installed_version()
    installed = release_for(version)
    if version is None:
        return "installed: no vLLM"
    if installed is None:
        return (f"installed: vLLM {version} (not supported; nearest supported: "
                f"{nearest(version).version})")
    return (f"installed: vLLM {version} ({installed.engine.upper()} engine, adapter family "
            f"{installed.family})")


def _all(width: int) -> Iterator[str]:
    installed = release_for(installed_version())
    yield _installed_line()
    yield "supported (ci: a CI line runs it; earned: the date the releases bench ran it"
    yield "on its family; `observatory versions RELEASE` prints one release whole):"
    yield f"{INDENT}{'release':<12} {'engine':<6} {'family':<10} {'earned':<10} ci"
    for release in KNOWN:
        mark = "*" if release is installed else " "
        yield (f" {mark} {release.version:<12} {release.engine.upper():<6} {release.family:<10} "
               f"{release.earned or '-':<10} {'ci' if release.ci else ''}".rstrip())
    yield "install:"
    for release in KNOWN:
        yield from _command(f"{INDENT}{release.version:<12} ", release.install, width)
    refused = [row for row in load() if row.refused]
    if refused:
        yield f"refused ({len(refused)}, grouped by what is missing):"
        for why, versions in _grouped(refused).items():
            yield from textwrap.wrap(why, width, initial_indent=INDENT,
                                     subsequent_indent=INDENT, break_on_hyphens=False)
            yield from textwrap.wrap(", ".join(versions), width, initial_indent=INDENT * 2,
                                     subsequent_indent=INDENT * 2)


def _grouped(refused: list[Row]) -> dict[str, list[str]]:
    """Refusals that differ only in the release they name (and the neighbours they cite) are
    one reason, said once, with the releases it holds for."""
    groups: dict[str, list[str]] = {}
    for row in refused:
        why = row.refused.split("; of its neighbours", 1)[0]
        why = re.sub(rf"(?<![\w.]){re.escape(row.version)}(?![\w.])", "RELEASE", why)
        groups.setdefault(why, []).append(row.version)
    return groups


def _command(label: str, command: str, width: int) -> Iterator[str]:
    """`label command` in `width` columns: a command too long for one line goes on in
    continuation lines (` \\`), split between its words, so a copy still runs."""
    words, line = command.split(" "), label
    pad = " " * len(label)
    for i, word in enumerate(words):
        if i and len(line) + len(word) + 2 > width:
            yield line + "\\"
            line = pad
        line += word + " "
    yield line.rstrip()


def _one(version: str, width: int) -> Iterator[str]:
    rows = {row.version: row for row in load()}
    row = rows.get(version)
    if row is None:
        near = nearest(version)
        raise ConfigError(f"vLLM {version} is not in the release table; the nearest release it "
                         f"knows is {near.version} (`observatory versions` lists them all)")
    release: Release | None = next((r for r in KNOWN if r.version == version), None)
    yield f"vLLM {row.version} ({row.engine.upper()} engine)"
    if release is None:
        yield from textwrap.wrap(f"refused: {row.refused}", width, subsequent_indent=INDENT,
                                 break_on_hyphens=False)
        return
    yield f"{INDENT}family   {release.family}"
    yield f"{INDENT}ci       {'a CI line runs it (extra ' + row.extra + ')' if row.extra else 'no'}"
    if row.earned and row.bench is not None:
        bench = row.bench
        if bench.off_max_preemptions is not None:
            figures = (f"most preemptions of one request {bench.off_max_preemptions} under off, "
                       f"{bench.fix_max_preemptions} under {bench.fix}")
        else:
            figures = (f"aborts at step {bench.off_abort_step} under off, {bench.fix} runs "
                       f"{bench.fix_steps} steps")
        yield from textwrap.wrap(f"earned   {row.earned}: {bench.preset} for {bench.steps} "
                                 f"steps, {figures}; verify {bench.verify}", width,
                                 initial_indent=INDENT, subsequent_indent=INDENT + " " * 9)
    yield from _command(f"{INDENT}install  ", release.install, width)
