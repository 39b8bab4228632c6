"""`python -m engine.cli`: the headless commands, without the TUI."""

import sys

from engine.adapters.v1.platform import reexec_for_v1_sim

reexec_for_v1_sim(sys.orig_argv[1:])  # as the console script: V1 sim needs PYTHONHASHSEED=0
from engine.cli.registry import main  # noqa: E402

sys.exit(main())
