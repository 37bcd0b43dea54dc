r"""GCFL's split rules as TensorFlow, so that clustering runs inside the federated process.

Xie et al., "Federated Graph Classification over Non-IID Graphs", NeurIPS 2021 (arXiv:2106.13423).

A clustered process keeps, in its server state, every client's cluster (`assignment`, int32 [N],
cluster ids 0 .. count-1 in list order) and the rule's own state. After the clients of a round have
reported, `split_clusters` visits the clusters in order and splits cluster C when

    round > warmup_rounds  and  |C| >= min_cluster_size  and  >= 2 members reported
    and  ||mean_{i in C} dW_i|| < eps1  and  max_{i in C} ||dW_i|| > eps2  and  rule.ready(state)

into the two sides of a Stoer-Wagner minimum cut (`stoer_wagner_side`) of the complete graph over
the reporting members, with edge weights `rule.cut_weights(...)`:

* `CosineRule` (GCFL): $\cos(\Delta W_i, \Delta W_j) + 1$;
* `SequenceDTWRule` (GCFL+ with `sequence="last_grad_norm"`, GCFL+dWs with `"update_norm"`):
  $\max(D) - D_{ij}$ for the DTW distances D between the clients' last `seq_length` values of that
  per-client quantity; ready only when every client has `seq_length` values; every sequence is
  emptied after a split (the reference's `seqs_grads = {c.id: [] ...}`).

A split cluster at list position k becomes positions k (the side holding its first reporting
member) and k + 1; later clusters move up by one. Members that did not report this round (partial
participation) stay with the first side. The new clusters start from the old cluster's weights
(`source`) and average this round's updates among their own members.

Everything here is plain TensorFlow on [N, ...] tensors, checked against networkx's Stoer-Wagner and
dtaidistance's DTW (`tests/federated/cluster_rules_test.py`). A user-defined rule implements the
four methods of `SplitRule` in TensorFlow and gets the gate, the min-cut and the bookkeeping.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

from tff_graph import clustering

_INF = float("inf")


def masked_norms(updates: tf.Tensor, here: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """(||mean of the `here` rows||, max row norm over `here`) of float64 `updates` [N, d]."""
  mask = tf.cast(here, updates.dtype)
  count = tf.maximum(tf.reduce_sum(mask), 1.0)
  mean = tf.reduce_sum(updates * mask[:, None], axis=0) / count
  row_norms = tf.sqrt(tf.reduce_sum(tf.square(updates), axis=1))
  return (tf.sqrt(tf.reduce_sum(tf.square(mean))),
          tf.reduce_max(tf.where(here, row_norms, tf.zeros_like(row_norms))))


def cosine_similarity(updates: tf.Tensor) -> tf.Tensor:
  """[N, N] cosine similarities of the rows of float64 `updates` (0 where a row is zero)."""
  norms = tf.sqrt(tf.reduce_sum(tf.square(updates), axis=1))
  return tf.matmul(updates, updates, transpose_b=True) / tf.maximum(
      norms[:, None] * norms[None, :], tf.constant(1e-12, updates.dtype))


def dtw_distances(sequences: tf.Tensor, *, standardize: bool = False) -> tf.Tensor:
  """[N, N] DTW distances (squared-difference cost, full window, sqrt at the end) of [N, L] rows.

  The same recursion as dtaidistance's `dtw.distance_matrix` (equal to it bit for bit on float64
  inputs when `standardize` is off); with `standardize` each row is divided by its standard
  deviation first (a constant row is left as it is).
  """
  s = tf.convert_to_tensor(sequences, tf.float64)
  if standardize:
    std = tf.math.reduce_std(s, axis=1, keepdims=True)
    s = s / tf.where(std > 0, std, tf.ones_like(std))
  length = s.shape[1]
  if length is None:
    raise ValueError("dtw_distances needs a static sequence length")
  cost = tf.square(s[:, None, :, None] - s[None, :, None, :])  # [N, N, L, L]
  inf = tf.fill(tf.shape(cost)[:2], tf.constant(_INF, tf.float64))
  previous = [inf] * length  # Row i - 1 of the cumulative cost.
  for i in range(length):
    row = []
    for j in range(length):
      if i == 0 and j == 0:
        best = tf.zeros_like(inf)
      else:
        up = previous[j]
        left = row[j - 1] if j > 0 else inf
        diagonal = previous[j - 1] if j > 0 else inf
        best = tf.minimum(tf.minimum(diagonal, up), left)
      row.append(cost[:, :, i, j] + best)
    previous = row
  return tf.sqrt(previous[-1])


@tf.function
def stoer_wagner_side(weights: tf.Tensor, members: tf.Tensor) -> tf.Tensor:
  """Stoer-Wagner minimum cut of the complete graph over `members` (bool [N]).

  Args:
    weights: [N, N] symmetric non-negative float64 edge weights (diagonal and non-members ignored).
    members: which nodes take part (at least two).

  Returns:
    bool [N]: the side of the cut that holds the first member (the other side is
    `members & ~side`). Phases, maximum-adjacency order, cut-of-the-phase and contraction are those
    of networkx's `stoer_wagner`; only ties between equally connected nodes may be broken
    differently (lowest index here).
  """
  n = tf.shape(weights)[0]
  pair = tf.logical_and(members[:, None], members[None, :])
  pair = tf.logical_and(pair, tf.logical_not(tf.eye(n, dtype=tf.bool)))
  w = tf.where(pair, weights, tf.zeros_like(weights))
  groups = tf.eye(n, dtype=tf.bool)
  alive = members
  best = tf.constant(_INF, tf.float64)
  best_group = tf.zeros([n], tf.bool)
  phases = tf.reduce_sum(tf.cast(members, tf.int32)) - 1
  for _ in tf.range(phases):
    first = tf.argmax(tf.cast(alive, tf.int32), output_type=tf.int32)
    in_a = tf.one_hot(first, n, on_value=True, off_value=False)
    connection = w[first]
    prev = first
    last = first
    cut = tf.constant(0.0, tf.float64)
    steps = tf.reduce_sum(tf.cast(alive, tf.int32)) - 1
    for _ in tf.range(steps):
      candidates = tf.logical_and(alive, tf.logical_not(in_a))
      chosen = tf.argmax(tf.where(candidates, connection, tf.fill([n], tf.constant(-_INF, tf.float64))),
                         output_type=tf.int32)
      cut = connection[chosen]
      in_a = tf.logical_or(in_a, tf.one_hot(chosen, n, on_value=True, off_value=False))
      prev = last
      last = chosen
      connection = connection + w[chosen]
    if cut < best:
      best = cut
      best_group = groups[last]
    # Contract `last` into `prev`.
    merged = w[prev] + w[last]
    keep = tf.logical_not(tf.one_hot(last, n, on_value=True, off_value=False))
    merged = tf.where(keep, merged, tf.zeros_like(merged))
    merged = tf.tensor_scatter_nd_update(merged, [[prev]], tf.zeros([1], tf.float64))
    w = tf.where(keep[:, None] & keep[None, :], w, tf.zeros_like(w))
    w = tf.tensor_scatter_nd_update(w, [[prev]], merged[None])
    w = tf.transpose(tf.tensor_scatter_nd_update(tf.transpose(w), [[prev]], merged[None]))
    groups = tf.tensor_scatter_nd_update(groups, [[prev]], tf.logical_or(groups[prev], groups[last])[None])
    alive = tf.logical_and(alive, keep)
  first_member = tf.argmax(tf.cast(members, tf.int32), output_type=tf.int32)
  side = tf.logical_and(best_group, members)
  return tf.cond(side[first_member], lambda: side, lambda: tf.logical_and(members, tf.logical_not(side)))


class SplitRule:
  """How a cluster is cut in two, and the rule's own state (see module docstring).

  Subclasses implement, in TensorFlow:
    `initial_state(num_clients)`: the rule's state (an OrderedDict of numpy arrays, may be empty);
    `observe(state, present, reports)`: the state after this round's reports (float32 [N] per
      reported metric, `present` bool [N]);
    `ready(state)`: a bool scalar, an extra condition of the gate;
    `cut_weights(state, updates, members)`: [N, N] float64 min-cut weights among `members`;
    `after_split(state)`: the state after a split.
  """

  thresholds: clustering.SplitThresholds

  def initial_state(self, num_clients: int) -> "collections.OrderedDict[str, np.ndarray]":
    del num_clients
    return collections.OrderedDict()

  def observe(self, state, present, reports):
    del present, reports
    return state

  def ready(self, state) -> tf.Tensor:
    del state
    return tf.constant(True)

  def cut_weights(self, state, updates: tf.Tensor, members: tf.Tensor) -> tf.Tensor:
    raise NotImplementedError

  def after_split(self, state):
    return state


@dataclasses.dataclass(frozen=True)
class CosineRule(SplitRule):
  """GCFL: cut on cosine similarity + 1 of the reporting members' updates of this round."""

  thresholds: clustering.SplitThresholds = clustering.SplitThresholds()

  def cut_weights(self, state, updates, members):
    del state, members
    return cosine_similarity(updates) + 1.0


@dataclasses.dataclass(frozen=True)
class SequenceDTWRule(SplitRule):
  """GCFL+ (`last_grad_norm`) / GCFL+dWs (`update_norm`): cut on DTW of per-client sequences.

  State: `values` float32 [N, seq_length] (each row's last seq_length values, oldest first) and
  `length` int32 [N] (values appended since the last reset, capped at seq_length).
  """

  thresholds: clustering.SplitThresholds = clustering.SplitThresholds()
  sequence: str = "last_grad_norm"

  def __post_init__(self):
    if self.sequence not in ("last_grad_norm", "update_norm"):
      raise ValueError(f"sequence must be 'last_grad_norm' or 'update_norm', got {self.sequence!r}")
    if self.thresholds.seq_length < 1:
      raise ValueError(f"seq_length must be >= 1, got {self.thresholds.seq_length}")

  def initial_state(self, num_clients):
    length = self.thresholds.seq_length
    return collections.OrderedDict(values=np.zeros([num_clients, length], np.float32),
                                   length=np.zeros([num_clients], np.int32))

  def observe(self, state, present, reports):
    value = reports[self.sequence]
    shifted = tf.concat([state["values"][:, 1:], value[:, None]], axis=1)
    return collections.OrderedDict(
        values=tf.where(present[:, None], shifted, state["values"]),
        length=tf.where(present, tf.minimum(state["length"] + 1, self.thresholds.seq_length), state["length"]))

  def ready(self, state):
    return tf.reduce_all(state["length"] >= self.thresholds.seq_length)

  def cut_weights(self, state, updates, members):
    del updates
    d = dtw_distances(tf.cast(state["values"], tf.float64), standardize=self.thresholds.standardize)
    pair = tf.logical_and(members[:, None], members[None, :])
    top = tf.reduce_max(tf.where(pair, d, tf.zeros_like(d)))
    return top - d

  def after_split(self, state):
    return collections.OrderedDict(values=tf.zeros_like(state["values"]), length=tf.zeros_like(state["length"]))


def _slot_exists(slot, capacity):
  """An assertion that cluster `slot` fits the server state's `capacity` slots.

  The scatter that writes the slot must depend on it: graph execution may otherwise run the scatter first
  and fail with an index error instead of naming the capacity.
  """
  return tf.debugging.assert_less(slot, capacity,
                                  message=f"GCFL needs more clusters than its {capacity} slots")


@tf.function
def split_clusters(rule: SplitRule, rule_state: Any, assignment: tf.Tensor, count: tf.Tensor,
                   round_num: tf.Tensor, present: tf.Tensor, updates: tf.Tensor,
                   reports: "collections.OrderedDict[str, tf.Tensor]", capacity: int):
  """One round of the clustering rule (see module docstring), in TensorFlow.

  Args:
    rule: the split rule.
    rule_state: its state before this round.
    assignment: int32 [N], each client's cluster before this round.
    count: int32 scalar, the number of clusters.
    round_num: int32 scalar, this round's number (from 1).
    present: bool [N], the clients that reported this round.
    updates: float32 [N, d], each reporting client's flattened shared update (0 for the others).
    reports: float32 [N] per reported metric (`update_norm`, `last_grad_norm`).
    capacity: the number of cluster slots (the server state's leading axis).

  Returns:
    OrderedDict(rule_state, assignment, count, source: int32 [capacity] (the old cluster each slot
    takes its weights from), mean_norm, max_norm: float64 [capacity] per old cluster (0 when fewer
    than two members reported), split: bool [capacity] per old cluster).
  """
  t = rule.thresholds
  updates64 = tf.cast(updates, tf.float64)
  rule_state = rule.observe(rule_state, present, reports)
  new_assignment = assignment
  source = tf.range(capacity, dtype=tf.int32)
  mean_norms = tf.zeros([capacity], tf.float64)
  max_norms = tf.zeros([capacity], tf.float64)
  splits = tf.zeros([capacity], tf.bool)
  offset = tf.constant(0, tf.int32)
  for k in tf.range(count):
    members = tf.equal(assignment, k)
    here = tf.logical_and(members, present)
    reported = tf.reduce_sum(tf.cast(here, tf.int32))
    new_id = k + offset
    mean_norm, max_norm = masked_norms(updates64, here)
    mean_norm = tf.where(reported >= 2, mean_norm, tf.zeros_like(mean_norm))
    max_norm = tf.where(reported >= 2, max_norm, tf.zeros_like(max_norm))
    gate = tf.logical_and(reported >= 2, round_num > t.warmup_rounds)
    gate = tf.logical_and(gate, tf.reduce_sum(tf.cast(members, tf.int32)) >= t.min_cluster_size)
    gate = tf.logical_and(gate, tf.logical_and(mean_norm < t.eps1, max_norm > t.eps2))
    gate = tf.logical_and(gate, rule.ready(rule_state))
    mean_norms = tf.tensor_scatter_nd_update(mean_norms, [[k]], [mean_norm])
    max_norms = tf.tensor_scatter_nd_update(max_norms, [[k]], [max_norm])
    splits = tf.tensor_scatter_nd_update(splits, [[k]], [gate])
    if gate:
      side = stoer_wagner_side(rule.cut_weights(rule_state, updates64, here), here)
      side = tf.logical_or(side, tf.logical_and(members, tf.logical_not(present)))
      new_assignment = tf.where(tf.logical_and(members, side), new_id,
                                tf.where(members, new_id + 1, new_assignment))
      with tf.control_dependencies([_slot_exists(new_id + 1, capacity)]):
        source = tf.tensor_scatter_nd_update(source, [[new_id], [new_id + 1]], tf.stack([k, k]))
      offset += 1
      rule_state = rule.after_split(rule_state)
    else:
      new_assignment = tf.where(members, new_id, new_assignment)
      with tf.control_dependencies([_slot_exists(new_id, capacity)]):
        source = tf.tensor_scatter_nd_update(source, [[new_id]], [k])
  new_count = count + offset
  return collections.OrderedDict(rule_state=rule_state, assignment=new_assignment, count=new_count,
                                 source=source, mean_norm=mean_norms, max_norm=max_norms, split=splits)

