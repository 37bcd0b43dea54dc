"""The one round loop: a process, its clients, releases and checkpoints (platform-agnostic).

`train_process` is what the programs, the benchmarks and the tests run (as TFF's
`tff.learning.programs.train_model`: a process + a program state manager + release managers). It
holds the program state

    LoopState(round, server_state, client_states (by client index), history)

and, each round: samples clients (`numpy.random.default_rng([seed, round])`), builds their client
data (`client_data`), calls `process.next`, releases the metrics, evaluates every `eval_every`
rounds (and after the last), and saves the program state every `checkpoint_every` rounds. The
program state is saved as it is (nested NumPy values) with a `tff.program.ProgramStateManager`; a
loop started again with the same arguments continues from the newest saved state and ends with the
same results as an uninterrupted one, because a round depends only on the state before it.

Randomness, all from `seed`: the server's initial shared weights come from `init_seed(seed)` =
1000 * seed, client i's initial model from 1000 * seed + i + 1, the shuffling of client i's train
split in round r from `(seed, r, i)`, dropout from the generator state in each client state.

The `history` (fixed-size NumPy arrays, checkpointed with the state) keeps what the final report
needs: every evaluation's per-client test accuracy and, for clustered processes, every round's
assignment and split record. Releases (any `tff.program.ReleaseManager`s; None to skip):

* `train`: per round, `<client>/<metric>` of the round's clients and `server/...` (the server
  metrics: mean train metrics, aggregator measurements, cluster count), flattened to scalars;
* `evaluation`: per evaluated round, `average/<metric>` and `<client>/<metric>`;
* `board`: both, nested, for TensorBoard.

Coroutines of release and state managers run on a private event loop, so all of this works inside
an already running asyncio loop (Jupyter).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import time
from typing import Any, Callable, Mapping, Sequence

from absl import logging
import numpy as np

from tff_graph.federated import client_work as cw
from tff_graph.federated import process as process_lib


def run_sync(coroutine):
  """Runs a coroutine to completion, also when called from inside a running event loop."""
  try:
    asyncio.get_running_loop()
  except RuntimeError:
    return asyncio.run(coroutine)
  with concurrent.futures.ThreadPoolExecutor(1) as pool:
    return pool.submit(asyncio.run, coroutine).result()


def init_seed(seed: int) -> int:
  """Seed of the server's initial shared weights for model seed `seed`."""
  return 1000 * seed


def client_seed(seed: int, index: int) -> int:
  """Seed of client `index`'s initial model for model seed `seed`."""
  return 1000 * seed + index + 1


def client_spec(client) -> cw.ClientSpec:
  return cw.ClientSpec(feature_dim=int(client.feature_dim), num_classes=int(client.num_classes))


def client_data(client, index: int, *, seed: int, round_num: int) -> "collections.OrderedDict[str, Any]":
  """The client data D of `client` (a `data_prep.cache.ClientData`) for round `round_num` (from 0)."""
  shuffle = int(np.random.SeedSequence([seed, round_num, index]).generate_state(1, np.uint64)[0] % (2**63 - 1))
  return collections.OrderedDict(
      train=client.files["train"], val=client.files["val"], test=client.files["test"],
      feature_dim=np.int32(client.feature_dim), num_classes=np.int32(client.num_classes),
      train_size=np.float32(client.sizes["train"]), shuffle_seed=np.int64(shuffle), client_index=np.int32(index))


def sample_clients(num_clients: int, client_fraction: float, *, seed: int, round_num: int) -> list[int]:
  """Indices of round `round_num`'s clients (all when client_fraction is 1; the reference's sampling)."""
  if client_fraction >= 1.0:
    return list(range(num_clients))
  k = max(1, int(num_clients * client_fraction))
  return sorted(np.random.default_rng([seed, round_num]).choice(num_clients, k, replace=False).tolist())


_numpy = process_lib.to_numpy


class CheckpointError(RuntimeError):
  """Saved loop states exist but none can be loaded into this run."""


@dataclasses.dataclass
class LoopState:
  """Everything the loop needs to continue exactly (saved as it is)."""

  round: int
  server_state: Any
  client_states: list[Any]
  history: "collections.OrderedDict[str, np.ndarray]"

  def to_structure(self) -> "collections.OrderedDict[str, Any]":
    return collections.OrderedDict(round=np.int64(self.round), server_state=self.server_state,
                                   client_states=list(self.client_states), history=self.history)

  @classmethod
  def from_structure(cls, s: Mapping[str, Any]) -> "LoopState":
    return cls(int(s["round"]), _numpy(s["server_state"]), [_numpy(c) for c in s["client_states"]],
               collections.OrderedDict((k, np.asarray(v)) for k, v in s["history"].items()))


def _empty_history(rounds: int, num_clients: int, slots: int | None) -> "collections.OrderedDict[str, np.ndarray]":
  h = collections.OrderedDict(evaluated=np.zeros([rounds], bool),
                              test_accuracy=np.zeros([rounds, num_clients], np.float64))
  if slots:
    h.update(count=np.zeros([rounds], np.int32), assignment=np.zeros([rounds, num_clients], np.int32),
             split=np.zeros([rounds, slots], bool), mean_norm=np.zeros([rounds, slots], np.float64),
             max_norm=np.zeros([rounds, slots], np.float64))
  return h


@dataclasses.dataclass(frozen=True)
class Releases:
  """Where the loop releases metrics (any `tff.program.ReleaseManager`, or None)."""

  train: Any = None
  evaluation: Any = None
  board: Any = None


def _scalars(prefix: str, value: Any, out: dict[str, float]) -> None:
  """Flattens a nested metrics structure to `prefix/name` -> float (arrays up to 64 values by index)."""
  if isinstance(value, Mapping):
    for k, v in value.items():
      _scalars(f"{prefix}/{k}", v, out)
  elif isinstance(value, (list, tuple)):
    for i, v in enumerate(value):
      _scalars(f"{prefix}/{i}", v, out)
  else:
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
      return
    if a.ndim == 0:
      out[prefix] = float(a)
    elif a.size <= 64:
      for i, x in enumerate(a.ravel()):
        out[f"{prefix}/{i}"] = float(x)


@dataclasses.dataclass
class TrainingResult:
  """What `train_process` returns (also after a resume)."""

  client_ids: list[str]
  final: dict[str, dict[str, float]]  # Last evaluation: client -> val/test loss and accuracy.
  state: LoopState
  evaluation_rounds: list[int]

  @property
  def curve(self) -> list[tuple[int, float]]:
    """(round, average test accuracy) of every evaluation."""
    h = self.state.history
    return [(r, float(np.mean([float(x) for x in h["test_accuracy"][r - 1]]))) for r in self.evaluation_rounds]

  def average(self, metric: str = "test_accuracy") -> float:
    return float(np.mean([m[metric] for m in self.final.values()]))

  def clustering_report(self) -> dict[str, Any] | None:
    """GCFL's report from the history: splits, final clusters, counts, best-snapshot accuracy.

    A snapshot caches, before a cluster splits, its members' accuracies of the last evaluation
    before that round (and every final cluster's last accuracies): `best_snapshot_accuracy` is
    each client's best cached accuracy (the GCFL reference's reported number).
    """
    h = self.state.history
    if "assignment" not in h:
      return None
    ids = self.client_ids
    rounds = self.state.round
    clusters_of = lambda a: [[ids[i] for i in np.flatnonzero(a == k)] for k in range(int(a.max()) + 1)]
    previous = np.zeros(len(ids), np.int32)
    splits, snapshots = [], []
    last_accuracy: dict[str, float] = {}
    for r in range(1, rounds + 1):
      new = h["assignment"][r - 1]
      offset = 0
      for k in range(int(previous.max()) + 1):
        if h["split"][r - 1][k]:
          members = [ids[i] for i in np.flatnonzero(previous == k)]
          side_a = [ids[i] for i in np.flatnonzero(new == k + offset)]
          side_b = [ids[i] for i in np.flatnonzero(new == k + offset + 1)]
          splits.append({"round": r, "cluster": members, "into": [side_a, side_b],
                         "mean_norm": float(h["mean_norm"][r - 1][k]), "max_norm": float(h["max_norm"][r - 1][k])})
          snapshots.append((members, dict(last_accuracy)))
          offset += 1
      if h["evaluated"][r - 1]:
        last_accuracy = {cid: float(x) for cid, x in zip(ids, h["test_accuracy"][r - 1])}
      previous = new
    final_clusters = clusters_of(previous)
    for members in final_clusters:
      snapshots.append((members, dict(last_accuracy)))
    best: dict[str, float] = {}
    for members, accuracy in snapshots:
      for cid in members:
        if cid in accuracy:
          best[cid] = max(best.get(cid, -1.0), accuracy[cid])
    return {"best_snapshot_accuracy": best, "clusters": final_clusters,
            "cluster_counts": [int(c) for c in h["count"][:rounds]], "splits": splits}


def _load_newest(state_manager, template: LoopState) -> LoopState | None:
  """The newest saved loop state that loads (an older one if the newest is damaged), or None if
  there is none; CheckpointError if there are some and none loads (never a silent restart)."""
  versions = run_sync(state_manager.get_versions()) or []
  errors = []
  for version in sorted(versions, reverse=True):
    try:
      loaded = LoopState.from_structure(_numpy(run_sync(state_manager.load(version, template.to_structure()))))
    except Exception as e:  # pylint: disable=broad-except
      logging.warning("checkpoint version %d could not be loaded (%s); trying an older one", version, e)
      errors.append(f"version {version}: {type(e).__name__}: {e}")
      continue
    return loaded
  if errors:
    raise CheckpointError("saved states exist but none can be loaded into this run (" + "; ".join(errors)[:2000]
                          + "); move the checkpoints folder away to start again")
  return None


def initial_state(process: process_lib.GraphProcess, clients: Sequence[Any], *, seed: int, rounds: int) -> LoopState:
  """The loop state before round 1: `process.initialize()` and every client's initial state (or, when
  the process keeps client states on its workers, the references to them: `place_client_states`)."""
  server_state = _numpy(process.initialize())
  states = process.place_client_states(
      [process.initial_client_state(client_seed(seed, i), client_spec(c)) for i, c in enumerate(clients)])
  slots = process.clustering.slots if process.clustering is not None else None
  return LoopState(0, server_state, states, _empty_history(rounds, len(clients), slots))


def evaluate(process: process_lib.GraphProcess, clients: Sequence[Any], state: LoopState, *,
             seed: int) -> dict[str, dict[str, float]]:
  """Val/test loss and accuracy of every client's current model."""
  data = [client_data(c, i, seed=seed, round_num=state.round) for i, c in enumerate(clients)]
  results = process.evaluate(state.server_state, state.client_states, data)
  by_index = {int(r["client_index"]): {k: float(v) for k, v in r.items() if k != "client_index"} for r in results}
  if sorted(by_index) != list(range(len(clients))):
    raise RuntimeError(f"evaluation returned clients {sorted(by_index)}, expected all {len(clients)}")
  return {c.client_id: by_index[i] for i, c in enumerate(clients)}


def train_process(process: process_lib.GraphProcess, clients: Sequence[Any], *, seed: int, rounds: int,
                  client_fraction: float = 1.0, eval_every: int = 1, checkpoint_every: int | None = None,
                  state_manager: Any = None, releases: Releases = Releases(),
                  progress: Callable[[dict[str, Any]], None] | None = None,
                  state: LoopState | None = None,
                  on_round: Callable[[LoopState, dict[str, Any]], None] | None = None,
                  round_metrics: Callable[[int], dict[str, float]] | None = None) -> TrainingResult:
  """Runs (or continues) `rounds` rounds of `process` on `clients` (see module docstring).

  Args:
    process: a `GraphProcess` (any builder of `tff_graph.algorithms`, or a user's).
    clients: the setting's clients (`data_prep.cache.ClientData`: id, files, sizes, widths).
    seed: the model seed (initial weights, sampling, shuffling).
    rounds: total rounds of the run.
    client_fraction: share of clients sampled each round.
    eval_every: evaluate every k rounds (and after the last).
    checkpoint_every: save the loop state every k rounds (None: never); needs `state_manager`.
    state_manager: a `tff.program.ProgramStateManager`; the loop resumes from its newest state.
    releases: where metrics go.
    progress: called with a status dict after every evaluation.
    state: start from this loop state instead of the initial (or saved) one.
    on_round: called after each round's `next` with the new loop state and that round's metrics
      (`{"clients": {client: metrics}, "server": server metrics}`), before any evaluation.
    round_metrics: `round_metrics(r)` -> more server scalars released with round r's metrics (e.g.
      the privacy spent, `server/privacy/epsilon`).

  Returns:
    A `TrainingResult`: the final evaluation, the loop state, the evaluation rounds.
  """
  if rounds < 1:
    raise ValueError(f"rounds must be >= 1, got {rounds}")
  if not 0.0 < client_fraction <= 1.0:
    raise ValueError(f"client_fraction must be in (0, 1], got {client_fraction}")
  if eval_every < 1:
    raise ValueError(f"eval_every must be >= 1, got {eval_every}")
  ids = [c.client_id for c in clients]
  if process.clustering is not None and process.clustering.num_clients != len(clients):
    raise ValueError(f"the process was built for {process.clustering.num_clients} clients, got {len(clients)}")
  if state is None:
    state = initial_state(process, clients, seed=seed, rounds=rounds)
    if state_manager is not None:
      loaded = _load_newest(state_manager, state)
      if loaded is not None:
        state = dataclasses.replace(loaded, client_states=process.after_checkpoint(loaded.client_states))
  start = time.perf_counter()
  final: dict[str, dict[str, float]] = {}
  h = state.history
  while state.round < rounds:
    chosen = sample_clients(len(clients), client_fraction, seed=seed, round_num=state.round)
    data = [client_data(clients[i], i, seed=seed, round_num=state.round) for i in chosen]
    out = process.next(state.server_state, [state.client_states[i] for i in chosen], data)
    new_states = list(state.client_states)
    reports: dict[int, dict[str, float]] = {}
    for client_state, report in zip(out["client_states"], out["metrics"]["clients"]):
      i = int(report["client_index"])
      new_states[i] = _numpy(client_state)
      reports[i] = {k: float(v) for k, v in report.items() if k != "client_index"}
    if sorted(reports) != chosen:
      raise RuntimeError(f"round {state.round + 1}: reports came back for clients {sorted(reports)}, not {chosen}")
    server_metrics = _numpy(out["metrics"]["server"])
    state = LoopState(state.round + 1, _numpy(out["state"]), new_states, h)
    r = state.round
    train = {ids[i]: reports[i] for i in chosen}
    if on_round is not None:
      on_round(state, {"clients": train, "server": server_metrics})
    server_flat: dict[str, float] = {}
    _scalars("server", {k: v for k, v in server_metrics.items() if k != "clustering"}, server_flat)
    if round_metrics is not None:
      server_flat.update({f"server/{k}": float(v) for k, v in round_metrics(r).items()})
    board_value: dict[str, Any] = {"train": train, "server": dict(server_flat)}
    if "clustering" in server_metrics:
      c = server_metrics["clustering"]
      h["count"][r - 1] = int(c["count"])
      h["assignment"][r - 1] = c["assignment"]
      h["split"][r - 1] = c["split"]
      h["mean_norm"][r - 1] = c["mean_norm"]
      h["max_norm"][r - 1] = c["max_norm"]
      server_flat["server/clusters"] = float(c["count"])
      board_value["gcfl"] = {"clusters": float(c["count"])}
    if releases.train is not None:
      flat = {f"{cid}/{k}": v for cid, m in train.items() for k, v in m.items()}
      flat.update(server_flat)
      run_sync(releases.train.release(flat, r))
    if r % eval_every == 0 or r == rounds:
      evaluation = evaluate(process, clients, state, seed=seed)
      final = evaluation
      h["evaluated"][r - 1] = True
      h["test_accuracy"][r - 1] = [evaluation[cid]["test_accuracy"] for cid in ids]
      average = {k: float(np.mean([m[k] for m in evaluation.values()])) for k in next(iter(evaluation.values()))}
      if releases.evaluation is not None:
        flat = {f"average/{k}": v for k, v in average.items()}
        flat.update({f"{cid}/{k}": v for cid, m in evaluation.items() for k, v in m.items()})
        run_sync(releases.evaluation.release(flat, r))
      board_value["eval"] = {"average": average, **evaluation}
      if progress is not None:
        progress({"seed": seed, "round": r, "rounds": rounds, "elapsed": time.perf_counter() - start,
                  "test_accuracy": average["test_accuracy"]})
    if releases.board is not None:
      run_sync(releases.board.release(board_value, r))
    if state_manager is not None and checkpoint_every and r % checkpoint_every == 0 and r < rounds:
      run_sync(state_manager.save(state.to_structure(), r))
      state = dataclasses.replace(state, client_states=process.after_checkpoint(state.client_states))
  if not final:  # Loaded at or past the end: evaluate the final state.
    final = evaluate(process, clients, state, seed=seed)
  evaluated = [int(i) + 1 for i in np.flatnonzero(h["evaluated"][:state.round])]
  return TrainingResult(ids, final, state, evaluated)
