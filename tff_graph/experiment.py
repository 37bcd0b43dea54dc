"""Program logic: run one algorithm on one setting for several seeds, release results, resume.

Platform-agnostic (no flags, no contexts): `programs/` parses flags, opens the execution context and
calls `run_experiment`, which builds each seed's process (`tff_graph.algorithms`) and runs the one
loop (`tff_graph.program_logic.train_process`) with these release and state managers. A run folder holds

    config.json                  the resolved ExperimentConfig (+ plugged-in components; a rerun must match it)
    seed_<s>/train_metrics.csv   per round: every client's train metrics and the server metrics
    seed_<s>/eval_metrics.csv    per evaluated round: per-client and average val/test loss/accuracy
    seed_<s>/tensorboard/        the same as TensorBoard scalars (+ GCFL cluster count)
    seed_<s>/checkpoints/        checkpoints.NpzProgramStateManager: the loop state (process state, client states,
                                 history) as it is, every k rounds
    seed_<s>/final.json          final per-client metrics (+ GCFL report); marks the seed as done
    seed_<s>/models/<client>/    one SavedModel per client (TF-GNN serving convention)
    per_client.csv               client x seed final test accuracy (+ GCFL best snapshot)
    summary.csv                  per seed average, and the papers' aggregate over seeds
    accuracy.png, clusters.png   average test accuracy vs round; GCFL cluster count vs round
    DONE                         written last

A run killed at any moment and started again with the same configuration continues from the last
checkpoint of the unfinished seed; since every round depends only on the state before it (see
`tff_graph.program_logic`), it ends with the same results as an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import pathlib
import shutil
from typing import Any, Callable, Mapping

from absl import logging
import numpy as np
import tensorflow_federated as tff

from data_prep import cache
from data_prep import structure
from tff_graph import algorithms
from tff_graph import checkpoints
from tff_graph import privacy
from tff_graph import program_logic
from tff_graph import version
from tff_graph.config import ExperimentConfig
from tff_graph.federated import client_work as cw
from tff_graph.federated import process as process_lib
from tff_graph.models import classifiers
from tff_graph.models import export


class RunFolderError(ValueError):
  """The output folder holds another run, or a finished run that must not be overwritten."""


@dataclasses.dataclass(frozen=True)
class Components:
  """What a run may plug in besides its configuration (recorded by name in config.json).

  Attributes:
    algorithm: an `AlgorithmSpec` (default: the registered one named by the configuration).
    model_fn: `model_fn(seed, client)` -> a Keras model declaring its parts (default: the
      algorithm's model family built from the configuration's `ModelConfig`).
    model_aggregator: a `tff.aggregators` factory for the shared update (default: weighted mean).
  """

  algorithm: algorithms.AlgorithmSpec | None = None
  model_fn: process_lib.ModelFn | None = None
  model_aggregator: process_lib.Aggregator | None = None

  def describe(self) -> dict[str, str]:
    """Names of the plugged-in components (empty when all are defaults)."""
    out = {}
    if self.algorithm is not None:
      out["algorithm"] = f"{self.algorithm.build.__module__}.{getattr(self.algorithm.build, '__qualname__', '?')}"
    if self.model_fn is not None:
      out["model_fn"] = f"{self.model_fn.__module__}.{getattr(self.model_fn, '__qualname__', type(self.model_fn).__name__)}"
    if self.model_aggregator is not None:
      out["model_aggregator"] = f"{type(self.model_aggregator).__module__}.{type(self.model_aggregator).__qualname__}"
    return out


def write_atomic(path: pathlib.Path, text: str) -> None:
  """Writes `text` to `path` through a temporary file renamed into place (never half a file)."""
  tmp = path.with_name(f".{path.name}.tmp")
  tmp.write_text(text)
  os.replace(tmp, path)


def run_record(config: ExperimentConfig, components: Components = Components(),
               prepared: cache.PreparedSetting | None = None) -> str:
  """The text of config.json: the configuration (+ the plugged-in components' names, + the data's fingerprint)."""
  d = config.to_dict()
  if components.describe():
    d["components"] = components.describe()
  if prepared is not None:
    d["data_fingerprint"] = prepared.data_fingerprint()
    d["code_version"] = version.VERSION  # Recorded, not enforced: a fixed bug must not block a resume.
  return json.dumps(d, indent=1, sort_keys=True)


class RunLock:
  """An OS lock (`flock`) on `<folder>/.lock`, held while a run writes the folder.

  The kernel releases it when the process exits in any way (kill -9 included), so a crashed run never
  leaves a stale lock; a second run on the same folder gets a RunFolderError naming the holder's PID.
  """

  def __init__(self, folder: str | os.PathLike[str]):
    self.folder = pathlib.Path(folder)
    self._fd: int | None = None

  def __enter__(self) -> "RunLock":
    self.folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
      os.close(fd)
      raise RunFolderError(f"{self.folder} is being written by another run (PID {holder}); wait for it to end or "
                           "choose another output folder") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    self._fd = fd
    return self

  def __exit__(self, *exc) -> None:
    if self._fd is not None:
      fcntl.flock(self._fd, fcntl.LOCK_UN)
      os.close(self._fd)
      self._fd = None


LOCK_FILE = ".lock"
_NOT_RESULTS = {"worker.log", LOCK_FILE}


def check_output_folder(folder: str | os.PathLike[str]) -> None:
  """Raises RunFolderError unless `folder` is (or can be made) a writable folder that no other run holds."""
  folder = pathlib.Path(folder)
  if folder.exists() and not folder.is_dir():
    raise RunFolderError(f"output folder {folder} is a file; choose a folder")
  try:
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".write-test-{os.getpid()}"
    probe.write_text("")
    probe.unlink()
  except OSError as e:
    raise RunFolderError(f"cannot write to output folder {folder}: {e.strerror or e}") from None
  if (folder / LOCK_FILE).exists():  # Another run writing it: refused now, before any work.
    with RunLock(folder):
      pass


def _normalised(record: dict[str, Any]) -> Any:
  """A config.json's content with the defaults of fields added since it was written (e.g. data.split)."""
  record = dict(record)
  components = record.pop("components", None)
  record.pop("data_fingerprint", None)
  record.pop("code_version", None)
  try:
    d = ExperimentConfig.from_dict(record).to_dict()
    d["run"].pop("client_states")  # Where states live changes no result (a resumed seed keeps its own).
    return d, components
  except (TypeError, ValueError, KeyError):
    return record, components


def prepare_data(config: ExperimentConfig, *, data_dir: str | os.PathLike[str] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None,
                 datasets: Mapping[str, Any] | None = None) -> cache.PreparedSetting:
  """The prepared setting `config.data` describes (TU datasets from `data_dir`, or in-memory `datasets`)."""
  d = config.data
  return cache.prepare_setting(d.setting, data_dir=data_dir, cache_dir=cache_dir, seed=d.split_seed, n_rw=d.n_rw,
                               n_dg=d.n_dg, split=d.split, node_features=d.node_features,
                               standardize_attributes=d.standardize_attributes, datasets=datasets,
                               **config.extra_embeddings())


_OPTION_FIELDS = {  # Option group of AlgorithmSpec.options -> (config section, field) it governs.
    "proximal_mu": ((None, "proximal_mu"),),
    "clustering": (("clustering", "eps1"), ("clustering", "eps2"), ("clustering", "warmup_rounds")),
    "sequence": (("clustering", "seq_length"), ("clustering", "standardize")),
}


def unused_options(config: ExperimentConfig, components: Components = Components()) -> tuple[ExperimentConfig,
                                                                                             list[str]]:
  """(`config` with the options its algorithm does not read reset to their defaults, what was reset)."""
  algo = components.algorithm or algorithms.get(config.algorithm)
  defaults = ExperimentConfig(algorithm=config.algorithm)
  unused, changes = [], {}
  for group, fields in _OPTION_FIELDS.items():
    if group in algo.options:
      continue
    for section, name in fields:
      value = getattr(config if section is None else getattr(config, section), name)
      default = getattr(defaults if section is None else getattr(defaults, section), name)
      if value != default:
        users = [n for n in algorithms.names() if group in algorithms.get(n).options]
        unused.append(f"{name}={value} (read by {', '.join(users) or 'no registered algorithm'})")
        changes.setdefault(section, {})[name] = default
  if components.model_fn is None and algo.model_kind != classifiers.DECOUPLED_MODEL:
    for name in ("embedding_type", "structure_backbone"):
      if getattr(config.model, name) != getattr(defaults.model, name):
        unused.append(f"{name}={getattr(config.model, name)} (read by the structure-encoder models, e.g. fedstar)")
        changes.setdefault("model", {})[name] = getattr(defaults.model, name)
  if components.model_fn is not None:
    for name in ("backbone", "structure_backbone"):
      if getattr(config.model, name) != getattr(defaults.model, name):
        unused.append(f"{name}={getattr(config.model, name)} (a plugged-in model_fn builds its own model)")
        changes.setdefault("model", {})[name] = getattr(defaults.model, name)
  parts = structure.EmbeddingType(config.model.embedding_type).parts
  for name in ("lap", "spd"):
    if getattr(config.data, f"n_{name}") != getattr(defaults.data, f"n_{name}") and name not in parts:
      unused.append(f"n_{name}={getattr(config.data, f'n_{name}')} (read by the {name} embeddings)")
      changes.setdefault("data", {})[f"n_{name}"] = getattr(defaults.data, f"n_{name}")
  if config.privacy != defaults.privacy and (not algo.shared_parts or components.model_aggregator is not None):
    why = ("its own model_aggregator is plugged in" if components.model_aggregator is not None
           else "it shares nothing")
    unused.append(f"the privacy options ({why})")
    changes["privacy"] = dataclasses.asdict(defaults.privacy)
  top = changes.pop(None, {})
  stripped = dataclasses.replace(config, **top, **{k: dataclasses.replace(getattr(config, k), **v)
                                                   for k, v in changes.items()})
  return stripped, unused


def check_options(config: ExperimentConfig, components: Components = Components()) -> None:
  """Raises ValueError naming every option set away from its default that the algorithm does not read.

  An option an algorithm ignores would be recorded in config.json as if it had mattered (e.g. fedstar
  with a proximal mu); algorithms declare what they read in `AlgorithmSpec.options`.
  """
  _, unused = unused_options(config, components)
  if unused:
    raise ValueError(f"{config.algorithm} does not use " + "; ".join(unused) + ": leave these options out")


def check_data(config: ExperimentConfig, prepared: cache.PreparedSetting) -> None:
  """Raises ValueError when `prepared` is not the data `config.data` describes (config.json would lie)."""
  d = config.data
  wanted = {"setting": d.setting, "split": d.split, "split_seed": d.split_seed, "n_rw": d.n_rw, "n_dg": d.n_dg,
            "node_features": d.node_features, "standardize_attributes": d.standardize_attributes,
            **{k: v for k, v in config.extra_embeddings().items() if v}}
  have = prepared.options
  wrong = {k: (v, have.get(k, 0)) for k, v in wanted.items() if have.get(k, 0) != v}
  wrong.update({k: (0, v) for k, v in have.items() if k not in wanted})
  if wrong:
    raise ValueError("the prepared data is not the data the configuration describes: " + ", ".join(
        f"{k}: config {a!r}, data {b!r}" for k, (a, b) in wrong.items()) + " (use experiment.prepare_data(config))")


def input_spec_of(config: ExperimentConfig, prepared: cache.PreparedSetting) -> cw.InputSpec:
  return cw.InputSpec(feature_dim=max(c.feature_dim for c in prepared.clients),
                      num_classes=max(c.num_classes for c in prepared.clients),
                      n_rw=config.data.n_rw, n_dg=config.data.n_dg, n_lap=prepared.n_lap, n_spd=prepared.n_spd)


def model_fn_of(config: ExperimentConfig, prepared: cache.PreparedSetting,
                components: Components = Components()) -> process_lib.ModelFn:
  if components.model_fn is not None:
    return components.model_fn
  algo = components.algorithm or algorithms.get(config.algorithm)
  spec = input_spec_of(config, prepared)
  return classifiers.model_fn_for(config.model_spec(algo.model_kind, algo.backbone, feature_dim=spec.feature_dim,
                                                    num_classes=spec.num_classes))


def model_aggregator_of(config: ExperimentConfig, components: Components = Components(), seed: int = 0):
  """The aggregator of the shared update: the plugged-in one, or the configuration's DP / secure one
  (DP noise seeded by the run seed)."""
  if components.model_aggregator is not None:
    return components.model_aggregator
  return privacy.aggregator(config.privacy.spec(), seed=seed)


def privacy_metrics(config: ExperimentConfig, num_clients: int) -> Callable[[int], dict[str, float]] | None:
  """round -> {"privacy/epsilon", "privacy/clip", "privacy/noise_stddev", ...} for a DP run (None otherwise):
  TF-Privacy's Gaussian sum query measures nothing itself, so the mechanism's parameters are released
  beside the privacy spent (see `tff_graph.privacy`)."""
  spec = config.privacy.spec()
  if not spec.dp:
    return None
  per_round = len(program_logic.sample_clients(num_clients, config.run.client_fraction, seed=0, round_num=1))
  return lambda r: {"privacy/epsilon": privacy.epsilon(spec, num_clients=num_clients, clients_per_round=per_round,
                                                       rounds=r),
                    "privacy/clip": spec.clip, "privacy/noise_stddev": spec.noise_multiplier * spec.clip,
                    "privacy/clients_per_round": float(per_round)}


def build_process(config: ExperimentConfig, prepared: cache.PreparedSetting, seed: int,
                  components: Components = Components(), *,
                  worker_states: process_lib.WorkerStates | None = None) -> process_lib.GraphProcess:
  """The algorithm's process for one seed of the experiment; with `worker_states`, one that keeps its
  client states there (built once when the algorithm's builder passes `BuildContext.worker_states` on,
  as the built-in ones do; rebuilt with `process.with_worker_states` when it does not)."""
  algo = components.algorithm or algorithms.get(config.algorithm)
  context = algorithms.BuildContext(
      model_fn=model_fn_of(config, prepared, components), input_spec=input_spec_of(config, prepared),
      training=config.training, init_seed=program_logic.init_seed(seed), num_clients=len(prepared.clients),
      model_aggregator=model_aggregator_of(config, components, seed), proximal_mu=config.proximal_mu,
      thresholds=config.thresholds(), worker_states=worker_states)
  process = algo.build(context)
  if worker_states is None or process.worker_states == worker_states:
    return process
  if process.worker_states is None:
    return process_lib.with_worker_states(process, worker_states.directory)
  raise process_lib.ProcessError(f"algorithm {algo.name!r} built a process keeping its client states in "
                                 f"{process.worker_states.directory}, not {worker_states.directory}")


def parameter_counts(config: ExperimentConfig, prepared: cache.PreparedSetting,
                     components: Components = Components()) -> tuple[int, int]:
  """(total, shared) trainable parameters of the widest client's model (from the configuration)."""
  algo = components.algorithm or algorithms.get(config.algorithm)
  model = model_fn_of(config, prepared, components)(0, None)
  counts = classifiers.parameter_counts(model)
  return counts["total"], sum(counts[p] for p in algo.shared_parts)


def check_run_folder(path: pathlib.Path, config: ExperimentConfig, *, overwrite: bool = False,
                     allow_finished: bool = False, components: Components = Components(),
                     prepared: cache.PreparedSetting | None = None) -> None:
  """Raises RunFolderError if `path` holds another run's results, or a finished run (unless overwrite),
  or a run of this configuration on other data (`prepared` differs from what the run recorded).

  With overwrite, an existing run folder is emptied. Otherwise a matching unfinished run is resumed,
  and with `allow_finished` a matching finished run is accepted (its results are loaded, not rerun).
  """
  path = pathlib.Path(path)
  if path.exists() and not path.is_dir():
    raise RunFolderError(f"output folder {path} is a file; choose a folder")
  saved = path / "config.json"
  if overwrite and path.exists():
    for child in path.iterdir():  # Not the lock file: the caller may hold it.
      if child.name != LOCK_FILE:
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
  if not path.exists():
    return
  if not saved.is_file():
    if any(p.name not in _NOT_RESULTS for p in path.iterdir()):
      raise RunFolderError(f"{path} is not empty and holds no run of tff-graph; choose another output folder")
    return
  try:
    recorded = json.loads(saved.read_text())
  except (OSError, ValueError) as e:
    raise RunFolderError(f"{saved} cannot be read ({e}); choose another output folder or pass overwrite") from None
  if _normalised(recorded) != _normalised(json.loads(run_record(config, components))):
    raise RunFolderError(f"{path} holds a run with another configuration ({saved}); choose another "
                         "output folder, or pass overwrite to replace it")
  if prepared is not None and "data_fingerprint" in recorded:
    _check_same_data(path, recorded["data_fingerprint"], prepared.data_fingerprint())
  if (path / "DONE").exists() and not allow_finished:
    raise RunFolderError(f"{path} holds a finished run; pass overwrite to run it again")


def _check_same_data(path: pathlib.Path, recorded: dict[str, Any], now: dict[str, Any]) -> None:
  changed = [f"{name} (content {old[:10]} -> {now['datasets'].get(name, 'absent')[:10]})"
             for name, old in recorded.get("datasets", {}).items() if now["datasets"].get(name) != old]
  if changed:
    raise RunFolderError(f"{path} holds a run of this configuration on other data: the content of "
                         f"{', '.join(changed)} changed since it started; restore that data, or choose another output "
                         "folder (or pass overwrite) to start again on this data")
  if recorded.get("clients") != now["clients"]:
    raise RunFolderError(f"{path} holds a run of this configuration whose clients held other graphs; choose "
                         "another output folder (or pass overwrite)")


def _average(metrics: dict[str, dict[str, float]], name: str) -> float:
  return float(np.mean([m[name] for m in metrics.values()]))


@dataclasses.dataclass
class SeedResult:
  seed: int
  final: dict[str, dict[str, float]]
  curve: list[tuple[int, float]]  # (round, average test accuracy)
  gcfl: dict[str, Any] | None
  privacy: dict[str, Any] | None = None  # DP runs: epsilon spent at delta, noise multiplier, clip, rounds.


def client_states_of(folder: pathlib.Path, configured: str) -> str:
  """Where a seed's client states live: as configured for a new seed; a seed with checkpoints keeps the
  place they use (references need `<folder>/client_states`; full states are in the checkpoint)."""
  if not any((folder / "checkpoints").glob("*")):
    return configured
  kept = "worker" if (folder / "client_states").is_dir() else "driver"
  if kept != configured:
    logging.warning("%s resumes with the client states on the %s, where its checkpoints keep them", folder, kept)
  return kept


def run_seed(prepared: cache.PreparedSetting, config: ExperimentConfig, seed: int, folder: pathlib.Path, *,
             progress: Callable[[dict[str, Any]], None] | None = None,
             components: Components = Components()) -> SeedResult:
  """Runs (or resumes, or loads if finished) one seed; releases metrics; exports SavedModels."""
  done = folder / "final.json"
  if done.is_file():
    data = json.loads(done.read_text())
    return SeedResult(seed, data["final"], [tuple(x) for x in data["curve"]], data.get("gcfl"), data.get("privacy"))
  folder.mkdir(parents=True, exist_ok=True)
  state_manager = checkpoints.NpzProgramStateManager(folder / "checkpoints", keep_total=2)
  state_manager.remove_temporary_files()  # Left by a kill while saving.
  run = config.run
  worker_states = None
  if client_states_of(folder, run.client_states) == "worker":
    (folder / "client_states").mkdir(exist_ok=True)
    worker_states = process_lib.WorkerStates(str((folder / "client_states").resolve()))
  process = build_process(config, prepared, seed, components, worker_states=worker_states)
  releases = program_logic.Releases(
      train=tff.program.CSVFileReleaseManager(str(folder / "train_metrics.csv"), key_fieldname="round"),
      evaluation=tff.program.CSVFileReleaseManager(str(folder / "eval_metrics.csv"), key_fieldname="round"),
      board=tff.program.TensorBoardReleaseManager(str(folder / "tensorboard")))
  result = program_logic.train_process(
      process, prepared.clients, seed=seed, rounds=run.rounds, client_fraction=run.client_fraction,
      eval_every=run.eval_every, checkpoint_every=run.checkpoint_every,
      state_manager=state_manager,
      releases=releases, progress=progress, round_metrics=privacy_metrics(config, len(prepared.clients)))
  state = result.state
  spec = process.input_spec
  client_states = process.fetch_client_states(state.client_states)
  for i, c in enumerate(prepared.clients):
    model = process.client_model(state.server_state, client_states[i], i, program_logic.client_spec(c))
    export.export_saved_model(model, folder / "models" / c.client_id, input_spec=spec,
                              feature_dim=c.feature_dim, num_classes=c.num_classes)
  report = result.clustering_report()
  record = {"final": result.final, "curve": result.curve, "gcfl": report}
  spent = privacy_metrics(config, len(prepared.clients))
  if spent is not None:
    p = config.privacy
    record["privacy"] = {"epsilon": spent(run.rounds)["privacy/epsilon"], "delta": p.dp_delta,
                         "noise_multiplier": p.dp_noise_multiplier, "clip": p.dp_clip, "rounds": run.rounds}
  tmp = done.with_suffix(".tmp")
  tmp.write_text(json.dumps(record, indent=1))
  os.replace(tmp, done)
  return SeedResult(seed, result.final, result.curve, report, record.get("privacy"))


@dataclasses.dataclass
class ExperimentResult:
  config: ExperimentConfig
  seeds: list[SeedResult]

  def per_client(self, metric: str = "test_accuracy") -> dict[str, list[float]]:
    ids = list(self.seeds[0].final)
    return {cid: [s.final[cid][metric] for s in self.seeds] for cid in ids}

  def aggregate(self) -> tuple[float, float]:
    """The papers' aggregate: mean over clients of per-client means ± mean of per-client stds."""
    per = self.per_client()
    return (float(np.mean([np.mean(v) for v in per.values()])),
            float(np.mean([np.std(v) for v in per.values()])))


def write_tables(folder: pathlib.Path, result: ExperimentResult) -> None:
  """per_client.csv and summary.csv (see module docstring)."""
  per = result.per_client()
  seeds = [s.seed for s in result.seeds]
  best = [s.gcfl["best_snapshot_accuracy"] if s.gcfl else None for s in result.seeds]
  lines = ["client," + ",".join(f"seed_{s}" for s in seeds) + ",mean,std"
           + ("," + ",".join(f"best_snapshot_seed_{s}" for s in seeds) if best[0] else "")]
  for cid, values in per.items():
    row = f"{cid}," + ",".join(f"{v:.4f}" for v in values) + f",{np.mean(values):.4f},{np.std(values):.4f}"
    if best[0]:
      row += "," + ",".join(f"{b[cid]:.4f}" for b in best)
    lines.append(row)
  (folder / "per_client.csv").write_text("\n".join(lines) + "\n")
  mean, std = result.aggregate()
  rows = ["seed,average_test_accuracy"] + [f"{s.seed},{_average(s.final, 'test_accuracy'):.4f}"
                                           for s in result.seeds]
  rows.append(f"aggregate_mean,{mean:.4f}")
  rows.append(f"aggregate_std,{std:.4f}")
  (folder / "summary.csv").write_text("\n".join(rows) + "\n")


def write_plots(folder: pathlib.Path, result: ExperimentResult) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6, 4))
  for s in result.seeds:
    rounds, acc = zip(*s.curve)
    ax.plot(rounds, acc, label=f"seed {s.seed}")
  ax.set_xlabel("round")
  ax.set_ylabel("average test accuracy")
  ax.set_title(f"{result.config.algorithm} on {result.config.setting}")
  ax.legend()
  fig.tight_layout()
  fig.savefig(folder / "accuracy.png", dpi=100)
  plt.close(fig)
  if result.seeds[0].gcfl:
    fig, ax = plt.subplots(figsize=(6, 4))
    for s in result.seeds:
      counts = s.gcfl["cluster_counts"]
      ax.step(range(1, len(counts) + 1), counts, where="post", label=f"seed {s.seed}")
      for e in s.gcfl["splits"]:
        ax.axvline(e["round"], color="grey", alpha=0.3)
    ax.set_xlabel("round")
    ax.set_ylabel("clusters")
    ax.set_title(f"{result.config.algorithm}: cluster splits")
    ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "clusters.png", dpi=100)
    plt.close(fig)


def run_experiment(config: ExperimentConfig, prepared: cache.PreparedSetting, folder: str | os.PathLike[str], *,
                   overwrite: bool = False, allow_finished: bool = False,
                   progress: Callable[[dict[str, Any]], None] | None = None,
                   components: Components = Components()) -> ExperimentResult:
  """Runs every seed (resuming unfinished ones, loading finished ones), then writes tables, plots, DONE.

  `components` plugs in a user's algorithm, model or aggregator; the run still gets every output
  (CSV, TensorBoard, checkpoints and resume, SavedModels, tables, plots).
  """
  folder = pathlib.Path(folder)
  if components.algorithm is not None and components.algorithm.name != config.algorithm:
    raise ValueError(f"config.algorithm is {config.algorithm!r} but the given algorithm is "
                     f"{components.algorithm.name!r}")
  check_options(config, components)
  check_data(config, prepared)
  check_output_folder(folder)
  with RunLock(folder):
    check_run_folder(folder, config, overwrite=overwrite, allow_finished=allow_finished, components=components,
                     prepared=prepared)
    record = run_record(config, components, prepared)
    if not (folder / "config.json").is_file() or "data_fingerprint" not in json.loads(
        (folder / "config.json").read_text()):
      write_atomic(folder / "config.json", record)
    result = ExperimentResult(config, [run_seed(prepared, config, s, folder / f"seed_{s}", progress=progress,
                                                components=components) for s in config.seeds])
    write_tables(folder, result)
    write_plots(folder, result)
    (folder / "DONE").write_text("")
  return result
