"""The Python round loop: holds server weights, every client's private state and cluster membership.

`Simulation` owns no execution context; call its methods inside one (e.g.
`tff_graph.runtime.local_execution_context()`). All randomness comes from the explicit `seed`:

* initial weights: the server's shared weights from seed `1000 * seed`, client i's private weights
  from `1000 * seed + i + 1` (each client builds its own model, as in the reference code);
* client sampling in round r: `numpy.random.default_rng([seed, r])`;
* shuffling of client i's train split in round r: a seed derived from `(seed, r, i)`;
* dropout: the per-client generator state carried in the client state.

So a round's outcome depends only on the state before it, which makes checkpoint/resume exact.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from data_prep import cache
from tff_graph import algorithms
from tff_graph.federated import client_work as cw
from tff_graph.federated import process as process_lib
from tff_graph.models import classifiers


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """One run of one algorithm (library arguments; programs map flags onto this).

  Attributes:
    algorithm: a name from `tff_graph.algorithms.ALGORITHMS`.
    seed: model seed (initial weights, sampling, shuffling, dropout).
    training: local training hyper-parameters; `proximal_mu` is taken from the algorithm unless
      `proximal_mu` below is set.
    client_fraction: share of clients sampled each round (the reference's `random.sample`).
    eval_every: evaluate every k rounds (and always after the last round).
    hidden, num_layers, dropout, embedding_type: model options (papers' defaults).
    proximal_mu: overrides the algorithm's mu when not None.
  """

  algorithm: str
  seed: int = 1
  training: cw.TrainingConfig = cw.TrainingConfig()
  client_fraction: float = 1.0
  eval_every: int = 1
  hidden: int = 64
  num_layers: int = 3
  dropout: float = 0.5
  embedding_type: str = "rw_dg"
  proximal_mu: float | None = None

  def __post_init__(self):
    algorithms.get_algorithm(self.algorithm)
    if not 0.0 < self.client_fraction <= 1.0:
      raise ValueError(f"client_fraction must be in (0, 1], got {self.client_fraction}")
    if self.eval_every < 1:
      raise ValueError(f"eval_every must be >= 1, got {self.eval_every}")

  @property
  def algo(self) -> algorithms.Algorithm:
    return algorithms.get_algorithm(self.algorithm)

  def training_config(self) -> cw.TrainingConfig:
    mu = self.algo.proximal_mu if self.proximal_mu is None else self.proximal_mu
    return dataclasses.replace(self.training, proximal_mu=mu)


def _numpy(structure: Any) -> Any:
  return tf.nest.map_structure(lambda t: np.asarray(t), structure)


class Simulation:
  """Runs rounds of one algorithm on one prepared setting (see module docstring)."""

  def __init__(self, prepared: cache.PreparedSetting, config: RunConfig, *, num_buckets: int = 1,
               report_updates: bool = False):
    self.prepared = prepared
    self.config = config
    algo = config.algo
    clients = prepared.clients
    self.client_ids = [c.client_id for c in clients]
    self.spec = classifiers.ModelSpec(
        kind=algo.model_kind, feature_dim=max(c.feature_dim for c in clients),
        num_classes=max(c.num_classes for c in clients), hidden=config.hidden,
        num_layers=config.num_layers, dropout=config.dropout, backbone=algo.backbone,
        embedding_type=config.embedding_type, n_rw=prepared.n_rw, n_dg=prepared.n_dg)
    self.shared_parts = algo.shared_parts
    self.training = config.training_config()
    self._report_updates = report_updates or algo.clustering is not None
    self.layout = cw.SharingLayout.of(self.model_fn(0), self.shared_parts)
    self.num_buckets = num_buckets
    self.process = self._build_process(num_buckets)
    self.round = 0
    self.bucket_of = {cid: 0 for cid in self.client_ids}
    self.shared, self.client_states = self._initial_state()

  # ----- construction --------------------------------------------------------------------------

  def model_fn(self, seed: int, feature_fan_in: int | None = None) -> classifiers.PartitionedModel:
    return classifiers.build_model(dataclasses.replace(self.spec, feature_fan_in=feature_fan_in), seed=seed)

  def _build_process(self, num_buckets: int) -> process_lib.FederatedProcess:
    return process_lib.build_federated_process(
        self.model_fn, self.shared_parts, self.training, num_buckets=num_buckets,
        report_updates=self._report_updates)

  def _initial_state(self):
    base = 1000 * self.config.seed
    server = cw.ClientWork(lambda: self.model_fn(base), self.shared_parts, self.training)
    one = [v.numpy() for v in server.shared_values()]
    shared = [np.repeat(w[None], self.num_buckets, axis=0) for w in one]
    states = {}
    for i, c in enumerate(self.prepared.clients):
      work = cw.ClientWork(lambda: self.model_fn(base + i + 1, c.feature_dim), self.shared_parts,
                           self.training)
      states[c.client_id] = _numpy(work.initial_state())
    return shared, states

  def ensure_buckets(self, n: int) -> None:
    """Grows the number of cluster slots to at least n (re-traces the process only then)."""
    if n <= self.num_buckets:
      return
    k = max(n, 2 * self.num_buckets)
    self.shared = [np.concatenate([w, np.repeat(w[:1], k - self.num_buckets, axis=0)]) for w in self.shared]
    self.num_buckets = k
    self.process = self._build_process(k)

  # ----- inputs --------------------------------------------------------------------------------

  def client_inputs(self, index: int) -> "collections.OrderedDict[str, Any]":
    c = self.prepared.clients[index]
    seed = int(np.random.SeedSequence([self.config.seed, self.round, index]).generate_state(1, np.uint64)[0]
               % (2**63 - 1))
    return collections.OrderedDict(
        train=c.files["train"], val=c.files["val"], test=c.files["test"],
        feature_dim=np.int32(c.feature_dim), num_classes=np.int32(c.num_classes),
        train_size=np.float32(c.sizes["train"]), bucket=np.int32(self.bucket_of[c.client_id]),
        shuffle_seed=np.int64(seed), client_index=np.int32(index))

  def sample(self) -> list[int]:
    """Indices of this round's clients (all when client_fraction is 1)."""
    n = len(self.client_ids)
    if self.config.client_fraction >= 1.0:
      return list(range(n))
    k = max(1, int(n * self.config.client_fraction))
    return sorted(np.random.default_rng([self.config.seed, self.round]).choice(n, k, replace=False).tolist())

  # ----- rounds --------------------------------------------------------------------------------

  def step(self) -> dict[str, dict[str, Any]]:
    """Runs one round; returns each sampled client's report (training metrics, maybe its update)."""
    chosen = self.sample()
    inputs = [self.client_inputs(i) for i in chosen]
    states = [self.client_states[self.client_ids[i]] for i in chosen]
    self.shared_before = self.shared
    if self.process.has_shared:
      shared, new_states, reports = self.process.next(self.shared, states, inputs)
      self.shared = _numpy(list(shared))
    else:
      new_states, reports = self.process.next(states, inputs)
    out = {}
    for state, report in zip(new_states, reports):
      report = _numpy(dict(report))
      cid = self.client_ids[int(report.pop("client_index"))]
      self.client_states[cid] = _numpy(state)
      out[cid] = report
    if sorted(out) != sorted(self.client_ids[i] for i in chosen):
      raise RuntimeError(f"round {self.round}: reports came back for {sorted(out)}, not for the sampled clients")
    self.round += 1
    return {self.client_ids[i]: out[self.client_ids[i]] for i in chosen}

  def evaluate(self) -> dict[str, dict[str, float]]:
    """Val/test loss and accuracy of every client's current model."""
    inputs = [self.client_inputs(i) for i in range(len(self.client_ids))]
    states = [self.client_states[cid] for cid in self.client_ids]
    if self.process.has_shared:
      results = self.process.evaluate(self.shared, states, inputs)
    else:
      results = self.process.evaluate(states, inputs)
    by_index = {int(r["client_index"]): {k: float(v) for k, v in r.items() if k != "client_index"}
                for r in results}
    if sorted(by_index) != list(range(len(self.client_ids))):
      raise RuntimeError(f"evaluation returned clients {sorted(by_index)}, expected all {len(self.client_ids)}")
    return {cid: by_index[i] for i, cid in enumerate(self.client_ids)}

  def client_model(self, client_id: str) -> classifiers.PartitionedModel:
    """A Keras model holding this client's current weights (shared from its cluster + private)."""
    i = self.client_ids.index(client_id)
    c = self.prepared.clients[i]
    work = cw.ClientWork(lambda: self.model_fn(0, c.feature_dim), self.shared_parts, self.training)
    state = self.client_states[client_id]
    tv = work.model.trainable_variables
    for v, x in zip(work.layout.shared(tv), self.shared):
      v.assign(x[self.bucket_of[client_id]])
    for v, x in zip(work.layout.private(tv), state["private"]):
      v.assign(x)
    return work.model

  def snapshot(self) -> dict[str, Any]:
    """Everything needed to continue exactly from here (for checkpoints)."""
    return copy.deepcopy({"round": self.round, "shared": self.shared, "client_states": self.client_states,
                          "bucket_of": self.bucket_of, "num_buckets": self.num_buckets})

  def restore(self, snap: Mapping[str, Any]) -> None:
    self.ensure_buckets(int(snap["num_buckets"]))
    self.round = int(snap["round"])
    self.shared = [np.asarray(w) for w in snap["shared"]]
    self.client_states = copy.deepcopy(dict(snap["client_states"]))
    self.bucket_of = dict(snap["bucket_of"])


@dataclasses.dataclass
class RunResult:
  """What a run returns: per-round reports and evaluations, and the final per-client metrics."""

  client_ids: list[str]
  train_reports: list[dict[str, dict[str, Any]]]
  evaluations: list[tuple[int, dict[str, dict[str, float]]]]

  @property
  def final(self) -> dict[str, dict[str, float]]:
    return self.evaluations[-1][1]

  def average(self, metric: str = "test_accuracy", evaluation: int = -1) -> float:
    values = [m[metric] for m in self.evaluations[evaluation][1].values()]
    return float(np.mean(values))


def run(simulation: Simulation, rounds: int, *,
        on_round: Callable[[Simulation, dict, dict | None], None] | None = None,
        after_step: Callable[[Simulation, dict], None] | None = None) -> RunResult:
  """Runs `rounds` more rounds, evaluating every `eval_every` rounds and after the last one.

  `after_step(sim, reports)` runs server-side logic between rounds (GCFL's clustering);
  `on_round(sim, reports, evaluation_or_None)` receives results as they come (release, progress).
  """
  if rounds < 1:
    raise ValueError(f"rounds must be >= 1, got {rounds}")
  result = RunResult(client_ids=list(simulation.client_ids), train_reports=[], evaluations=[])
  end = simulation.round + rounds
  while simulation.round < end:
    reports = simulation.step()
    if after_step is not None:
      after_step(simulation, reports)
    evaluation = None
    if simulation.round % simulation.config.eval_every == 0 or simulation.round == end:
      evaluation = simulation.evaluate()
      result.evaluations.append((simulation.round, evaluation))
    result.train_reports.append({cid: {k: v for k, v in r.items() if k != "update"}
                                 for cid, r in reports.items()})
    if on_round is not None:
      on_round(simulation, reports, evaluation)
  return result

