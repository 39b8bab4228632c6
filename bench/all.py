"""Regenerate docs/performance.md's figures: run the benches the page quotes, each in the venv
of the vLLM release it measures, and rewrite each figure's block from what the bench printed.

The page keeps its prose; a figure is the block between `<!-- figure: NAME -->` and
`<!-- /figure: NAME -->`, and this script owns it: the command that made it, the machine, the
load average before and after the run (the machine is shared, and load moves every ratio), the
date, and the bench's own summary lines, verbatim. A bench that fails leaves its block as it
was and makes the exit status 1. Venvs come from `.ci/venv EXTRA` (built once, then reused).

Run: python bench/all.py [--quick] [--only NAME ...] [--page PATH] [--list]
--quick runs each bench for a smoke test (few steps, one or two pairs) and prints the blocks
without touching the page unless --page names one (so a smoke run's figures never land in
docs/performance.md by accident).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "performance.md"


@dataclass(frozen=True)
class Figure:
    """One block of the page: which bench makes it, in which venv, and which of its printed
    lines are the figure (the rest is progress)."""

    name: str
    extra: str  # pyproject.toml's extra whose venv runs the bench
    args: tuple[str, ...]  # the bench script (under bench/) and its arguments
    quick: tuple[str, ...]  # the same for --quick
    keep: str  # a printed line is part of the figure when this matches it
    env: dict[str, str] = field(default_factory=dict)

    @property
    def script(self) -> str:
        return self.args[0]

    def command(self, quick: bool = False) -> str:
        """The command as a user types it (in the venv named by `extra`)."""
        env = "".join(f"{key}={value} " for key, value in sorted(self.env.items()))
        return f"{env}python {' '.join(self.quick if quick else self.args)}"


_V1 = {"PYTHONHASHSEED": "0"}  # V1 sim engines need it from interpreter start
FIGURES: tuple[Figure, ...] = (
    Figure("v1-observed", "vllm033", ("bench/bench_v1.py", "--pairs", "5"),
           ("bench/bench_v1.py", "--pairs", "1", "--steps", "300"),
           r"^(v1-thrash pair|v1-thrash, |one V1 step record|the observatory's own work)", _V1),
    Figure("v1-profile", "vllm033", ("bench/observer_profile.py",),
           ("bench/observer_profile.py", "--rounds", "1", "--steps", "200"),
           r"^(v1-thrash, |  )", _V1),
    Figure("v1-tier", "vllm033", ("bench/bench_v1.py", "--tier", "--pairs", "5"),
           ("bench/bench_v1.py", "--tier", "--pairs", "1", "--steps", "200"),
           r"^(v1-prefix-offload, |one V1 step record|the observatory's own work)", _V1),
    Figure("attach", "vllm050", ("bench/bench_attach.py",),
           ("bench/bench_attach.py", "--pairs", "1", "--requests", "8", "--max-tokens", "16"),
           r"^(pair \d|\d+ pairs of|the observer's own work)"),
    Figure("exec-timing", "vllm050", ("bench/bench_exec_timing.py",),
           ("bench/bench_exec_timing.py", "--steps", "50", "--pairs", "1"),
           r"^(load average|per call|  |sim engine)"),
    Figure("hunt-v0", "vllm050", ("bench/hunt_throughput.py",),
           ("bench/hunt_throughput.py", "--pairs", "1", "--cold", "1"),
           r"^(load average|pair \d|v0 )"),
    Figure("hunt-v1", "vllm034", ("bench/hunt_throughput.py",),
           ("bench/hunt_throughput.py", "--pairs", "1", "--cold", "1"),
           r"^(load average|pair \d|v1 )", _V1),
    Figure("fork-v1", "vllm033", ("bench/fork.py", "--kind", "v1"),
           ("bench/fork.py", "--kind", "v1", "--steps", "2000"),
           r"^(recorded|fork of)", _V1),
    Figure("fork-v0", "vllm050", ("bench/fork.py", "--kind", "v0"),
           ("bench/fork.py", "--kind", "v0"),
           r"^fork of"),
    Figure("startup-v0", "vllm050", ("bench/startup.py", "--runs", "5", "--cold"),
           ("bench/startup.py", "--runs", "1"), r"^startup v0"),
    Figure("startup-v1", "vllm034", ("bench/startup.py", "--runs", "5", "--cold"),
           ("bench/startup.py", "--runs", "1"), r"^startup v1", _V1),
)
"""Every figure the page generates, in page order."""

BEGIN = "<!-- figure: {name} -->"
END = "<!-- /figure: {name} -->"
_BLOCK = re.compile(r"<!-- figure: (?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /figure: (?P=name) -->",
                    re.S)


def machine() -> str:
    """The machine in a few words: cores and CPU model (as /proc/cpuinfo names it)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()}-core {model}"


def venv_python(extra: str) -> str:
    """The python of `extra`'s venv: `.ci/venv` prints its path on its last line."""
    out = subprocess.run(["bash", str(ROOT / ".ci" / "venv"), extra], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return str(Path(out.strip().splitlines()[-1]) / "bin" / "python")


def figure_lines(figure: Figure, output: str) -> list[str]:
    """The lines of a bench's output that make the figure."""
    keep = re.compile(figure.keep)
    return [line.rstrip() for line in output.splitlines() if keep.search(line)]


def render(figure: Figure, lines: list[str], *, quick: bool, load: tuple[float, float],
           when: _dt.datetime, where: str) -> str:
    """The block's text, markers included."""
    body = "\n".join(lines)
    return (f"{BEGIN.format(name=figure.name)}\n"
            f"Command: `{figure.command(quick)}` ({figure.extra} venv), run by "
            f"`python bench/all.py{' --quick' if quick else ''}`; {where}, load average "
            f"{load[0]:.1f} before and {load[1]:.1f} after; "
            f"{when.strftime('%Y-%m-%d %H:%M')} UTC.\n\n"
            f"```text\n{body}\n```\n"
            f"{END.format(name=figure.name)}")


def blocks(page: str) -> dict[str, str]:
    """NAME -> the block's body, for every figure block on the page."""
    return {m["name"]: m["body"] for m in _BLOCK.finditer(page)}


def rewrite(page: str, new: dict[str, str]) -> str:
    """`page` with the blocks named in `new` replaced (each value a whole rendered block);
    everything outside them, the prose, is kept as it was."""
    def swap(match: re.Match[str]) -> str:
        return new.get(match["name"], match[0])

    return _BLOCK.sub(swap, page)


def run(figure: Figure, quick: bool) -> str | None:
    """Run one bench; its rendered block, or None (and a line on stderr) if it failed."""
    try:
        python = venv_python(figure.extra)
    except (subprocess.CalledProcessError, OSError, IndexError) as exc:
        print(f"{figure.name}: no {figure.extra} venv ({exc}); its block is kept",
              file=sys.stderr)
        return None
    before = os.getloadavg()[0]
    when = _dt.datetime.now(_dt.timezone.utc)
    done = subprocess.run([python, *(figure.quick if quick else figure.args)], cwd=ROOT,
                          env={**os.environ, **figure.env}, capture_output=True, text=True)
    after = os.getloadavg()[0]
    lines = figure_lines(figure, done.stdout)
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"{figure.name}: `{figure.command(quick)}` exited {done.returncode} ({tail}); "
              f"its block is kept", file=sys.stderr)
        return None
    return render(figure, lines, quick=quick, load=(before, after), when=when, where=machine())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: few steps and pairs; the page is left alone "
                             "unless --page is given")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="run only these figures (--list names them)")
    parser.add_argument("--page", type=Path, default=None,
                        help=f"the page to rewrite (default {PAGE.relative_to(ROOT)})")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    args = parser.parse_args()
    if args.list:
        for figure in FIGURES:
            print(f"{figure.name}: {figure.command()} ({figure.extra} venv)")
        return 0
    names = {figure.name for figure in FIGURES}
    unknown = sorted(set(args.only or ()) - names)
    if unknown:
        print(f"bench/all.py: no figure {', '.join(unknown)}: use one of "
              f"{', '.join(sorted(names))}", file=sys.stderr)
        return 2
    page = args.page or (None if args.quick else PAGE)
    if page is not None and not page.is_file():
        print(f"bench/all.py: {page} is not a file: give the page to rewrite with --page",
              file=sys.stderr)
        return 2
    new: dict[str, str] = {}
    failed = False
    for figure in FIGURES:
        if args.only and figure.name not in args.only:
            continue
        print(f"{figure.name}: {figure.command(args.quick)} ...", flush=True)
        block = run(figure, args.quick)
        if block is None:
            failed = True
            continue
        new[figure.name] = block
        print(block, flush=True)
    if page is not None and new:
        text = page.read_text()
        missing = sorted(set(new) - set(blocks(text)))
        if missing:
            print(f"bench/all.py: {page} has no block for {', '.join(missing)}: add "
                  f"{BEGIN.format(name=missing[0])} ... {END.format(name=missing[0])}",
                  file=sys.stderr)
            return 2
        page.write_text(rewrite(text, new))
        print(f"rewrote {len(new)} figure(s) of {page}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
