"""The V0 twin of bench/v1_releases.py: which V0 family each vLLM release from 0.5.0 to 0.10.2
resolves to, measured (its own uv venv with its companion pins, `seed-5578` under `off` and
`reserve`, `observatory verify` on the `off` recording). The machinery is v1_releases.py's
(it runs a V0 release the V0 way); this names the V0 range.

Run: python3.11 bench/v0_releases.py [--root DIR] [--steps N] [--write] [RELEASE ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import v1_releases  # noqa: E402

RANGE = ("0.5.0", "0.5.0.post1", "0.5.1", "0.5.2", "0.5.3", "0.5.3.post1", "0.5.4", "0.5.5",
         "0.6.0", "0.6.1", "0.6.1.post1", "0.6.1.post2", "0.6.2", "0.6.3", "0.6.3.post1",
         "0.6.4", "0.6.4.post1", "0.6.5", "0.6.6", "0.6.6.post1", "0.7.0", "0.7.1", "0.7.2",
         "0.7.3", "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.8.4", "0.8.5", "0.8.5.post1",
         "0.9.0", "0.9.0.1", "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.1.1", "0.10.2")

if __name__ == "__main__":
    sys.exit(v1_releases.main(RANGE))
