"""What one call of a client's training costs in plain TensorFlow, beyond its compute.

A client trains inside a function that is called once per round; with small clients the cost of the
call itself dominates. This times `ClientWork.train` as a plain `tf.function` (traced once) over the
first clients of a setting, in three configurations, each in a fresh subprocess:

* `as built`: the library as it is;
* `tf.data rewrites on`: the clients' input pipelines with tf.data's default graph rewrites and
  autotuning switched back on (what `data_prep.graph_tensor.read_serialized_batches` switches off);
* `no grappler`: as built, plus TensorFlow's Grappler meta-optimizer off for the process (not
  possible inside the TFF worker; shows what remains of the call cost).

  .venv/bin/python -m benchmarks.client_call --setting=chem@12 --clients 8
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

MODES = ("as built", "tf.data rewrites on", "no grappler")


def _one(mode: str, setting: str, algorithm: str, clients: int, data_dir: str) -> dict:
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  from data_prep import graph_tensor as gt  # pylint: disable=g-import-not-at-top
  from tff_graph.federated import client_work as cw  # pylint: disable=g-import-not-at-top
  from tff_graph import config as config_lib, experiment, program_logic  # pylint: disable=g-import-not-at-top

  if mode == "no grappler":
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
  if mode == "tf.data rewrites on":
    built = gt.read_serialized_batches

    def with_rewrites(*args, **kwargs):
      options = tf.data.Options()
      options.experimental_optimization.apply_default_optimizations = True
      options.autotune.enabled = True
      return built(*args, **kwargs).with_options(options)

    cw.gt.read_serialized_batches = with_rewrites
  prepared = cache.prepare_setting(setting, data_dir=data_dir)
  config = config_lib.ExperimentConfig(algorithm, data=config_lib.DataConfig(setting=setting))
  process = experiment.build_process(config, prepared, 1)
  work = process._work()  # pylint: disable=protected-access
  start = program_logic.initial_state(process, prepared.clients, seed=1, rounds=1)
  shared = [tf.constant(w[0] if process.clustering else w) for w in start.server_state["shared"]]
  train = tf.function(work.train)
  n = len(prepared.clients)

  def call(i: int) -> float:
    inputs = tf.nest.map_structure(tf.constant, program_logic.client_data(prepared.clients[i], i, seed=1, round_num=0))
    state = tf.nest.map_structure(tf.constant, start.client_states[i])
    t = time.perf_counter()
    tf.nest.map_structure(lambda x: x.numpy(), train(shared, state, inputs))
    return time.perf_counter() - t

  call(0)  # Traces.
  times = [call(i % n) for i in range(clients)]
  return {"mode": mode, "ms_per_call": float(np.median(times)) * 1000,
          "traces": int(train.experimental_get_tracing_count()),
          "train_graphs": [int(prepared.clients[i % n].sizes["train"]) for i in range(clients)]}


def main() -> None:
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--setting", default="chem@12")
  parser.add_argument("--algorithm", default="fedavg")
  parser.add_argument("--clients", type=int, default=8, help="Calls to time (clients 0, 1, ...).")
  parser.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", "../shared/data/TUDataset"))
  parser.add_argument("--one", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.one:
    print(json.dumps(_one(args.one, args.setting, args.algorithm, args.clients, args.data_dir)))
    return
  print(common.machine())
  print(f"{args.algorithm} on {args.setting}: median of {args.clients} calls of ClientWork.train (plain TF)")
  for mode in MODES:
    cmd = [sys.executable, "-m", "benchmarks.client_call", "--one", mode, "--setting", args.setting,
           "--algorithm", args.algorithm, "--clients", str(args.clients), "--data_dir", args.data_dir]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{mode:22s} {r['ms_per_call']:8.1f} ms per call  (traces: {r['traces']}; train graphs per "
          f"client: {r['train_graphs']})", flush=True)


if __name__ == "__main__":
  main()
