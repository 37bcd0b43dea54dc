"""Flags shared by the programs, mapped onto the library's explicit arguments.

Everything a flag can get wrong is checked by `resolve` before any work starts (setting name, data
folder, rounds, seeds, model and training options), and reported as one `UsageError`.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pathlib
import sys
from typing import Any, Callable


from absl import flags
from absl import logging
import tensorflow as tf

from data_prep import cache
from data_prep import features
from data_prep import partition
from data_prep import tu
from programs import cli
from tff_graph import algorithms
from tff_graph import config as config_lib
from tff_graph import experiment
from tff_graph import program_logic
from tff_graph import runtime
from tff_graph.federated import client_work as cw

FLAGS = flags.FLAGS


class UsageError(ValueError):
  """A bad flag value, found before any work started."""


def _define(name: str, default, help_text: str, annotation: str, meta: dict) -> None:
  bounds = {k: meta[k] for k in ("lower_bound", "upper_bound") if k in meta}
  if "choices" in meta:
    flags.DEFINE_enum(name, default, list(meta["choices"]), help_text)
  elif annotation == "bool":
    flags.DEFINE_bool(name, default, help_text)
  elif annotation.startswith("int") and "tuple" not in annotation:
    flags.DEFINE_integer(name, default, help_text, **bounds)
  elif annotation.startswith("float"):
    flags.DEFINE_float(name, default, help_text, **bounds)
  elif annotation.startswith("tuple"):
    flags.DEFINE_list(name, [str(x) for x in default], help_text)
  else:
    flags.DEFINE_string(name, default, help_text)


def _config_fields():
  """(section, field name, default, help, annotation, metadata) of every flag of the config tree."""
  for section in (config_lib.DataConfig, config_lib.ModelConfig, config_lib.RunConfig, config_lib.ClusteringConfig,
                  config_lib.PrivacyConfig):
    name = {config_lib.DataConfig: "data", config_lib.ModelConfig: "model", config_lib.RunConfig: "run",
            config_lib.ClusteringConfig: "clustering", config_lib.PrivacyConfig: "privacy"}[section]
    for f in dataclasses.fields(section):
      yield name, f.name, f.default, f.metadata["help"], str(f.type), dict(f.metadata)
  defaults = cw.TrainingConfig()
  for field_name, (help_text, meta) in config_lib.TRAINING_FLAGS.items():
    yield "training", field_name, getattr(defaults, field_name), help_text, type(getattr(defaults, field_name)).__name__, meta
  mu = [f for f in dataclasses.fields(config_lib.ExperimentConfig) if f.name == "proximal_mu"][0]
  yield None, "proximal_mu", None, mu.metadata["help"], "float", {"lower_bound": 0.0}


def define_experiment_flags() -> None:
  """One flag per leaf of the configuration tree (`tff_graph.config`), plus the run's locations."""
  for _, name, default, help_text, annotation, meta in _config_fields():
    if name == "seeds":
      default = (1,)
      help_text += " Default: 1."
    _define(name, default, help_text, annotation, meta)
  flags.DEFINE_list("plugins", [], "Python modules to import before anything else, e.g. a module of yours that "
                    "registers algorithms with tff_graph.algorithms.register (they then work with --algorithm).")
  flags.DEFINE_string("data_dir", None, "Folder with the TU datasets, each <NAME>.zip or a folder <NAME>/ (any "
                      f"layout inside; default: ${tu.DEFAULT_DATA_DIR_ENV}).")
  flags.DEFINE_string("cache_dir", None, f"Prepared-data cache (default: ${cache.CACHE_DIR_ENV} or ~/.cache/tff_graph).")
  flags.DEFINE_bool("overwrite", False, "Replace a finished run (or another run) in the output folder.")
  flags.DEFINE_string(
      "workers", "", "TFF workers that run the client computations: empty = one private local worker; "
      "local:N = N local workers, started and stopped by this program; host:port,host:port = workers "
      "already running (started with `python -m programs.workers`, see README). Not part of the run's "
      "configuration: a run may be resumed on other workers.")
  flags.DEFINE_float(
      "stall_timeout", 1800.0, "Seconds one call to a worker may go unanswered before the run counts it as "
      "stalled (a rare TensorFlow deadlock, tff_graph/runtime.py): local workers are then restarted and the "
      "run resumes from its last checkpoint (at most --stall_restarts times); with --workers=host:port the "
      "run stops with an error instead. 0 = wait for ever.", lower_bound=0.0)
  flags.DEFINE_integer("stall_restarts", 3, "Restarts after stalled workers before the run gives up.",
                       lower_bound=0)


def start(argv: list[str]) -> bool:
  """Common program start: rejects stray positional arguments, quiets TF/TFF logging, imports plugins."""
  if cli.stray_arguments(argv):
    return False
  quiet_logs()
  for module in FLAGS.plugins:
    try:
      importlib.import_module(module)
    except ImportError as e:
      print(f"error: --plugins: cannot import {module!r}: {e}", file=sys.stderr)
      return False
  return True


def algorithm_help() -> str:
  return ("A registered algorithm (built in: " + ", ".join(algorithms.names())
          + "; more with --plugins).")


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
  return runtime.execution_context(workers(), log_path=worker_log(folder),
                                   stall_timeout=FLAGS.stall_timeout or None)


def run_restarting(folder: str, run: Callable[[bool], Any], *, context=None, restarts: int | None = None) -> Any:
  """`run(first)` inside a fresh execution context; after `WorkerStalled` on local workers, again in a
  new context (`first=False`: the run resumes from its checkpoints, so it must not overwrite them), at
  most `restarts` times (default --stall_restarts). Other errors, and stalls of remote workers, go up."""
  context = context or execution_context
  restarts = FLAGS.stall_restarts if restarts is None else restarts
  attempt = 0
  while True:
    try:
      with context(folder):
        return run(attempt == 0)
    except runtime.WorkerStalled as e:
      if attempt >= restarts or not isinstance(workers(), int):
        raise
      attempt += 1
      print(f"warning: {e}; restarting the workers and resuming from the last checkpoint (restart {attempt} of "
            f"{restarts})", file=sys.stderr)


def check_algorithm(name: str) -> str:
  """A registered algorithm's name (the registry is read now, so user registrations count)."""
  if name not in algorithms.names():
    raise UsageError(f"unknown algorithm {name!r}; choose one of {', '.join(algorithms.names())}")
  return name


def experiment_config(algorithm: str, *, strict: bool = True) -> experiment.ExperimentConfig:
  """The configuration tree from the flags; `strict`: an option the algorithm does not read is an error."""
  check_algorithm(algorithm)
  try:
    seeds = tuple(int(s) for s in FLAGS.seeds)
  except ValueError:
    raise UsageError(f"--seeds must be integers, got {FLAGS.seeds}") from None
  values: dict = {"data": {}, "model": {}, "run": {}, "clustering": {}, "training": {}, "privacy": {}}
  for section, name, *_ in _config_fields():
    if section is not None:
      values[section][name] = FLAGS[name].value
  values["run"]["seeds"] = seeds
  try:
    config = experiment.ExperimentConfig(
        algorithm=algorithm, proximal_mu=FLAGS.proximal_mu, data=config_lib.DataConfig(**values["data"]),
        model=config_lib.ModelConfig(**values["model"]), run=config_lib.RunConfig(**values["run"]),
        clustering=config_lib.ClusteringConfig(**values["clustering"]),
        training=cw.TrainingConfig(**values["training"]), privacy=config_lib.PrivacyConfig(**values["privacy"]))
    if strict:
      experiment.check_options(config)
  except ValueError as e:
    raise UsageError(str(e)).with_traceback(None) from None
  return config


def experiment_configs(names: list[str]) -> list[experiment.ExperimentConfig]:
  """One configuration per algorithm (a comparison): each option goes to the algorithms that read it,
  and an option that none of them reads is an error."""
  configs, unused = [], []
  for name in names:
    config, dropped = experiment.unused_options(experiment_config(name, strict=False))
    configs.append(config)
    unused.append({d.split("=")[0]: d for d in dropped})
  never = [d for key, d in unused[0].items() if all(key in u for u in unused)]
  if never:
    raise UsageError(f"none of {', '.join(names)} uses " + "; ".join(never) + ": leave these options out")
  return configs


def prepare(config: experiment.ExperimentConfig) -> cache.PreparedSetting:
  try:
    partition.parse_setting(config.setting)
    return experiment.prepare_data(config, data_dir=FLAGS.data_dir, cache_dir=FLAGS.cache_dir)
  except (partition.SettingError, tu.TUFormatError, features.FeatureError) as e:
    raise UsageError(str(e)) from None
  except OSError as e:  # E.g. the cache disk is full or read-only; nothing half-written is left in it.
    raise UsageError(f"cannot write the prepared data to the cache ({e.strerror or e}: {e.filename or ''}); "
                     f"free space or choose another --cache_dir / ${cache.CACHE_DIR_ENV}") from None


def resolve(algorithm: str):
  """(ExperimentConfig, PreparedSetting) from the flags, or UsageError."""
  config = experiment_config(algorithm)
  if FLAGS.client_fraction <= 0.0:
    raise UsageError("--client_fraction must be > 0")
  return config, prepare(config)


_last_width = [0]


# What can stop a run once it has started, each reported as one line (`report_run_error`).
RUN_ERRORS = (experiment.RunFolderError, runtime.WorkerError, program_logic.CheckpointError, OSError)


def report_run_error(e: Exception) -> int:
  """Prints one line for an error that stopped a run; returns the exit code (2: the folder was taken by
  another run; 1: the run stopped and resumes when the same command runs again)."""
  end_progress()
  if isinstance(e, experiment.RunFolderError):  # E.g. another run took the folder meanwhile.
    print(f"error: {e}", file=sys.stderr)
    return 2
  if isinstance(e, (runtime.WorkerError, program_logic.CheckpointError)):
    print(f"error: {e}", file=sys.stderr)
    return 1
  # Disk full, permissions changed under the run: resumable once fixed.
  print(f"error: cannot write the run ({e.strerror or e}: {e.filename or ''}); fix it and run the same command "
        "again to resume", file=sys.stderr)
  return 1


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
