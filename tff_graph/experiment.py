"""Program logic: run one algorithm on one setting for several seeds, release results, resume.

Platform-agnostic (no flags, no contexts): `programs/` parses flags, opens the execution context and
calls `run_experiment`. A run folder holds

    config.json                  the resolved ExperimentConfig (a rerun must match it)
    seed_<s>/train_metrics.csv   per round: every client's train loss/accuracy (CSV release manager)
    seed_<s>/eval_metrics.csv    per evaluated round: per-client and average val/test loss/accuracy
    seed_<s>/tensorboard/        the same as TensorBoard scalars (+ GCFL cluster count)
    seed_<s>/checkpoints/        FileProgramStateManager: simulation + GCFL + history, every k rounds
    seed_<s>/final.json          final per-client metrics (+ GCFL report); marks the seed as done
    seed_<s>/models/<client>/    one SavedModel per client (TF-GNN serving convention)
    per_client.csv               client x seed final test accuracy (+ GCFL best snapshot)
    summary.csv                  per seed average, and the papers' aggregate over seeds
    accuracy.png, clusters.png   average test accuracy vs round; GCFL cluster count vs round
    DONE                         written last

A run killed at any moment and started again with the same configuration continues from the last
checkpoint of the unfinished seed; since every round depends only on the state before it (see
`tff_graph.federated.driver`), it ends with the same results as an uninterrupted run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pathlib
import shutil
import time
from typing import Any, Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from data_prep import cache
from tff_graph import clustering
from tff_graph import gcfl
from tff_graph.federated import client_work as cw
from tff_graph.federated import driver
from tff_graph.models import export


class RunFolderError(ValueError):
  """The output folder holds another run, or a finished run that must not be overwritten."""


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
  """Everything that defines a run (saved as config.json)."""

  algorithm: str
  setting: str
  rounds: int = 200
  seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
  local_epochs: int = 1
  batch_size: int = 128
  learning_rate: float = 1e-3
  weight_decay: float = 5e-4
  hidden: int = 64
  num_layers: int = 3
  dropout: float = 0.5
  embedding_type: str = "rw_dg"
  client_fraction: float = 1.0
  proximal_mu: float | None = None
  eval_every: int = 1
  checkpoint_every: int = 10
  eps1: float | None = None
  eps2: float | None = None
  seq_length: int | None = None
  standardize: bool = False
  split_seed: int = 123
  n_rw: int = 16
  n_dg: int = 16

  def __post_init__(self):
    if self.rounds < 1:
      raise ValueError(f"rounds must be >= 1, got {self.rounds}")
    if not self.seeds:
      raise ValueError("at least one seed is needed")
    if self.checkpoint_every < 1:
      raise ValueError(f"checkpoint_every must be >= 1, got {self.checkpoint_every}")
    self.run_config(self.seeds[0])  # Validates the algorithm and the rest.

  def run_config(self, seed: int) -> driver.RunConfig:
    return driver.RunConfig(
        algorithm=self.algorithm, seed=seed, client_fraction=self.client_fraction,
        eval_every=self.eval_every, hidden=self.hidden, num_layers=self.num_layers, dropout=self.dropout,
        embedding_type=self.embedding_type, proximal_mu=self.proximal_mu,
        training=cw.TrainingConfig(local_epochs=self.local_epochs, batch_size=self.batch_size,
                                   learning_rate=self.learning_rate, weight_decay=self.weight_decay))

  def thresholds(self) -> clustering.SplitThresholds:
    base = clustering.thresholds_for(self.setting)
    return dataclasses.replace(
        base, eps1=base.eps1 if self.eps1 is None else self.eps1,
        eps2=base.eps2 if self.eps2 is None else self.eps2,
        seq_length=base.seq_length if self.seq_length is None else self.seq_length,
        standardize=self.standardize)

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)


def check_run_folder(path: pathlib.Path, config: ExperimentConfig, *, overwrite: bool = False,
                     allow_finished: bool = False) -> None:
  """Raises RunFolderError if `path` holds another run's results, or a finished run (unless overwrite).

  With overwrite, an existing run folder is emptied. Otherwise a matching unfinished run is resumed,
  and with `allow_finished` a matching finished run is accepted (its results are loaded, not rerun).
  """
  saved = path / "config.json"
  if overwrite and path.exists():
    shutil.rmtree(path)
  if not path.exists():
    return
  if not saved.is_file():
    if any(p.name != "worker.log" for p in path.iterdir()):
      raise RunFolderError(f"{path} is not empty and holds no run of tff-graph; choose another output folder")
    return
  if json.loads(saved.read_text()) != json.loads(config.to_json()):
    raise RunFolderError(f"{path} holds a run with another configuration ({saved}); choose another "
                         "output folder, or pass overwrite to replace it")
  if (path / "DONE").exists() and not allow_finished:
    raise RunFolderError(f"{path} holds a finished run; pass overwrite to run it again")


def _release(manager, value, key: int) -> None:
  asyncio.run(manager.release(value, key))


def _average(metrics: dict[str, dict[str, float]], name: str) -> float:
  return float(np.mean([m[name] for m in metrics.values()]))


@dataclasses.dataclass
class SeedResult:
  seed: int
  final: dict[str, dict[str, float]]
  curve: list[tuple[int, float]]  # (round, average test accuracy)
  gcfl: dict[str, Any] | None


def _checkpoint_state(sim: driver.Simulation, server: gcfl.GCFLServer | None, curve) -> dict:
  snap = sim.snapshot()
  meta = {"round": snap["round"], "bucket_of": snap["bucket_of"], "num_buckets": snap["num_buckets"],
          "curve": curve}
  if server is not None:
    meta["gcfl"] = {"clusters": server.clusters, "sequences": server.sequences,
                    "last_accuracy": server.last_accuracy,
                    "splits": [dataclasses.asdict(e) for e in server.report.splits],
                    "cluster_counts": server.report.cluster_counts,
                    "snapshots": server.report.snapshots}
  arrays = tf.nest.flatten([snap["shared"], [snap["client_states"][c] for c in sim.client_ids]])
  return {"arrays": [np.asarray(a) for a in arrays], "meta": json.dumps(meta)}


def _restore(sim: driver.Simulation, server: gcfl.GCFLServer | None, state: dict) -> list:
  meta = json.loads(state["meta"].decode() if isinstance(state["meta"], bytes) else str(state["meta"]))
  template = [sim.shared, [sim.client_states[c] for c in sim.client_ids]]
  shared, states = tf.nest.pack_sequence_as(template, [np.asarray(a) for a in state["arrays"]])
  sim.restore({"round": meta["round"], "shared": shared,
               "client_states": dict(zip(sim.client_ids, states)),
               "bucket_of": meta["bucket_of"], "num_buckets": meta["num_buckets"]})
  if server is not None:
    g = meta["gcfl"]
    server.clusters[:] = g["clusters"]
    server.sequences = g["sequences"]
    server.last_accuracy = g["last_accuracy"]
    server.report.splits = [gcfl.SplitEvent(e["round"], tuple(e["cluster"]),
                                            (tuple(e["into"][0]), tuple(e["into"][1])),
                                            e["mean_norm"], e["max_norm"]) for e in g["splits"]]
    server.report.cluster_counts = g["cluster_counts"]
    server.report.snapshots = [(r, tuple(m), a) for r, m, a in g["snapshots"]]
  return [tuple(x) for x in meta["curve"]]


def run_seed(prepared: cache.PreparedSetting, config: ExperimentConfig, seed: int, folder: pathlib.Path, *,
             progress: Callable[[dict[str, Any]], None] | None = None) -> SeedResult:
  """Runs (or resumes, or loads if finished) one seed; releases metrics; exports SavedModels."""
  done = folder / "final.json"
  if done.is_file():
    data = json.loads(done.read_text())
    return SeedResult(seed, data["final"], [tuple(x) for x in data["curve"]], data.get("gcfl"))
  folder.mkdir(parents=True, exist_ok=True)
  sim = driver.Simulation(prepared, config.run_config(seed))
  server = gcfl.GCFLServer(sim, config.thresholds()) if sim.config.algo.clustering else None
  states = tff.program.FileProgramStateManager(str(folder / "checkpoints"), keep_total=2)
  train_csv = tff.program.CSVFileReleaseManager(str(folder / "train_metrics.csv"), key_fieldname="round")
  eval_csv = tff.program.CSVFileReleaseManager(str(folder / "eval_metrics.csv"), key_fieldname="round")
  board = tff.program.TensorBoardReleaseManager(str(folder / "tensorboard"))
  curve: list[tuple[int, float]] = []
  versions = asyncio.run(states.get_versions()) or []
  leaves = len(tf.nest.flatten([sim.shared, [sim.client_states[c] for c in sim.client_ids]]))
  for version in sorted(versions, reverse=True):  # Newest loadable checkpoint (kept atomically).
    try:
      state = asyncio.run(states.load(version, {"arrays": [None] * leaves, "meta": None}))
    except Exception:  # pylint: disable=broad-except
      continue
    curve = _restore(sim, server, state)
    break
  start = time.perf_counter()
  final: dict[str, dict[str, float]] = {}
  while sim.round < config.rounds:
    reports = sim.step()
    if server is not None:
      server.after_step(sim, reports)
    r = sim.round
    train = {cid: {k: float(v) for k, v in rep.items() if k != "update"} for cid, rep in reports.items()}
    _release(train_csv, {f"{cid}/{k}": v for cid, m in train.items() for k, v in m.items()}, r)
    board_value: dict[str, Any] = {"train": train}
    if server is not None:
      board_value["gcfl"] = {"clusters": float(len(server.clusters))}
    if r % config.eval_every == 0 or r == config.rounds:
      evaluation = sim.evaluate()
      final = evaluation  # The last round is always evaluated: this ends as the final evaluation.
      if server is not None:
        server.after_evaluation(evaluation)
      average = {k: _average(evaluation, k) for k in next(iter(evaluation.values()))}
      curve.append((r, average["test_accuracy"]))
      flat = {f"average/{k}": v for k, v in average.items()}
      flat.update({f"{cid}/{k}": v for cid, m in evaluation.items() for k, v in m.items()})
      _release(eval_csv, flat, r)
      board_value["eval"] = {"average": average, **evaluation}
      if progress is not None:
        progress({"seed": seed, "round": r, "rounds": config.rounds, "elapsed": time.perf_counter() - start,
                  "test_accuracy": average["test_accuracy"]})
    _release(board, board_value, r)
    if r % config.checkpoint_every == 0 and r < config.rounds:
      asyncio.run(states.save(_checkpoint_state(sim, server, curve), r))
  report = None
  if server is not None:
    rep = server.finish()
    report = {"best_snapshot_accuracy": rep.best_snapshot_accuracy(), "clusters": rep.clusters,
              "cluster_counts": rep.cluster_counts,
              "splits": [dataclasses.asdict(e) for e in rep.splits]}
  for i, c in enumerate(prepared.clients):
    export.export_saved_model(sim.client_model(c.client_id), folder / "models" / c.client_id,
                              feature_dim=c.feature_dim, num_classes=c.num_classes)
  tmp = done.with_suffix(".tmp")
  tmp.write_text(json.dumps({"final": final, "curve": curve, "gcfl": report}, indent=1))
  os.replace(tmp, done)
  return SeedResult(seed, final, curve, report)


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
                   progress: Callable[[dict[str, Any]], None] | None = None) -> ExperimentResult:
  """Runs every seed (resuming unfinished ones, loading finished ones), then writes tables, plots, DONE."""
  folder = pathlib.Path(folder)
  check_run_folder(folder, config, overwrite=overwrite, allow_finished=allow_finished)
  folder.mkdir(parents=True, exist_ok=True)
  (folder / "config.json").write_text(config.to_json())
  result = ExperimentResult(config, [run_seed(prepared, config, s, folder / f"seed_{s}", progress=progress)
                                     for s in config.seeds])
  write_tables(folder, result)
  write_plots(folder, result)
  (folder / "DONE").write_text("")
  return result
