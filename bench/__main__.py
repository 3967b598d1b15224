"""`python -m bench` (`make bench`): run every bench/bench_*.py module's main() in turn.

Benchmarks print figures; they are not tests and assert nothing about speed. One benchmark
failing is reported and the others still run; the exit code says whether all of them ran.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def main() -> int:
    # `python -m bench` from the project root: make `bench.*` and the project importable.
    sys.path.insert(0, str(BENCH_DIR.parent))
    failures = []
    for path in sorted(BENCH_DIR.glob("bench_*.py")):
        name = f"bench.{path.stem}"
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        # Each benchmark starts from the same environment and folder, whatever the last one changed
        # (several point AUTOML_EVAL_HOME at a scratch project).
        environment, folder = dict(os.environ), os.getcwd()
        try:
            importlib.import_module(name).main()
        except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others' figures
            failures.append(name)
            traceback.print_exc()
        finally:
            os.environ.clear()
            os.environ.update(environment)
            os.chdir(folder)
        print(f"--- {name}: {time.perf_counter() - started:.1f} s", flush=True)
    if failures:
        print(f"\nbenchmarks that failed: {', '.join(failures)}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
