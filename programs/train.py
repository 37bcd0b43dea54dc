r"""Runs one algorithm on one setting as a TFF simulation and prints the average test accuracy.

Example (FedStar on CHEM, the paper's 200 rounds):
  python -m programs.train --algorithm=fedstar --setting=chem --rounds=200 \
      --data_dir=../shared/data/TUDataset
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from absl import logging  # noqa: E402

from data_prep import cache  # noqa: E402
from data_prep import partition  # noqa: E402
from data_prep import tu  # noqa: E402
from tff_graph import algorithms  # noqa: E402
from tff_graph import clustering  # noqa: E402
from tff_graph import gcfl  # noqa: E402
from tff_graph import runtime  # noqa: E402
from tff_graph.federated import driver  # noqa: E402

_ALGORITHM = flags.DEFINE_enum("algorithm", "fedstar", list(algorithms.ALGORITHMS), "Algorithm to run.")
_SETTING = flags.DEFINE_string("setting", "chem", "Setting (see data_prep.partition.parse_setting).")
_ROUNDS = flags.DEFINE_integer("rounds", 200, "Communication rounds.", lower_bound=1)
_SEED = flags.DEFINE_integer("seed", 1, "Model seed.")
_EVAL_EVERY = flags.DEFINE_integer("eval_every", 10, "Evaluate every k rounds (and at the end).", lower_bound=1)
_DATA_DIR = flags.DEFINE_string("data_dir", None, "TU data folder (default: $TFF_GRAPH_DATA).")
_CACHE_DIR = flags.DEFINE_string("cache_dir", None, "Cache folder (default: $TFF_GRAPH_CACHE).")
_EPS1 = flags.DEFINE_float("eps1", None, "GCFL: split when the mean update norm is below eps1 "
                           "(default: the reference's value for the setting).")
_EPS2 = flags.DEFINE_float("eps2", None, "GCFL: ... and the max update norm above eps2 (default: reference).")
_SEQ_LENGTH = flags.DEFINE_integer("seq_length", None, "GCFL+: length of the norm sequences (default: reference).")


def main(argv: list[str]) -> int:
  del argv
  try:
    prepared = cache.prepare_setting(_SETTING.value, data_dir=_DATA_DIR.value, cache_dir=_CACHE_DIR.value)
  except (tu.TUFormatError, partition.SettingError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  start = time.perf_counter()
  sim = driver.Simulation(prepared, driver.RunConfig(algorithm=_ALGORITHM.value, seed=_SEED.value,
                                                     eval_every=_EVAL_EVERY.value))

  def progress(s, reports, evaluation):
    del reports
    if evaluation is not None:
      acc = sum(m["test_accuracy"] for m in evaluation.values()) / len(evaluation)
      logging.info("round %d: average test accuracy %.4f (%.0fs)", s.round, acc, time.perf_counter() - start)

  report = None
  with runtime.local_execution_context():
    if sim.config.algo.clustering:
      base = clustering.thresholds_for(_SETTING.value)
      thresholds = clustering.dataclasses.replace(
          base, eps1=_EPS1.value if _EPS1.value is not None else base.eps1,
          eps2=_EPS2.value if _EPS2.value is not None else base.eps2,
          seq_length=_SEQ_LENGTH.value if _SEQ_LENGTH.value is not None else base.seq_length)
      result, report = gcfl.run_gcfl(sim, _ROUNDS.value, thresholds, on_round=progress)
    else:
      result = driver.run(sim, _ROUNDS.value, on_round=progress)
  best = report.best_snapshot_accuracy() if report else {}
  for cid, m in result.final.items():
    extra = f"  best snapshot {best[cid]:.4f}" if cid in best else ""
    print(f"{cid:16s} final test accuracy {m['test_accuracy']:.4f}{extra}")
  if report is not None:
    for event in report.splits:
      print(f"round {event.round}: split {list(event.cluster)} into {list(event.into[0])} | {list(event.into[1])}")
    print(f"clusters at the end: {report.clusters}")
    print(f"average best-snapshot test accuracy {sum(best.values()) / len(best):.4f}")
  print(f"{_ALGORITHM.value} on {_SETTING.value}, seed {_SEED.value}, {_ROUNDS.value} rounds: average test "
        f"accuracy {result.average():.4f} ({time.perf_counter() - start:.0f}s)")
  return 0


if __name__ == "__main__":
  app.run(main)
