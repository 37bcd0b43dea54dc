"""SHA-1 of everything a run has learnt after N rounds: the regression check for speed-ups and refactors.

    .venv/bin/python -m benchmarks.state_hash --setting=chem --algorithms fedavg gcfl fedstar --rounds 3

For each algorithm (each in a fresh subprocess) it runs `rounds` rounds of the program's own round loop
(`program_logic.train_process`, evaluation every `--eval_every` rounds, no checkpoints) on the TFF
context the programs use, and prints one line per algorithm:

    <algorithm> state <sha1 of the server state and every client state> eval <sha1 of every evaluation>

The state hash covers the shared weights, the aggregator and clustering state, every client's private
weights, Adam moments and step and dropout generator states, byte for byte (dtype, shape and bytes of
each array in the state's canonical order); the evaluation hash covers every per-client val/test loss
and accuracy of every evaluated round and the per-round train metrics. Run it in two trees (old code,
new code) and compare the lines: a change that claims to be bit-identical must print the same ones.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys

import numpy as np

from benchmarks import common

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _feed(h, value) -> None:
  if isinstance(value, dict):
    for k in sorted(value):
      h.update(str(k).encode())
      _feed(h, value[k])
  elif isinstance(value, (list, tuple)):
    h.update(f"[{len(value)}".encode())
    for v in value:
      _feed(h, v)
  else:
    a = np.ascontiguousarray(np.asarray(value))
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())


def digest(value) -> str:
  h = hashlib.sha1()
  _feed(h, value)
  return h.hexdigest()


def _one(algorithm: str, setting: str, rounds: int, eval_every: int, data_dir: str, cache_dir: str | None,
         seed: int, client_states: str = "driver") -> dict:
  import tempfile  # pylint: disable=g-import-not-at-top
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  from tff_graph import config as config_lib, experiment, program_logic, runtime  # pylint: disable=g-import-not-at-top
  from tff_graph.federated import process as process_lib  # pylint: disable=g-import-not-at-top

  prepared = cache.prepare_setting(setting, data_dir=data_dir, cache_dir=cache_dir)
  config = config_lib.ExperimentConfig(algorithm, data=config_lib.DataConfig(setting=setting),
                                       run=config_lib.RunConfig(rounds=rounds, seeds=(seed,)))
  evaluations = []
  train_metrics = []

  class _Collect:
    def __init__(self, into):
      self.into = into

    async def release(self, value, key):
      self.into.append((int(key), {k: float(v) for k, v in sorted(value.items())}))

  with runtime.execution_context(), tempfile.TemporaryDirectory() as state_dir:
    process = experiment.build_process(
        config, prepared, seed,
        worker_states=process_lib.WorkerStates(state_dir) if client_states == "worker" else None)
    result = program_logic.train_process(
        process, prepared.clients, seed=seed, rounds=rounds, eval_every=eval_every,
        releases=program_logic.Releases(train=_Collect(train_metrics), evaluation=_Collect(evaluations)))
    state = result.state.to_structure()
    state["client_states"] = process.fetch_client_states(result.state.client_states)  # The states themselves.
  return {"state": digest(state), "eval": digest([evaluations, train_metrics]),
          "average_test_accuracy": result.average(), "cpu": common.instruction_sets()}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--setting", default="chem")
  parser.add_argument("--algorithms", nargs="+", default=["fedavg", "gcfl", "fedstar"])
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--eval_every", type=int, default=1)
  parser.add_argument("--seed", type=int, default=1)
  parser.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", "../shared/data/TUDataset"))
  parser.add_argument("--cache_dir", default=None)
  parser.add_argument("--client_states", default="driver", choices=["driver", "worker"],
                      help="Where client states live between rounds (the hash is of the states either way).")
  parser.add_argument("--one", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.one:
    print(json.dumps(_one(args.one, args.setting, args.rounds, args.eval_every, args.data_dir, args.cache_dir,
                          args.seed, args.client_states)))
    return
  print(f"setting {args.setting}, {args.rounds} rounds, eval every {args.eval_every}, seed {args.seed}, "
        f"client states on the {args.client_states}")
  for algorithm in args.algorithms:
    cmd = [sys.executable, "-m", "benchmarks.state_hash", "--one", algorithm, "--setting", args.setting,
           "--rounds", str(args.rounds), "--eval_every", str(args.eval_every), "--seed", str(args.seed),
           "--data_dir", args.data_dir, "--client_states", args.client_states]
    if args.cache_dir:
      cmd += ["--cache_dir", args.cache_dir]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
      print(f"{algorithm}: failed\n{out.stderr[-3000:]}", file=sys.stderr)
      sys.exit(1)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{algorithm:22s} state {r['state']} eval {r['eval']} (test acc {r['average_test_accuracy']:.6f}; "
          f"{r['cpu']})", flush=True)


if __name__ == "__main__":
  main()
