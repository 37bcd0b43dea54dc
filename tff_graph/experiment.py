"""Program logic: run one algorithm on one setting for several seeds, release results, resume.

Platform-agnostic (no flags, no contexts): `programs/` parses flags, opens the execution context and
calls `run_experiment`, which builds each seed's process (`tff_graph.algorithms`) and runs the one
loop (`tff_graph.program_logic.train_process`) with these release and state managers. A run folder holds

    config.json                  the resolved ExperimentConfig (+ plugged-in components; a rerun must match it)
    seed_<s>/train_metrics.csv   per round: every client's train metrics and the server metrics
    seed_<s>/eval_metrics.csv    per evaluated round: per-client and average val/test loss/accuracy
    seed_<s>/tensorboard/        the same as TensorBoard scalars (+ GCFL cluster count)
    seed_<s>/checkpoints/        FileProgramStateManager: the loop state (process state, client states,
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
import json
import os
import pathlib
import shutil
from typing import Any, Callable

import numpy as np
import tensorflow_federated as tff

from data_prep import cache
from tff_graph import algorithms
from tff_graph import program_logic
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


def run_record(config: ExperimentConfig, components: Components = Components()) -> str:
  """The text of config.json: the configuration (+ the plugged-in components' names)."""
  d = config.to_dict()
  if components.describe():
    d["components"] = components.describe()
  return json.dumps(d, indent=1, sort_keys=True)


def input_spec_of(config: ExperimentConfig, prepared: cache.PreparedSetting) -> cw.InputSpec:
  return cw.InputSpec(feature_dim=max(c.feature_dim for c in prepared.clients),
                      num_classes=max(c.num_classes for c in prepared.clients),
                      n_rw=config.data.n_rw, n_dg=config.data.n_dg)


def model_fn_of(config: ExperimentConfig, prepared: cache.PreparedSetting,
                components: Components = Components()) -> process_lib.ModelFn:
  if components.model_fn is not None:
    return components.model_fn
  algo = components.algorithm or algorithms.get(config.algorithm)
  spec = input_spec_of(config, prepared)
  return classifiers.model_fn_for(config.model_spec(algo.model_kind, algo.backbone, feature_dim=spec.feature_dim,
                                                    num_classes=spec.num_classes))


def build_process(config: ExperimentConfig, prepared: cache.PreparedSetting, seed: int,
                  components: Components = Components()) -> process_lib.GraphProcess:
  """The algorithm's process for one seed of the experiment."""
  algo = components.algorithm or algorithms.get(config.algorithm)
  context = algorithms.BuildContext(
      model_fn=model_fn_of(config, prepared, components), input_spec=input_spec_of(config, prepared),
      training=config.training, init_seed=program_logic.init_seed(seed), num_clients=len(prepared.clients),
      model_aggregator=components.model_aggregator, proximal_mu=config.proximal_mu, thresholds=config.thresholds())
  return algo.build(context)


def parameter_counts(config: ExperimentConfig, prepared: cache.PreparedSetting,
                     components: Components = Components()) -> tuple[int, int]:
  """(total, shared) trainable parameters of the widest client's model (from the configuration)."""
  algo = components.algorithm or algorithms.get(config.algorithm)
  model = model_fn_of(config, prepared, components)(0, None)
  counts = classifiers.parameter_counts(model)
  return counts["total"], sum(counts[p] for p in algo.shared_parts)


def check_run_folder(path: pathlib.Path, config: ExperimentConfig, *, overwrite: bool = False,
                     allow_finished: bool = False, components: Components = Components()) -> None:
  """Raises RunFolderError if `path` holds another run's results, or a finished run (unless overwrite).

  With overwrite, an existing run folder is emptied. Otherwise a matching unfinished run is resumed,
  and with `allow_finished` a matching finished run is accepted (its results are loaded, not rerun).
  """
  saved = path / "config.json"
  record = run_record(config, components)
  if overwrite and path.exists():
    shutil.rmtree(path)
  if not path.exists():
    return
  if not saved.is_file():
    if any(p.name != "worker.log" for p in path.iterdir()):
      raise RunFolderError(f"{path} is not empty and holds no run of tff-graph; choose another output folder")
    return
  if json.loads(saved.read_text()) != json.loads(record):
    raise RunFolderError(f"{path} holds a run with another configuration ({saved}); choose another "
                         "output folder, or pass overwrite to replace it")
  if (path / "DONE").exists() and not allow_finished:
    raise RunFolderError(f"{path} holds a finished run; pass overwrite to run it again")


def _average(metrics: dict[str, dict[str, float]], name: str) -> float:
  return float(np.mean([m[name] for m in metrics.values()]))


@dataclasses.dataclass
class SeedResult:
  seed: int
  final: dict[str, dict[str, float]]
  curve: list[tuple[int, float]]  # (round, average test accuracy)
  gcfl: dict[str, Any] | None


def run_seed(prepared: cache.PreparedSetting, config: ExperimentConfig, seed: int, folder: pathlib.Path, *,
             progress: Callable[[dict[str, Any]], None] | None = None,
             components: Components = Components()) -> SeedResult:
  """Runs (or resumes, or loads if finished) one seed; releases metrics; exports SavedModels."""
  done = folder / "final.json"
  if done.is_file():
    data = json.loads(done.read_text())
    return SeedResult(seed, data["final"], [tuple(x) for x in data["curve"]], data.get("gcfl"))
  folder.mkdir(parents=True, exist_ok=True)
  process = build_process(config, prepared, seed, components)
  releases = program_logic.Releases(
      train=tff.program.CSVFileReleaseManager(str(folder / "train_metrics.csv"), key_fieldname="round"),
      evaluation=tff.program.CSVFileReleaseManager(str(folder / "eval_metrics.csv"), key_fieldname="round"),
      board=tff.program.TensorBoardReleaseManager(str(folder / "tensorboard")))
  run = config.run
  result = program_logic.train_process(
      process, prepared.clients, seed=seed, rounds=run.rounds, client_fraction=run.client_fraction,
      eval_every=run.eval_every, checkpoint_every=run.checkpoint_every,
      state_manager=tff.program.FileProgramStateManager(str(folder / "checkpoints"), keep_total=2),
      releases=releases, progress=progress)
  state = result.state
  spec = process.input_spec
  for i, c in enumerate(prepared.clients):
    model = process.client_model(state.server_state, state.client_states[i], i, program_logic.client_spec(c))
    export.export_saved_model(model, folder / "models" / c.client_id, input_spec=spec,
                              feature_dim=c.feature_dim, num_classes=c.num_classes)
  report = result.clustering_report()
  tmp = done.with_suffix(".tmp")
  tmp.write_text(json.dumps({"final": result.final, "curve": result.curve, "gcfl": report}, indent=1))
  os.replace(tmp, done)
  return SeedResult(seed, result.final, result.curve, report)


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
  check_run_folder(folder, config, overwrite=overwrite, allow_finished=allow_finished, components=components)
  folder.mkdir(parents=True, exist_ok=True)
  (folder / "config.json").write_text(run_record(config, components))
  result = ExperimentResult(config, [run_seed(prepared, config, s, folder / f"seed_{s}", progress=progress,
                                              components=components) for s in config.seeds])
  write_tables(folder, result)
  write_plots(folder, result)
  (folder / "DONE").write_text("")
  return result
