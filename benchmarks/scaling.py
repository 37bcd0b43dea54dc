"""Client scaling on CHEM: each dataset split into k shards (k = 1, 2, 4, 8, 12 -> 7 ... 84 clients).

For each algorithm and k, in a fresh subprocess (`benchmarks.round_time.measure`): median warm round
time, CPU seconds per round of the Python driver and of the TFF worker, peak memory of both, and,
with `--accuracy_rounds R`, the average test accuracy after R rounds (the FedStar paper's scaling
figure uses 200).

The total data (and so the TF compute of a round) is the same for every k; only the number of
clients grows. A least-squares line through (clients, round s) therefore separates the cost that
grows with the number of clients (TFF: one client call, its graph instantiation and the transfer of
its state, per client) from the rest (local training on the same graphs); it is printed at the end.

  .venv/bin/python -m benchmarks.scaling --algorithms fedavg gcfl fedstar --ks 1 2 4 8 12
"""

from __future__ import annotations

import argparse
import itertools
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def trivial_map_seconds(clients: int, repeats: int = 3) -> float:
  """Seconds per call of a federated_map of `x + 1` over `clients` clients: TFF's own per-client cost
  when the client computation is tiny (to compare with the slope of the real rounds)."""
  import time  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tff_graph import runtime  # pylint: disable=g-import-not-at-top

  @tff.tensorflow.computation(np.float32)
  def inc(x):
    return x + 1.0

  @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
  def federated_inc(xs):
    return tff.federated_map(inc, xs)

  with runtime.execution_context(1):
    federated_inc([1.0] * clients)
    t = time.perf_counter()
    for _ in range(repeats):
      federated_inc([1.0] * clients)
    return (time.perf_counter() - t) / repeats


def main() -> None:
  import numpy as np  # pylint: disable=g-import-not-at-top
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  from benchmarks import round_time  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--group", default="chem")
  parser.add_argument("--algorithms", nargs="+", default=["fedavg", "gcfl", "fedstar"])
  parser.add_argument("--ks", nargs="+", type=int, default=[1, 2, 4, 8, 12])
  parser.add_argument("--rounds", type=int, default=3, help="Timed rounds after 2 warm-up rounds.")
  parser.add_argument("--accuracy_rounds", type=int, default=0, help="Also train this many rounds and "
                      "report the average test accuracy (0: timing only).")
  parser.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", "../shared/data/TUDataset"))
  parser.add_argument("--cache_dir", default=None)
  parser.add_argument("--split", default="numpy", choices=["reference", "numpy"],
                      help="Client split (default numpy: the papers' stratified split refuses chem@12, whose MUTAG "
                      "shards of 15-16 graphs cannot be stratified; the data and compute per round are the same).")
  parser.add_argument("--client_states", nargs="+", default=["driver"], choices=["driver", "worker"],
                      help="Where client states live between rounds (the programs' --client_states); several: "
                      "each algorithm and k is measured with each.")
  args = parser.parse_args()
  print(common.machine())
  print(f"{args.group}@k ({args.split} split), median of {args.rounds} warm rounds"
        + (f", accuracy after {args.accuracy_rounds} rounds" if args.accuracy_rounds else ""))
  print(f"{'algorithm':10s} {'states':>6s} {'k':>3s} {'clients':>7s} {'round s':>8s} {'driver cpu s':>12s} "
        f"{'worker cpu s':>12s} {'py GiB':>7s} {'worker GiB':>10s} {'accuracy':>8s}")
  fits = {}
  for algorithm, where in itertools.product(args.algorithms, args.client_states):
    points = []
    for k in args.ks:
      setting = args.group if k == 1 else f"{args.group}@{k}"
      r = round_time.measure(algorithm, setting, args.rounds, args.data_dir, args.cache_dir,
                             accuracy_rounds=args.accuracy_rounds, skip_tf=True, split=args.split,
                             client_states=where)
      points.append((r["clients"], r["round_s"]))
      acc = "" if r["accuracy"] is None else f"{r['accuracy'] * 100:.2f}"
      print(f"{algorithm:10s} {where:>6s} {k:3d} {r['clients']:7d} {r['round_s']:8.2f} {r['driver_cpu_s']:12.2f} "
            f"{r['worker_cpu_s']:12.2f} {r['python_peak_gib']:7.2f} {r['worker_peak_gib']:10.2f} {acc:>8s}",
            flush=True)
    if len(points) > 1:
      x, y = np.array(points, dtype=float).T
      fits[f"{algorithm} ({where} states)"] = (np.polyfit(x, y, 1), y[-1] / y[0], x[-1] / x[0])
  for algorithm, ((slope, intercept), growth, clients) in fits.items():
    print(f"{algorithm}: round s ~ {intercept:.2f} + {slope:.3f} x clients; {clients:.0f}x the clients -> "
          f"{growth:.1f}x the round time")
  n = 7 * max(args.ks)
  print(f"a trivial federated_map (x + 1) over {n} clients: {trivial_map_seconds(n):.4f} s per call")


if __name__ == "__main__":
  main()
