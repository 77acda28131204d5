#!/usr/bin/env python3
"""Side-by-side benchmarks for tmuxjail (issue 8): the command. The bench itself is the tjbench
package beside this file (see bench/README.md).

    python bench/run.py [--quick] [--json FILE] [--runs N] [--real-500] [--only PART]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tjbench.main import main

    sys.exit(main())
