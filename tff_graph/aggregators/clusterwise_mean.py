r"""Cluster-wise aggregation of client updates, as a `tff.aggregators` factory wrapper.

Each client contributes `OrderedDict(update=<structure of tensors>, cluster=<int32 scalar>)` with a
weight (its train size). The result at SERVER has, for every tensor of the update, a leading cluster
axis of size K (the number of cluster slots): slot k aggregates the updates of the clients in
cluster k with the *inner* factory, independently of the other clusters.

* `ClusterwiseFactory(num_clusters, inner=None)`: with no inner factory, the weighted mean

  $$\bar u_k = \frac{\sum_{i: c_i = k} w_i\, u_i}{\sum_{i: c_i = k} w_i} \quad (0 \text{ for an empty cluster})$$

  computed in one federated sum (clients scatter their weighted update into their cluster's slot;
  only sums reach the server). With an inner factory (any `tff.aggregators`
  `WeightedAggregationFactory` or `UnweightedAggregationFactory`: DP, clipping, robust, secure
  sums ...), one inner aggregation process runs per cluster slot, with its own state; clients of
  other clusters take part in it with weight 0 (weighted inner) or a zero update (unweighted inner:
  then a cluster's DP noise and clipping see every client, and a fixed `clients_per_round`
  denominator counts them all). Its cost grows with K.

The measurements are `cluster_weights` (the summed weight per slot, 0 for a slot without clients:
callers keep such a slot's weights) and, with an inner factory, `inner` (each slot's measurements).
With K = 1 and no inner factory this is FedAvg's weighted mean (equal, bit for bit, to
`tff.aggregators.MeanFactory`).
"""

from __future__ import annotations

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


class ClusterwiseFactory(tff.aggregators.WeightedAggregationFactory):
  """See module docstring."""

  def __init__(self, num_clusters: int = 1, inner: tff.aggregators.WeightedAggregationFactory |
               tff.aggregators.UnweightedAggregationFactory | None = None):
    if num_clusters < 1:
      raise ValueError(f"num_clusters must be >= 1, got {num_clusters}")
    if inner is not None and not isinstance(inner, (tff.aggregators.WeightedAggregationFactory,
                                                    tff.aggregators.UnweightedAggregationFactory)):
      raise TypeError(f"inner must be a tff.aggregators factory, got {type(inner).__name__}")
    self._num_clusters = num_clusters
    self._inner = inner

  @property
  def num_clusters(self) -> int:
    return self._num_clusters

  @property
  def inner(self):
    return self._inner

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    if not isinstance(weight_type, tff.TensorType) or not np.issubdtype(weight_type.dtype, np.floating):
      raise TypeError(f"the weight must be a float scalar, got {weight_type}")
    if self._inner is None:
      return _scatter_mean(self._num_clusters, value_type, weight_type)
    return _per_cluster(self._num_clusters, self._inner, value_type, weight_type)


def _expand(x, rank):
  return x[(slice(None),) + (None,) * rank]


def _cluster_weights_fn(k, value_type, weight_type):
  @tff.tensorflow.computation(value_type, weight_type)
  def one_hot(value, weight):
    return tf.one_hot(value["cluster"], k, dtype=tf.float32) * tf.cast(weight, tf.float32)
  return one_hot


def _scatter_mean(k, value_type, weight_type):
  update_specs = [tf.TensorSpec(t.shape, t.dtype) for t in tff.structure.flatten(value_type.update)]
  update_type = value_type.update

  @tff.tensorflow.computation(value_type, weight_type)
  def scatter(value, weight):
    onehot = tf.one_hot(value["cluster"], k, dtype=tf.float32) * tf.cast(weight, tf.float32)
    sums = [_expand(onehot, len(s.shape)) * tf.cast(u, tf.float32)[None]
            for s, u in zip(update_specs, tf.nest.flatten(value["update"]))]
    return collections.OrderedDict(sums=sums, weights=onehot)

  @tff.tensorflow.computation(scatter.type_signature.result)
  def divide(summed):
    weights = summed["weights"]
    safe = tf.where(weights > 0, weights, tf.ones_like(weights))
    means = [tf.where(_expand(weights > 0, len(s.shape) - 1), s / _expand(safe, len(s.shape) - 1),
                      tf.zeros_like(s)) for s in summed["sums"]]
    return collections.OrderedDict(
        result=tf.nest.pack_sequence_as(_py(update_type), means), cluster_weights=weights)

  @tff.federated_computation()
  def initialize():
    return tff.federated_value((), tff.SERVER)

  @tff.federated_computation(initialize.type_signature.result, tff.FederatedType(value_type, tff.CLIENTS),
                             tff.FederatedType(weight_type, tff.CLIENTS))
  def next_fn(state, value, weight):
    out = tff.federated_map(divide, tff.federated_sum(tff.federated_map(scatter, (value, weight))))
    return tff.templates.MeasuredProcessOutput(
        state=state, result=out.result,
        measurements=tff.federated_zip(collections.OrderedDict(cluster_weights=out.cluster_weights)))

  return tff.templates.AggregationProcess(initialize, next_fn)


def _py(type_spec):
  """A nested Python structure shaped like a TFF struct type (to repack flat lists of tensors)."""
  if isinstance(type_spec, tff.StructType):
    items = list(tff.structure.iter_elements(type_spec))
    if items and all(name is not None for name, _ in items):
      return collections.OrderedDict((name, _py(t)) for name, t in items)
    return [_py(t) for _, t in items]
  return 0


def _per_cluster(k, inner, value_type, weight_type):
  update_type = value_type.update
  weighted = isinstance(inner, tff.aggregators.WeightedAggregationFactory)
  processes = [inner.create(update_type, weight_type) if weighted else inner.create(update_type)
               for _ in range(k)]
  cluster_weights = _cluster_weights_fn(k, value_type, weight_type)

  def mask_fn(slot):
    if weighted:
      @tff.tensorflow.computation(value_type, weight_type)
      def mask(value, weight):
        return value["update"], tf.where(tf.equal(value["cluster"], slot), weight, tf.zeros_like(weight))
    else:
      @tff.tensorflow.computation(value_type)
      def mask(value):
        keep = tf.equal(value["cluster"], slot)
        return tf.nest.map_structure(lambda u: tf.where(keep, u, tf.zeros_like(u)), value["update"])
    return mask

  masks = [mask_fn(slot) for slot in range(k)]
  result_member = processes[0].next.type_signature.result.result.member

  @tff.tensorflow.computation([result_member] * k, tff.TensorType(np.float32, [k]))
  def stack(results, weights):
    flat = [tf.nest.flatten(r) for r in results]
    stacked = [tf.where(_expand(weights > 0, len(parts[0].shape)), tf.stack(parts), tf.zeros_like(tf.stack(parts)))
               for parts in zip(*flat)]
    return tf.nest.pack_sequence_as(_py(update_type), stacked)

  @tff.federated_computation()
  def initialize():
    return tff.federated_zip([p.initialize() for p in processes])

  @tff.federated_computation(initialize.type_signature.result, tff.FederatedType(value_type, tff.CLIENTS),
                             tff.FederatedType(weight_type, tff.CLIENTS))
  def next_fn(state, value, weight):
    outputs = []
    for slot, process in enumerate(processes):
      if weighted:
        masked = tff.federated_map(masks[slot], (value, weight))
        outputs.append(process.next(state[slot], masked[0], masked[1]))
      else:
        outputs.append(process.next(state[slot], tff.federated_map(masks[slot], value)))
    weights = tff.federated_sum(tff.federated_map(cluster_weights, (value, weight)))
    result = tff.federated_map(stack, (tff.federated_zip([o.result for o in outputs]), weights))
    measurements = tff.federated_zip(collections.OrderedDict(
        cluster_weights=weights, inner=tff.federated_zip([o.measurements for o in outputs])))
    return tff.templates.MeasuredProcessOutput(
        state=tff.federated_zip([o.state for o in outputs]), result=result, measurements=measurements)

  return tff.templates.AggregationProcess(initialize, next_fn)
