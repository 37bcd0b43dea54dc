"""ClusterwiseFactory: the per-cluster weighted mean, and any tff.aggregators factory inside it."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_graph.aggregators import ClusterwiseFactory

K = 3
UPDATE = [tff.TensorType(np.float32, [2, 3]), tff.TensorType(np.float32, [4])]
VALUE = tff.StructWithPythonType([("update", tff.StructWithPythonType(UPDATE, list)),
                                  ("cluster", tff.TensorType(np.int32))], collections.OrderedDict)
WEIGHT = tff.TensorType(np.float32)


def _clients(n=5, seed=0):
  rng = np.random.default_rng(seed)
  clusters = [0, 2, 0, 2, 2][:n]
  values = [collections.OrderedDict(update=[rng.normal(size=(2, 3)).astype(np.float32),
                                            rng.normal(size=(4,)).astype(np.float32)],
                                    cluster=np.int32(c)) for c in clusters]
  weights = [np.float32(w) for w in rng.integers(1, 50, size=n)]
  return values, weights


def _run(factory, values, weights, rounds=1):
  process = factory.create(VALUE, WEIGHT)
  state = process.initialize()
  for _ in range(rounds):
    out = process.next(state, values, weights)
    state = out.state
  return out


def _expected(values, weights):
  means = []
  for k in range(K):
    members = [i for i, v in enumerate(values) if int(v["cluster"]) == k]
    w = np.array([weights[i] for i in members], np.float64)
    means.append([np.tensordot(w / w.sum(), np.stack([values[i]["update"][j] for i in members]), axes=1)
                  if members else np.zeros(UPDATE[j].shape) for j in range(2)])
  return means


def test_weighted_mean_within_each_cluster(tff_context):
  values, weights = _clients()
  out = _run(ClusterwiseFactory(K), values, weights)
  expected = _expected(values, weights)
  for j in range(2):
    for k in range(K):
      np.testing.assert_allclose(out.result[j][k], expected[k][j], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out.measurements["cluster_weights"],
                             [weights[0] + weights[2], 0.0, weights[1] + weights[3] + weights[4]])
  assert not np.any(out.result[0][1])  # The empty cluster's mean is 0.


def test_one_cluster_is_tff_mean_factory_bit_for_bit(tff_context):
  values, weights = _clients()
  for v in values:
    v["cluster"] = np.int32(0)
  ours = _run(ClusterwiseFactory(1), values, weights).result
  mean = tff.aggregators.MeanFactory().create(VALUE.update, WEIGHT)
  theirs = mean.next(mean.initialize(), [v["update"] for v in values], weights).result
  for a, b in zip(ours, theirs):
    np.testing.assert_array_equal(a[0], b)


def test_inner_mean_factory_per_cluster_equals_the_fast_path(tff_context):
  values, weights = _clients()
  fast = _run(ClusterwiseFactory(K), values, weights)
  inner = _run(ClusterwiseFactory(K, inner=tff.aggregators.MeanFactory(no_nan_division=True)), values, weights)
  for a, b in zip(fast.result, inner.result):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(fast.measurements["cluster_weights"], inner.measurements["cluster_weights"])


def test_stateful_inner_factory_keeps_one_state_per_cluster(tff_context):
  # Adaptive DP clipping: each cluster's clipping norm adapts to its own clients only.
  values, weights = _clients()
  dp = tff.aggregators.DifferentiallyPrivateFactory.gaussian_adaptive(
      noise_multiplier=0.0, clients_per_round=5.0, initial_l2_norm_clip=0.1, target_unclipped_quantile=0.9,
      learning_rate=0.5)
  factory = ClusterwiseFactory(K, inner=dp)
  process = factory.create(VALUE, WEIGHT)
  state = process.initialize()
  assert len(state) == K
  out = process.next(state, values, weights)
  out = process.next(out.state, values, weights)
  clips = [float(m["dp_query_metrics"]["clip"]) for m in out.measurements["inner"]]
  assert clips[0] != clips[2]  # The clusters' clipping norms have adapted differently.
  assert len(out.measurements["inner"]) == K


def test_secure_sum_inside_runs_on_our_runtime(tff_context):
  values, weights = _clients()
  # Clients send value * weight: the bound must hold for weighted values.
  secure = tff.aggregators.MeanFactory(value_sum_factory=tff.aggregators.SecureSumFactory(upper_bound_threshold=1000.0),
                                       no_nan_division=True)
  out = _run(ClusterwiseFactory(K, inner=secure), values, weights)
  expected = _expected(values, weights)
  for j in range(2):
    for k in (0, 2):
      np.testing.assert_allclose(out.result[j][k], expected[k][j], rtol=1e-4, atol=1e-4)  # 32-bit quantised.
  assert float(out.measurements["inner"][0]["mean_value"]["secure_upper_threshold"]) == 1000.0


def test_bad_arguments():
  with pytest.raises(ValueError, match="num_clusters must be >= 1"):
    ClusterwiseFactory(0)
  with pytest.raises(TypeError, match="inner must be a tff.aggregators factory"):
    ClusterwiseFactory(2, inner=lambda x: x)
  with pytest.raises(TypeError, match="the weight must be a float scalar"):
    ClusterwiseFactory(2).create(VALUE, tff.TensorType(np.int32))
