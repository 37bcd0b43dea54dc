r"""Weighted mean of client updates within clusters ("buckets"), as a `tff.aggregators` factory.

Each client contributes `OrderedDict(update=<structure of tensors>, bucket=<int32 scalar>)` with a
weight (its train size). The result at SERVER has, for every tensor of the update, a leading bucket
axis of size K:

$$\bar u_k = \frac{\sum_{i: b_i = k} w_i\, u_i}{\sum_{i: b_i = k} w_i} \quad (0 \text{ for an empty bucket}),$$

and the measurements are the bucket weights $\sum_{i: b_i = k} w_i$. With K = 1 this is FedAvg's
weighted mean; GCFL uses one bucket per cluster. Clients scatter their weighted update into their
bucket's slot and the slots are summed, so only sums, never single-client values, reach the server.
"""

from __future__ import annotations

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


class ClusterwiseMeanFactory(tff.aggregators.WeightedAggregationFactory):
  """Stateless factory; see module docstring. `num_buckets` fixes K (the type has K slots)."""

  def __init__(self, num_buckets: int = 1):
    if num_buckets < 1:
      raise ValueError(f"num_buckets must be >= 1, got {num_buckets}")
    self._num_buckets = num_buckets

  @property
  def num_buckets(self) -> int:
    return self._num_buckets

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    k = self._num_buckets
    update_type = value_type.update
    if not isinstance(weight_type, tff.TensorType) or not np.issubdtype(weight_type.dtype, np.floating):
      raise TypeError(f"the weight must be a float scalar, got {weight_type}")
    update_specs = [tf.TensorSpec(t.shape, t.dtype) for t in tff.structure.flatten(update_type)]

    @tff.tensorflow.computation(value_type, weight_type)
    def scatter(value, weight):
      onehot = tf.one_hot(value["bucket"], k, dtype=tf.float32) * tf.cast(weight, tf.float32)
      sums = [onehot[(slice(None),) + (None,) * len(s.shape)] * tf.cast(u, tf.float32)[None]
              for s, u in zip(update_specs, tf.nest.flatten(value["update"]))]
      return collections.OrderedDict(sums=sums, weights=onehot)

    summed_type = scatter.type_signature.result

    @tff.tensorflow.computation(summed_type)
    def divide(summed):
      weights = summed["weights"]
      safe = tf.where(weights > 0, weights, tf.ones_like(weights))
      means = [tf.where((weights > 0)[(slice(None),) + (None,) * (len(s.shape) - 1)],
                        s / safe[(slice(None),) + (None,) * (len(s.shape) - 1)], tf.zeros_like(s))
               for s in summed["sums"]]
      return means

    @tff.federated_computation()
    def initialize():
      return tff.federated_value((), tff.SERVER)

    @tff.federated_computation(initialize.type_signature.result,
                               tff.FederatedType(value_type, tff.CLIENTS),
                               tff.FederatedType(weight_type, tff.CLIENTS))
    def next_fn(state, value, weight):
      summed = tff.federated_sum(tff.federated_map(scatter, (value, weight)))
      result = tff.federated_map(divide, summed)
      return tff.templates.MeasuredProcessOutput(
          state=state, result=result,
          measurements=tff.federated_map(_weights_of(summed_type), summed))

    return tff.templates.AggregationProcess(initialize, next_fn)


def _weights_of(summed_type):
  @tff.tensorflow.computation(summed_type)
  def weights(summed):
    return summed["weights"]
  return weights
