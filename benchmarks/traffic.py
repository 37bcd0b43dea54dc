"""Bytes between the driver and the TFF worker per round, client states on the driver vs on the worker.

    .venv/bin/python -m benchmarks.traffic --setting=chem --algorithms fedavg fedstar --rounds 3

For each algorithm and each place of the client states (`--client_states`), in a fresh subprocess:
the bytes the driver sends to and receives from its worker per round (median over the rounds after
the first; `runtime.TrafficCounter`: the serialized protocol messages, what a network would carry),
of which the computation itself (TFF sends the compiled `next` with every call), and the clients'
state bytes (private weights, Adam moments, dropout generators of all clients).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _one(algorithm: str, setting: str, rounds: int, data_dir: str, client_states: str, split: str) -> dict:
  import tempfile  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow_federated.python.core.impl.computation import computation_impl  # pylint: disable=g-import-not-at-top
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  from tff_graph import config as config_lib, experiment, program_logic, runtime  # pylint: disable=g-import-not-at-top
  from tff_graph.federated import process as process_lib  # pylint: disable=g-import-not-at-top

  prepared = cache.prepare_setting(setting, data_dir=data_dir, split=split)
  config = config_lib.ExperimentConfig(algorithm, data=config_lib.DataConfig(setting=setting, split=split),
                                       run=config_lib.RunConfig(rounds=rounds, seeds=(1,)))
  counter = runtime.TrafficCounter()
  seen = []
  with runtime.execution_context(1, traffic=counter), tempfile.TemporaryDirectory() as state_dir:
    process = experiment.build_process(
        config, prepared, 1,
        worker_states=process_lib.WorkerStates(state_dir) if client_states == "worker" else None)
    seen.append(counter.snapshot())
    result = program_logic.train_process(process, prepared.clients, seed=1, rounds=rounds, eval_every=10**9,
                                         on_round=lambda *_: seen.append(counter.snapshot()))
    states = process.fetch_client_states(result.state.client_states)
  computation = computation_impl.ConcreteComputation.get_proto(runtime.compile_computation(process.next)).ByteSize()
  per_round = {k: float(np.median([b[k] - a[k] for a, b in zip(seen[1:-1], seen[2:])])) for k in ("sent", "received")}
  return {"algorithm": algorithm, "client_states": client_states, "clients": len(prepared.clients),
          "computation": computation, "state_bytes": int(sum(np.asarray(v).nbytes for v in tf.nest.flatten(states))),
          **per_round}


def main() -> None:
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--setting", default="chem")
  parser.add_argument("--algorithms", nargs="+", default=["fedavg", "fedstar"])
  parser.add_argument("--rounds", type=int, default=4, help="Rounds per run (the first is not counted).")
  parser.add_argument("--client_states", nargs="+", default=["driver", "worker"], choices=["driver", "worker"])
  parser.add_argument("--split", default="reference", choices=["reference", "numpy"])
  parser.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", "../shared/data/TUDataset"))
  parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.rounds < 3:
    parser.error("--rounds must be >= 3 (the first round is not counted)")
  if args.one:
    print(json.dumps(_one(args.one[0], args.setting, args.rounds, args.data_dir, args.one[1], args.split)))
    return
  print(common.machine())
  print(f"setting {args.setting} ({args.split} split), bytes per round (median of rounds 2..{args.rounds})")
  print(f"{'algorithm':10s} {'states':>6s} {'clients':>7s} {'sent MB':>8s} {'of which computation MB':>24s} "
        f"{'received MB':>11s} {'client states MB':>16s}")
  for algorithm in args.algorithms:
    for where in args.client_states:
      cmd = [sys.executable, "-m", "benchmarks.traffic", "--one", algorithm, where, "--setting", args.setting,
             "--rounds", str(args.rounds), "--data_dir", args.data_dir, "--split", args.split]
      r = common.run_json(cmd)
      print(f"{algorithm:10s} {where:>6s} {r['clients']:7d} {r['sent'] / 1e6:8.3f} {r['computation'] / 1e6:24.3f} "
            f"{r['received'] / 1e6:11.3f} {r['state_bytes'] / 1e6:16.3f}", flush=True)


if __name__ == "__main__":
  main()
