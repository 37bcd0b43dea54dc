"""Seconds per round (median over warm rounds) and peak memory per algorithm, with the TF/TFF split.

For each algorithm, in a fresh subprocess:
* `round s`: median wall time of one round of `program_logic.train_process` (broadcast, local training of
  every client, aggregation) after 2 warm-up rounds;
* `seq tf s`: the same clients' local training as plain TensorFlow (the same `ClientWork.train`
  tf.function, no TFF), one client after the other. The TFF worker runs clients concurrently on the
  cores, so this is not a lower bound of a round; TFF's own cost shows best on a setting with
  little compute (`--setting=chem_tiny`), where the round time is almost all per-client overhead;
* `eval s`: one evaluation of every client (val + test);
* peak memory of the Python process and of the TFF worker process;
* `driver cpu` / `worker cpu`: CPU seconds per round of the Python driver and of the worker (from
  /proc): where a round's time goes between the driver (serialisation, clustering) and the worker.

  .venv/bin/python -m benchmarks.round_time --setting=chem --algorithms fedavg fedstar
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _children_cpu_s() -> float:
  """User+system CPU seconds used so far by this process's live children (the TFF workers)."""
  total = 0.0
  tick = os.sysconf("SC_CLK_TCK")
  for task in os.listdir(f"/proc/{os.getpid()}/task"):
    try:
      with open(f"/proc/{os.getpid()}/task/{task}/children") as f:
        pids = f.read().split()
    except OSError:
      continue
    for pid in pids:
      try:
        with open(f"/proc/{pid}/stat") as f:
          fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
      except OSError:
        pass
  return total


def _one(algorithm: str, setting: str, rounds: int, data_dir: str, cache_dir: str | None,
         workers: int = 1, accuracy_rounds: int = 0, skip_tf: bool = False, split: str = "reference",
         client_states: str = "driver") -> dict:
  import tempfile  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  from tff_graph import config as config_lib, experiment, program_logic, runtime  # pylint: disable=g-import-not-at-top
  from tff_graph.federated import process as process_lib  # pylint: disable=g-import-not-at-top

  prepared = cache.prepare_setting(setting, data_dir=data_dir, cache_dir=cache_dir, split=split)
  config = config_lib.ExperimentConfig(algorithm, data=config_lib.DataConfig(setting=setting, split=split),
                                       run=config_lib.RunConfig(rounds=rounds + 2, seeds=(1,)))
  worker_states = None
  if client_states == "worker":  # States in files where the clients run (removed at exit).
    state_dir = tempfile.TemporaryDirectory(prefix="tff_graph_states_")
    worker_states = process_lib.WorkerStates(state_dir.name)
  t = time.perf_counter()
  process = experiment.build_process(config, prepared, 1, worker_states=worker_states)
  build_s = time.perf_counter() - t
  times, driver_cpu, worker_cpu = [], [], []
  mark = {}

  def on_round(state, metrics):  # The program's own loop, timed between rounds.
    del state, metrics
    now = (time.perf_counter(), time.process_time(), _children_cpu_s())
    if mark:
      times.append(now[0] - mark["t"])
      driver_cpu.append(now[1] - mark["c"])
      worker_cpu.append(now[2] - mark["w"])
    mark.update(t=now[0], c=now[1], w=now[2])

  accuracy = None
  with runtime.execution_context(workers):
    on_round(None, None)
    result = program_logic.train_process(process, prepared.clients, seed=1, rounds=rounds + 2,
                                         eval_every=10**9, on_round=on_round)
    t = time.perf_counter()
    program_logic.evaluate(process, prepared.clients, result.state, seed=1)
    eval_s = time.perf_counter() - t
    if accuracy_rounds:
      result = program_logic.train_process(process, prepared.clients, seed=1, rounds=accuracy_rounds,
                                           eval_every=10**9, state=result.state)
      accuracy = result.average()
    state = result.state
    client_state_values = [] if skip_tf else process.fetch_client_states(state.client_states)
  worker_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
  # The same local training as plain TF (no TFF): inputs as tensors so the tf.function traces once.
  work = process._work()  # pylint: disable=protected-access
  shared = [tf.constant(w[0] if process.clustering else w) for w in state.server_state["shared"]]
  tf_times = []
  for _ in range(0 if skip_tf else 3):
    t = time.perf_counter()
    for i, c in enumerate(prepared.clients):
      inputs = tf.nest.map_structure(tf.constant, program_logic.client_data(c, i, seed=1, round_num=state.round))
      client_state = tf.nest.map_structure(tf.constant, client_state_values[i])
      tf.nest.map_structure(lambda x: x.numpy(), work.train(shared, client_state, inputs))
    tf_times.append(time.perf_counter() - t)
  return {"algorithm": algorithm, "clients": len(prepared.clients), "workers": workers, "build_s": build_s,
          "round_s": float(np.median(times[2:])),
          "tf_s": float(np.median(tf_times[1:])) if tf_times else float("nan"),
          "driver_cpu_s": float(np.median(driver_cpu[2:])), "worker_cpu_s": float(np.median(worker_cpu[2:])),
          "accuracy": accuracy, "accuracy_rounds": accuracy_rounds,
          "eval_s": eval_s, "python_peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
          "worker_peak_gib": worker_peak, "client_states": client_states}


def measure(algorithm: str, setting: str, rounds: int, data_dir: str, cache_dir: str | None,
            workers: int = 1, accuracy_rounds: int = 0, skip_tf: bool = False, split: str = "reference",
            client_states: str = "driver") -> dict:
  """`_one` in a fresh subprocess (clean peak-memory figures, no state shared between measurements)."""
  cmd = [sys.executable, "-m", "benchmarks.round_time", "--one", algorithm, "--setting", setting,
         "--rounds", str(rounds), "--data_dir", data_dir, "--workers", str(workers),
         "--accuracy_rounds", str(accuracy_rounds), "--split", split,
         "--client_states", client_states] + (["--skip_tf"] if skip_tf else [])
  if cache_dir:
    cmd += ["--cache_dir", cache_dir]
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  return common.run_json(cmd)


def main() -> None:
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--setting", default="chem")
  parser.add_argument("--algorithms", nargs="+", default=["fedavg", "fedstar"])
  parser.add_argument("--rounds", type=int, default=10, help="Timed rounds after 2 warm-up rounds.")
  parser.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", "../shared/data/TUDataset"))
  parser.add_argument("--cache_dir", default=None)
  parser.add_argument("--one", help=argparse.SUPPRESS)
  parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
  parser.add_argument("--accuracy_rounds", type=int, default=0, help=argparse.SUPPRESS)
  parser.add_argument("--skip_tf", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--split", default="reference", choices=["reference", "numpy"],
                      help="How clients are split 80/10/10 (data_prep.partition).")
  parser.add_argument("--client_states", default="driver", choices=["driver", "worker"],
                      help="Where client states live between rounds (as the programs' --client_states).")
  args = parser.parse_args()
  if args.one:
    print(json.dumps(_one(args.one, args.setting, args.rounds, args.data_dir, args.cache_dir, args.workers,
                          args.accuracy_rounds, args.skip_tf, args.split, args.client_states)))
    return
  print(common.machine())
  print(f"setting {args.setting}, median of {args.rounds} warm rounds")
  print(f"{'algorithm':16s} {'clients':>7s} {'round s':>8s} {'seq tf s':>8s} {'eval s':>7s} "
        f"{'build s':>8s} {'py GiB':>7s} {'worker GiB':>10s} {'driver cpu':>10s} {'worker cpu':>10s}")
  for algorithm in args.algorithms:
    r = measure(algorithm, args.setting, args.rounds, args.data_dir, args.cache_dir, split=args.split,
                client_states=args.client_states)
    print(f"{r['algorithm']:16s} {r['clients']:7d} {r['round_s']:8.2f} {r['tf_s']:8.2f} "
          f"{r['eval_s']:7.2f} {r['build_s']:8.1f} "
          f"{r['python_peak_gib']:7.2f} {r['worker_peak_gib']:10.2f} {r['driver_cpu_s']:10.2f} "
          f"{r['worker_cpu_s']:10.2f}", flush=True)


if __name__ == "__main__":
  main()
