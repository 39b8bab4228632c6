"""`python -m engine.cli`: the headless commands, without the TUI."""

import sys

from engine.cli.registry import main

sys.exit(main())
