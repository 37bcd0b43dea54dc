"""Memory floor of the stack: peak resident memory of a process that only imports, stage by stage.

Each stage runs in a fresh subprocess and prints its peak RSS (Linux ru_maxrss). The last stage also
starts a TFF worker (`tff_graph.runtime`), runs one trivial federated computation on it and reports
the worker's peak RSS. Together they are the least a TFF run can use before it holds any data or model
(compare with the `py GiB` / `worker GiB` columns of `benchmarks.round_time`).

  .venv/bin/python -m benchmarks.memory_floor
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

STAGES = {
    "python + numpy": "import numpy",
    "+ tensorflow": "import numpy, tensorflow",
    "+ tensorflow_gnn": "import numpy, tensorflow, tensorflow_gnn",
    "+ tensorflow_federated (and jax)": "import numpy, tensorflow, tensorflow_gnn, tensorflow_federated",
    "+ tff_graph, one TFF call on a worker": "trivial_call",
}


def _trivial_call() -> None:
  from benchmarks import scaling  # pylint: disable=g-import-not-at-top
  from tff_graph import program_logic  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  scaling.trivial_map_seconds(7, repeats=1)  # starts a worker, runs a federated_map on it, stops it


def _stage(code: str) -> dict:
  if code == "trivial_call":
    _trivial_call()
  else:
    exec(code, {})  # pylint: disable=exec-used
  return {"python_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
          "worker_gib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20}


def measure(code: str) -> dict:
  """`_stage(code)` in a fresh subprocess."""
  cmd = [sys.executable, "-m", "benchmarks.memory_floor", "--one", code]
  out = subprocess.run(cmd, capture_output=True, text=True, check=False)
  if out.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
  if len(sys.argv) == 3 and sys.argv[1] == "--one":
    print(json.dumps(_stage(sys.argv[2])))
    return
  if len(sys.argv) != 1:
    sys.exit(f"usage: python -m benchmarks.memory_floor   (no options; got {' '.join(sys.argv[1:])})")
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  print(common.machine())
  print(f"{'stage':40s} {'python GiB':>10s} {'worker GiB':>10s}")
  for name, code in STAGES.items():
    r = measure(code)
    worker = f"{r['worker_gib']:10.2f}" if code == "trivial_call" else f"{'':10s}"
    print(f"{name:40s} {r['python_gib']:10.2f} {worker}", flush=True)


if __name__ == "__main__":
  main()
