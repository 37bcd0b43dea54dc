"""Flags shared by the programs, mapped onto the library's explicit arguments.

Everything a flag can get wrong is checked by `resolve` before any work starts (setting name, data
folder, rounds, seeds, model and training options), and reported as one `UsageError`.
"""

from __future__ import annotations

import os
import pathlib
import sys


from absl import flags
from absl import logging
import tensorflow as tf

from data_prep import cache
from data_prep import partition
from data_prep import tu
from tff_graph import algorithms
from tff_graph import experiment
from tff_graph import runtime

ALGORITHM_NAMES = list(algorithms.ALGORITHMS)
FLAGS = flags.FLAGS


class UsageError(ValueError):
  """A bad flag value, found before any work started."""


def define_experiment_flags() -> None:
  flags.DEFINE_string(
      "setting", "chem",
      "Clients: a group of the GCFL paper (molecules, small, biochem, mix) or of the FedStar paper "
      "(chem, biochem, biochemsn, biosncv), optionally with _tiny (150 graphs per dataset) and/or @k "
      "(k clients per dataset, e.g. chem@4); or <DATASET>:<N>[:overlap] (one dataset over N clients).")
  flags.DEFINE_integer("rounds", 200, "Communication rounds.", lower_bound=1)
  flags.DEFINE_list("seeds", ["1"], "Model seeds, comma separated (the papers use 1,2,3,4,5 and "
                    "10,42,79,111,123); each seed is one run on the same client splits.")
  flags.DEFINE_integer("split_seed", partition.DEFAULT_SPLIT_SEED, "Seed of the client partition.")
  flags.DEFINE_integer("local_epochs", 1, "Local epochs per round.", lower_bound=1)
  flags.DEFINE_integer("batch_size", 128, "Graphs per local batch.", lower_bound=1)
  flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate.", lower_bound=0.0)
  flags.DEFINE_float("weight_decay", 5e-4, "L2 weight decay added to the gradient (PyTorch Adam).", lower_bound=0.0)
  flags.DEFINE_float("proximal_mu", None, "FedProx mu (default: 0.01 for fedprox, 0 otherwise).", lower_bound=0.0)
  flags.DEFINE_integer("hidden", 64, "Hidden width of every layer.", lower_bound=1)
  flags.DEFINE_integer("num_layers", 3, "Graph convolutions per encoder.", lower_bound=1)
  flags.DEFINE_float("dropout", 0.5, "Dropout rate.", lower_bound=0.0, upper_bound=0.99)
  flags.DEFINE_enum("embedding_type", "rw_dg", ["rw", "dg", "rw_dg", "ones"],
                    "FedStar structure embedding: random-walk (rw), degree (dg), both, or all-ones.")
  flags.DEFINE_integer("n_rw", 16, "Random-walk steps of the RWSE.", lower_bound=1)
  flags.DEFINE_integer("n_dg", 16, "Width of the one-hot degree embedding.", lower_bound=1)
  flags.DEFINE_float("client_fraction", 1.0, "Share of clients sampled each round.", lower_bound=0.0,
                     upper_bound=1.0)
  flags.DEFINE_integer("eval_every", 1, "Evaluate val/test every k rounds (and after the last).", lower_bound=1)
  flags.DEFINE_integer("checkpoint_every", 10, "Checkpoint every k rounds.", lower_bound=1)
  flags.DEFINE_float("eps1", None, "GCFL: split a cluster when its mean update norm < eps1 "
                     "(default: the reference's value for the setting).")
  flags.DEFINE_float("eps2", None, "GCFL: ... and its largest client update norm > eps2 (default: reference).")
  flags.DEFINE_integer("seq_length", None, "GCFL+: length of the norm sequences compared by DTW (default: reference).")
  flags.DEFINE_bool("standardize", False, "GCFL+: divide each sequence by its std before DTW.")
  flags.DEFINE_string("data_dir", None, f"Folder with the TU <NAME>.zip files (default: ${tu.DEFAULT_DATA_DIR_ENV}).")
  flags.DEFINE_string("cache_dir", None, f"Prepared-data cache (default: ${cache.CACHE_DIR_ENV} or ~/.cache/tff_graph).")
  flags.DEFINE_bool("overwrite", False, "Replace a finished run (or another run) in the output folder.")
  flags.DEFINE_string(
      "workers", "", "TFF workers that run the client computations: empty = one private local worker; "
      "local:N = N local workers, started and stopped by this program; host:port,host:port = workers "
      "already running (started with `python -m programs.workers`, see README). Not part of the run's "
      "configuration: a run may be resumed on other workers.")


def start(argv: list[str]) -> bool:
  """Common program start: rejects stray positional arguments, quiets TF/TFF logging."""
  if len(argv) > 1:
    print(f"error: unexpected arguments {argv[1:]}", file=sys.stderr)
    return False
  quiet_logs()
  return True


def quiet_logs() -> None:
  """TF/TFF INFO chatter off by default (the progress line and results are what a user reads)."""
  logging.set_verbosity(logging.WARNING)
  tf.get_logger().setLevel("ERROR")


def overwrite() -> bool:
  return FLAGS.overwrite


def path(folder: str) -> pathlib.Path:
  return pathlib.Path(folder)


def worker_log(folder: str) -> str:
  """The TFF worker's own output goes to a log file beside the run (never to our stdout)."""
  pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
  return os.path.join(folder, "worker.log")


def workers() -> int | list[str]:
  try:
    return runtime.parse_workers(FLAGS.workers)
  except ValueError as e:
    raise UsageError(f"--{e}") from None


def execution_context(folder: str):
  """The TFF context of a program run: `--workers`, local workers logging beside the run."""
  return runtime.execution_context(workers(), log_path=worker_log(folder))


def experiment_config(algorithm: str) -> experiment.ExperimentConfig:
  try:
    seeds = tuple(int(s) for s in FLAGS.seeds)
  except ValueError:
    raise UsageError(f"--seeds must be integers, got {FLAGS.seeds}") from None
  try:
    return experiment.ExperimentConfig(
        algorithm=algorithm, setting=FLAGS.setting, rounds=FLAGS.rounds, seeds=seeds,
        local_epochs=FLAGS.local_epochs, batch_size=FLAGS.batch_size, learning_rate=FLAGS.learning_rate,
        weight_decay=FLAGS.weight_decay, hidden=FLAGS.hidden, num_layers=FLAGS.num_layers,
        dropout=FLAGS.dropout, embedding_type=FLAGS.embedding_type, client_fraction=FLAGS.client_fraction,
        proximal_mu=FLAGS.proximal_mu, eval_every=FLAGS.eval_every, checkpoint_every=FLAGS.checkpoint_every,
        eps1=FLAGS.eps1, eps2=FLAGS.eps2, seq_length=FLAGS.seq_length, standardize=FLAGS.standardize,
        split_seed=FLAGS.split_seed, n_rw=FLAGS.n_rw, n_dg=FLAGS.n_dg)
  except ValueError as e:
    raise UsageError(str(e)) from None


def prepare(config: experiment.ExperimentConfig) -> cache.PreparedSetting:
  try:
    partition.parse_setting(config.setting)
    tu.resolve_data_dir(FLAGS.data_dir)
    return cache.prepare_setting(config.setting, data_dir=FLAGS.data_dir, cache_dir=FLAGS.cache_dir,
                                 seed=config.split_seed, n_rw=config.n_rw, n_dg=config.n_dg)
  except (partition.SettingError, tu.TUFormatError) as e:
    raise UsageError(str(e)) from None


def resolve(algorithm: str):
  """(ExperimentConfig, PreparedSetting) from the flags, or UsageError."""
  config = experiment_config(algorithm)
  if FLAGS.client_fraction <= 0.0:
    raise UsageError("--client_fraction must be > 0")
  return config, prepare(config)


_last_width = [0]


def progress_line(status: dict) -> None:
  """One status line, rewritten in place on a terminal (a new line per update otherwise)."""
  line = (f"seed {status['seed']}  round {status['round']}/{status['rounds']}  "
          f"{status['elapsed']:.0f}s  avg test acc {status['test_accuracy'] * 100:.2f}")
  if sys.stderr.isatty():
    sys.stderr.write("\r" + line.ljust(_last_width[0]))
    _last_width[0] = len(line)
  else:
    sys.stderr.write(line + "\n")
  sys.stderr.flush()



def end_progress() -> None:
  if sys.stderr.isatty() and _last_width[0]:
    sys.stderr.write("\n")
