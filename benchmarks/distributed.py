"""Round time on several local TFF workers next to the default (one worker), per algorithm.

Each measurement runs in a fresh subprocess (see `benchmarks.round_time`): `--workers` N local
worker_binary processes, clients split into one contiguous block per worker by TFF's
MergeableCompExecutionContext, partial aggregates merged by the driver process.

  .venv/bin/python -m benchmarks.distributed --setting=chem --algorithms fedstar --workers 1 2 4

On a machine with fewer cores than workers no speed-up is expected: the figure shows what the
multi-worker machinery costs (serialising weights and client states to each worker, one extra merge).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  from benchmarks import round_time  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--setting", default="chem")
  parser.add_argument("--algorithms", nargs="+", default=["fedstar"])
  parser.add_argument("--workers", nargs="+", type=int, default=[1, 2, 4])
  parser.add_argument("--rounds", type=int, default=10, help="Timed rounds after 2 warm-up rounds.")
  parser.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", "../shared/data/TUDataset"))
  parser.add_argument("--cache_dir", default=None)
  args = parser.parse_args()
  print(common.machine())
  print(f"setting {args.setting}, median of {args.rounds} warm rounds")
  print(f"{'algorithm':16s} {'clients':>7s} {'workers':>7s} {'round s':>8s} {'eval s':>7s} "
        f"{'py GiB':>7s} {'max worker GiB':>14s}")
  for algorithm in args.algorithms:
    for n in args.workers:
      r = round_time.measure(algorithm, args.setting, args.rounds, args.data_dir, args.cache_dir, workers=n)
      print(f"{algorithm:16s} {r['clients']:7d} {n:7d} {r['round_s']:8.2f} {r['eval_s']:7.2f} "
            f"{r['python_peak_gib']:7.2f} {r['worker_peak_gib']:14.2f}", flush=True)


if __name__ == "__main__":
  main()
