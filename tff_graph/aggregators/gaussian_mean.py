r"""A client-level differentially private mean with seeded noise, as a `tff.aggregators` factory.

`GaussianMeanFactory(clip, noise_multiplier, seed)` aggregates the clients that take part (weight > 0;
the weight's size is ignored: a train-size weight would let one client's contribution exceed the clip):

$$\bar u = \frac{1}{m} \Big( \sum_{i: w_i > 0} \mathrm{clip}_C(u_i) + \mathcal N(0, (zC)^2 I) \Big),
\qquad \mathrm{clip}_C(u) = u \cdot \min(1, C / \lVert u \rVert_2),$$

with m the number of clients aggregated (sent as a sum of indicators; under replace-one adjacency it
does not depend on any client's data). The noise is `tf.random.stateless_normal` keyed by
(`seed`, round, tensor index) — so a run and its resume after a kill give the same noise, bit for bit —
unlike TF-Privacy's unseeded Gaussian query. The sum is a plain federated sum, or TFF's
`SecureSumFactory(secure_bound)` (values clipped to the bound, floats quantised to 32-bit integers).

Privacy: replacing one client's update moves the clipped sum by at most 2C, so each round is a
Gaussian mechanism with noise multiplier z / 2 relative to that sensitivity (`tff_graph.privacy`
accounts it so). With `ClusterwiseFactory(inner=GaussianMeanFactory(...))` (GCFL) every cluster slot is
its own mechanism over its members (clients of other clusters come with weight 0), with its own noise
stream.

Measurements: `clipped_count` (clients whose update was clipped), `participants` (m), `sum` (the sum
factory's own measurements).
"""

from __future__ import annotations

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff


class GaussianMeanFactory(tff.aggregators.WeightedAggregationFactory):
  """See module docstring."""

  def __init__(self, clip: float, noise_multiplier: float, *, seed: int = 0, secure_bound: float | None = None):
    if not clip > 0:
      raise ValueError(f"clip must be > 0, got {clip}")
    if not noise_multiplier >= 0:
      raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier}")
    self._clip = float(clip)
    self._stddev = float(noise_multiplier) * float(clip)
    self._seed = int(seed)
    self._secure_bound = secure_bound
    self._created = 0  # Each process made by this factory (e.g. one per cluster slot) gets its own stream.

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    stream = self._created
    self._created += 1
    sum_factory = (tff.aggregators.SecureSumFactory(self._secure_bound) if self._secure_bound is not None
                   else tff.aggregators.SumFactory())
    sum_process = sum_factory.create(value_type)
    clip, stddev, seed = self._clip, self._stddev, self._seed

    @tff.tensorflow.computation(value_type, weight_type)
    def clip_value(value, weight):
      flat = tf.nest.flatten(value)
      norm = tf.linalg.global_norm(flat)
      scale = tf.minimum(1.0, clip / tf.maximum(norm, 1e-12)) * tf.cast(weight > 0, norm.dtype)
      return tf.nest.pack_sequence_as(value, [t * tf.cast(scale, t.dtype) for t in flat])

    @tff.tensorflow.computation(value_type, weight_type)
    def was_clipped(value, weight):
      norm = tf.linalg.global_norm(tf.nest.flatten(value))
      return tf.cast(tf.logical_and(weight > 0, norm > clip), tf.float32)

    @tff.tensorflow.computation(weight_type)
    def takes_part(weight):
      return tf.cast(weight > 0, tf.float32)

    @tff.tensorflow.computation(value_type, np.int64, np.float32)
    def noisy_mean(total, round_num, count):
      flat = tf.nest.flatten(total)
      out = []
      for i, t in enumerate(flat):
        key = tf.stack([tf.constant(seed, tf.int64) * 1_000_003 + stream, round_num * 4096 + i])
        noise = tf.random.stateless_normal(tf.shape(t), seed=key, dtype=t.dtype) * tf.cast(stddev, t.dtype)
        out.append((t + noise) / tf.cast(tf.maximum(count, 1.0), t.dtype))
      return tf.nest.pack_sequence_as(total, out)

    @tff.tensorflow.computation(np.int64)
    def increment(round_num):
      return round_num + 1

    @tff.federated_computation()
    def initialize():
      return tff.federated_zip((sum_process.initialize(), tff.federated_value(np.int64(0), tff.SERVER)))

    state_type = initialize.type_signature.result

    @tff.federated_computation(state_type, tff.FederatedType(value_type, tff.CLIENTS),
                               tff.FederatedType(weight_type, tff.CLIENTS))
    def next_fn(state, value, weight):
      clipped = tff.federated_map(clip_value, (value, weight))
      summed = sum_process.next(state[0], clipped)
      count = tff.federated_sum(tff.federated_map(takes_part, weight))
      mean = tff.federated_map(noisy_mean, (summed.result, state[1], count))
      measurements = tff.federated_zip(collections.OrderedDict(
          clipped_count=tff.federated_sum(tff.federated_map(was_clipped, (value, weight))), participants=count,
          sum=summed.measurements))
      new_state = tff.federated_zip((summed.state, tff.federated_map(increment, state[1])))
      return tff.templates.MeasuredProcessOutput(new_state, mean, measurements)

    return tff.templates.AggregationProcess(initialize, next_fn)
