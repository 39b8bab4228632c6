"""The execution flags of the commands that run their units on Ray (`sweep`'s cells,
`releases`' releases): declared once, so both say the same thing the same way."""

from __future__ import annotations

import argparse


def add_ray_flags(parser: argparse.ArgumentParser, units: str,
                  address_note: str = "") -> argparse._ArgumentGroup:
    """The "execution" group: --workers, --address, --node-ip-address, --ray-temp-dir and
    --serial, for `units` ("cells", "releases"); returned so a command can add its own."""
    x = parser.add_argument_group("execution")
    x.add_argument("--workers", type=int, metavar="N",
                   help=f"{units} at once (default: one per core; on a cluster: its CPUs)")
    x.add_argument("--address", metavar="HOST:PORT",
                   help="join a running Ray cluster (HOST:PORT, or auto) instead of "
                        "starting a local Ray runtime" + address_note)
    x.add_argument("--node-ip-address", metavar="IP",
                   help="this machine's address as Ray should see it (e.g. 127.0.0.1)")
    x.add_argument("--ray-temp-dir", metavar="DIR", help="Ray's temp/session directory")
    x.add_argument("--serial", action="store_true",
                   help=f"no Ray: run the {units} one by one in this process")
    return x


def check_ray_flags(args: argparse.Namespace, units: str) -> None:
    """--workers at least 1, and --serial without --address/--workers, in one line each."""
    from engine.errors import ConfigError

    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
    if args.serial and (args.address or args.workers):
        raise ConfigError(f"--serial runs {units} in this process: drop --address/--workers")
