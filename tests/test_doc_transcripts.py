"""The transcripts in the docs (```console blocks: `$ command`, what it prints, `[exit N]`) are
what the CLI prints today: each command runs in a fresh directory (recordings/ linked in) and
every line the transcript shows must appear in its output, in order, and it must exit as shown.
No engine runs: these are the CLI's own errors and a recording's reading (troubleshooting's
error texts, issue #37)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```console\n(.*?)^```", re.S | re.M)


def transcripts() -> list[tuple[str, list[tuple[str, list[str], int | None]]]]:
    """(page:line, [(command, lines it prints, exit status or None)]) per console block."""
    out = []
    for path in PAGES:
        text = path.read_text()
        for m in BLOCK.finditer(text):
            steps: list[tuple[str, list[str], int | None]] = []
            for line in m.group(1).splitlines():
                if line.startswith("$ "):
                    steps.append((line[2:], [], None))
                elif (said := re.fullmatch(r"\[exit (\d+)\]", line)) and steps:
                    command, lines, _ = steps[-1]
                    steps[-1] = (command, lines, int(said.group(1)))
                elif steps and line.strip():
                    steps[-1][1].append(line)
            where = f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}"
            out.append((where, steps))
    return out


TRANSCRIPTS = transcripts()


def test_the_docs_have_transcripts():
    assert sum(len(steps) for _, steps in TRANSCRIPTS) >= 5


@pytest.mark.parametrize("where, steps", TRANSCRIPTS, ids=[w for w, _ in TRANSCRIPTS])
def test_a_transcript_is_what_the_cli_prints(where, steps, tmp_path):
    (tmp_path / "recordings").symlink_to(ROOT / "recordings")
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    for command, lines, status in steps:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        printed = (done.stderr + done.stdout).splitlines()
        at = 0
        for line in lines:
            found = next((k for k in range(at, len(printed)) if printed[k].rstrip() == line),
                         None)
            assert found is not None, (f"{where}: `{command}` does not print {line!r}; it "
                                       f"printed:\n" + "\n".join(printed[:20]))
            at = found + 1
        if status is not None:
            assert done.returncode == status, f"{where}: `{command}` exited {done.returncode}"
        assert "Traceback" not in done.stderr
