"""`observatory versions`: the vLLM releases the observatory supports, the one installed here,
and the command that installs each. Reads package metadata only, so it works (and says what to
do) when vLLM is missing or unsupported."""

from __future__ import annotations

import argparse
import sys

from engine.adapters.versions import SUPPORTED, installed_version, nearest, release_for
from engine.cli.base import CLISubcommand
from engine.exit_status import ExitStatus


class Versions(CLISubcommand):
    name = "versions"
    help = "supported vLLM releases and how to install each"

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
        out.write("supported:\n")
        out.write(f"   {'release':<12} {'engine':<6} {'family':<10} install\n")
        for release in SUPPORTED:
            mark = "*" if release is installed else " "
            out.write(f" {mark} {release.version:<12} {release.engine.upper():<6} "
                      f"{release.family:<10} {release.install}\n")
        covered = [r for r in SUPPORTED if r.covers]
        if covered:
            out.write("also resolving to a family (run by bench/v1_releases.py; CI runs the "
                      "rows above):\n")
            for release in covered:
                out.write(f"   {', '.join(release.covers)} -> {release.family} "
                          f"(as {release.version})\n")
        return ExitStatus.OK
