"""GCFL, GCFL+ and GCFL+dWs (Xie et al., NeurIPS 2021): cluster-wise FedAvg with dynamic splits.

The round computation is the one every algorithm uses, with one bucket of shared weights per
cluster (`ClusterwiseMeanFactory`); clients report their update and norms explicitly. Between rounds,
`GCFLServer.after_step` runs the reference's server logic on those reports:

1. For GCFL+ append each client's sequence value (gradient norm of the shared layers after its last
   local step; dWs: its update norm).
2. For every cluster, test the split gate (`clustering.should_split`; GCFL+ also needs every client
   to have `seq_length` values). A cluster that splits is cut in two by Stoer-Wagner on cosine
   similarity + 1 (GCFL) or on max(D) - D of the DTW distances (GCFL+); GCFL+ then empties every
   sequence. Before splitting, the cluster's current test accuracies are cached as a snapshot.
3. If anything split, the round's updates are re-averaged within the new clusters (the reference
   averages after splitting), starting from the weights the old cluster had before the round.

Clusters only ever split, so their number grows during a run; the driver adds bucket slots (and
re-traces the computation) only when it runs out of them.

Reported accuracy, both labelled: `final` (last round, as every algorithm) and `best_snapshot` (each
client's best accuracy among the cached snapshots, the reference's number).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable

import numpy as np

from tff_graph import clustering
from tff_graph.federated import driver

SEQUENCE_OF = {"dtw_grad": "last_grad_norm", "dtw_update": "update_norm"}


@dataclasses.dataclass(frozen=True)
class SplitEvent:
  round: int
  cluster: tuple[str, ...]
  into: tuple[tuple[str, ...], tuple[str, ...]]
  mean_norm: float
  max_norm: float


@dataclasses.dataclass
class GCFLReport:
  """Cluster history and the two accuracy reports."""

  splits: list[SplitEvent]
  clusters: list[list[str]]
  cluster_counts: list[int]  # Number of clusters after each round.
  snapshots: list[tuple[int, tuple[str, ...], dict[str, float]]]

  def best_snapshot_accuracy(self) -> dict[str, float]:
    best: dict[str, float] = {}
    for _, members, accuracy in self.snapshots:
      for cid in members:
        if cid in accuracy:
          best[cid] = max(best.get(cid, -1.0), accuracy[cid])
    return best


class GCFLServer:
  """Server-side clustering between rounds (see module docstring)."""

  def __init__(self, simulation: driver.Simulation, thresholds: clustering.SplitThresholds):
    method = simulation.config.algo.clustering
    if method not in ("cosine", "dtw_grad", "dtw_update"):
      raise ValueError(f"{simulation.config.algorithm} is not a clustering algorithm")
    self.method = method
    self.thresholds = thresholds
    ids = simulation.client_ids
    self.clusters: list[list[str]] = [list(ids)]
    self.sequences: dict[str, list[float]] = {cid: [] for cid in ids}
    self.last_accuracy: dict[str, float] = {}
    self.report = GCFLReport(splits=[], clusters=self.clusters, cluster_counts=[], snapshots=[])

  def after_evaluation(self, evaluation: dict[str, dict[str, float]]) -> None:
    self.last_accuracy = {cid: m["test_accuracy"] for cid, m in evaluation.items()}

  def after_step(self, sim: driver.Simulation, reports: dict[str, dict[str, Any]]) -> None:
    if self.method in SEQUENCE_OF:
      for cid, r in reports.items():
        self.sequences[cid].append(float(r[SEQUENCE_OF[self.method]]))
    new_clusters: list[list[str]] = []
    split = False
    for members in self.clusters:
      present = [cid for cid in members if cid in reports]
      if len(present) < 2:
        new_clusters.append(members)
        continue
      updates = np.stack([clustering.flatten(reports[cid]["update"]) for cid in present])
      mean_norm = clustering.mean_update_norm(updates)
      max_norm = clustering.max_update_norm(updates)
      gate = clustering.should_split(round_num=sim.round, cluster_size=len(members), mean_norm=mean_norm,
                                     max_norm=max_norm, thresholds=self.thresholds)
      if gate and self.method in SEQUENCE_OF:
        gate = all(len(s) >= self.thresholds.seq_length for s in self.sequences.values())
      if not gate:
        new_clusters.append(members)
        continue
      self.report.snapshots.append((sim.round, tuple(members), dict(self.last_accuracy)))
      if self.method == "cosine":
        weights = clustering.cosine_cut_weights(updates)
      else:
        seqs = np.array([self.sequences[cid][-self.thresholds.seq_length:] for cid in present])
        weights = clustering.dtw_cut_weights(seqs, standardize=self.thresholds.standardize)
      order = {cid: i for i, cid in enumerate(present)}
      a, b = clustering.min_cut_bipartition(weights, [order[c] for c in present])
      side_a, side_b = [present[i] for i in a], [present[i] for i in b]
      new_clusters += [side_a, side_b]
      self.report.splits.append(SplitEvent(sim.round, tuple(members), (tuple(side_a), tuple(side_b)),
                                           mean_norm, max_norm))
      split = True
      if self.method in SEQUENCE_OF:
        self.sequences = {cid: [] for cid in self.sequences}
    if split:
      self._regroup(sim, new_clusters, reports)
    self.report.cluster_counts.append(len(self.clusters))

  def _regroup(self, sim: driver.Simulation, clusters: list[list[str]], reports) -> None:
    """New clusters start from their old cluster's pre-round weights and average this round's updates."""
    old_bucket = [sim.bucket_of[members[0]] for members in clusters]
    sim.ensure_buckets(len(clusters))
    before = [np.stack([w[b] for b in old_bucket] + [w[0]] * (sim.num_buckets - len(clusters)))
              for w in sim.shared_before]
    for k, members in enumerate(clusters):
      for cid in members:
        sim.bucket_of[cid] = k
    present = [cid for cid in sim.client_ids if cid in reports]
    contributions = [collections.OrderedDict(update=list(reports[cid]["update"]),
                                             bucket=np.int32(sim.bucket_of[cid])) for cid in present]
    weights = [np.float32(sim.prepared.clients[sim.client_ids.index(cid)].sizes["train"]) for cid in present]
    sim.shared = [np.asarray(w) for w in sim.process.reaggregate(before, contributions, weights)]
    self.clusters[:] = clusters

  def finish(self) -> GCFLReport:
    """Caches the final snapshot of every cluster (call after the last evaluation)."""
    for members in self.clusters:
      self.report.snapshots.append((-1, tuple(members), dict(self.last_accuracy)))
    return self.report


def run_gcfl(sim: driver.Simulation, rounds: int, thresholds: clustering.SplitThresholds, *,
             on_round: Callable | None = None) -> tuple[driver.RunResult, GCFLReport]:
  """Runs a GCFL-family simulation; returns the usual RunResult and the cluster report."""
  server = GCFLServer(sim, thresholds)

  def observe(s, reports, evaluation):
    if evaluation is not None:
      server.after_evaluation(evaluation)
    if on_round is not None:
      on_round(s, reports, evaluation)

  result = driver.run(sim, rounds, after_step=server.after_step, on_round=observe)
  return result, server.finish()
