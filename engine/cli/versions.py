"""`observatory versions`: every vLLM release the release table knows (engine/adapters/
releases.json), the one installed here, the family each resolves to or why it is refused, and
the command that installs each. Reads package metadata only, so it works (and says what to
do) when vLLM is missing or unsupported."""

from __future__ import annotations

import argparse
import sys

from engine.adapters.release_table import load
from engine.adapters.versions import KNOWN, installed_version, nearest, release_for
from engine.cli.base import CLISubcommand
from engine.exit_status import ExitStatus


class Versions(CLISubcommand):
    name = "versions"
    help = "supported vLLM releases and how to install each"
    description = ("Every vLLM release from 0.5.0 on, from the release table (engine/adapters/"
                   "releases.json): the adapter family it resolves to and the date a bench "
                   "earned it, or why it is refused; `ci` marks the releases a CI line runs.")

    def cmd(self, args: argparse.Namespace) -> int:
        version = installed_version()
        installed = release_for(version)
        out = sys.stdout
        if version is None:
            out.write("installed: no vLLM\n")
        elif installed is None:
            near = nearest(version)
            out.write(f"installed: vLLM {version} (not supported; nearest supported: "
                      f"{near.version})\n")
        else:
            out.write(f"installed: vLLM {version} ({installed.engine.upper()} engine, adapter "
                      f"family {installed.family})\n")
        out.write("supported (ci: a CI line runs it; earned: the date the releases bench ran "
                  "it on its family):\n")
        out.write(f"   {'release':<12} {'engine':<6} {'family':<10} {'earned':<10} {'ci':<3} "
                  f"install\n")
        for release in KNOWN:
            mark = "*" if release is installed else " "
            out.write(f" {mark} {release.version:<12} {release.engine.upper():<6} "
                      f"{release.family:<10} {release.earned or '-':<10} "
                      f"{'ci' if release.ci else '':<3} {release.install}\n")
        refused = [row for row in load() if row.refused]
        if refused:
            out.write("refused:\n")
            for row in refused:
                out.write(f"   {row.version:<12} {row.engine.upper():<6} {row.refused}\n")
        return ExitStatus.OK
