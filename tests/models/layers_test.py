"""Convolutions against NumPy computations of their formulas on hand-made graphs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tff_graph.models import layers

# Two components: a triangle 0-1-2 with a pendant 3 (edge 2-3), and an isolated node 4.
UNDIRECTED = [(0, 1), (1, 2), (0, 2), (2, 3)]
N = 5


def _graph() -> tfgnn.GraphTensor:
  src = [u for u, v in UNDIRECTED] + [v for u, v in UNDIRECTED]
  dst = [v for u, v in UNDIRECTED] + [u for u, v in UNDIRECTED]
  return tfgnn.GraphTensor.from_pieces(
      node_sets={"nodes": tfgnn.NodeSet.from_fields(sizes=tf.constant([4, 1]))},
      edge_sets={"edges": tfgnn.EdgeSet.from_fields(
          sizes=tf.constant([len(src), 0]),
          adjacency=tfgnn.Adjacency.from_indices(("nodes", tf.constant(src)), ("nodes", tf.constant(dst))))})


def _adjacency() -> np.ndarray:
  a = np.zeros((N, N))
  for u, v in UNDIRECTED:
    a[u, v] = a[v, u] = 1
  return a


def _hidden(width: int = 3) -> np.ndarray:
  return np.random.default_rng(0).normal(size=(N, width)).astype(np.float32)


def _dense(layer: tf.keras.layers.Dense, x: np.ndarray) -> np.ndarray:
  w = layer.kernel.numpy()
  out = x @ w + (layer.bias.numpy() if layer.use_bias else 0)
  return np.maximum(out, 0) if layer.activation is tf.keras.activations.relu else out


def test_gin_is_mlp_of_self_plus_neighbour_sum():
  conv = layers.GINConv(4, seed=1)
  h = _hidden()
  got = conv(_graph(), tf.constant(h)).numpy()
  z = h + _adjacency() @ h  # epsilon = 0
  expected = _dense(conv.mlp_out, _dense(conv.mlp_in, z))
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
  # The isolated node sees only itself.
  np.testing.assert_allclose(got[4], _dense(conv.mlp_out, _dense(conv.mlp_in, h[4:5]))[0], rtol=1e-5)


def test_gcn_symmetric_normalisation_with_self_loops():
  conv = layers.GCNConv(4, seed=1)
  h = _hidden()
  got = conv(_graph(), tf.constant(h)).numpy()
  conv.bias.assign(np.arange(4, dtype=np.float32))
  got = conv(_graph(), tf.constant(h)).numpy()
  a_hat = _adjacency() + np.eye(N)
  d = a_hat.sum(1)
  norm = a_hat / np.sqrt(np.outer(d, d))
  expected = norm @ (h @ conv.linear.kernel.numpy()) + np.arange(4)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
  # Isolated node: degree 1 with its self-loop, so W h + b.
  np.testing.assert_allclose(got[4], h[4] @ conv.linear.kernel.numpy() + np.arange(4), rtol=1e-5)


def test_sage_mean_of_neighbours_plus_root():
  conv = layers.SAGEConv(4, seed=1)
  h = _hidden()
  got = conv(_graph(), tf.constant(h)).numpy()
  a = _adjacency()
  mean = (a @ h) / np.maximum(a.sum(1, keepdims=True), 1)
  expected = _dense(conv.neighbours, mean) + h @ conv.root.kernel.numpy()
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
  # Isolated node: empty mean is 0, so only bias + root term.
  np.testing.assert_allclose(got[4], conv.neighbours.bias.numpy() + h[4] @ conv.root.kernel.numpy(), rtol=1e-5)


def test_torch_style_initialisation_bounds():
  dense = layers.TorchDense(64, seed=3)
  dense.build(tf.TensorShape([None, 16]))
  assert np.abs(dense.kernel.numpy()).max() <= 0.25 + 1e-7  # 1 / sqrt(16)
  assert np.abs(dense.bias.numpy()).max() <= 0.25 + 1e-7
  assert np.abs(dense.bias.numpy()).max() > 0.1  # Not zero-initialised.


@pytest.mark.parametrize("cls", [layers.GINConv, layers.GCNConv, layers.SAGEConv])
def test_layers_are_keras_serialisable(cls):
  conv = cls(8, seed=5, name="c")
  h = tf.constant(_hidden())
  out = conv(_graph(), h)
  clone = tf.keras.layers.deserialize(tf.keras.layers.serialize(conv))
  assert type(clone) is cls and clone.get_config() == conv.get_config()
  clone(_graph(), h)
  for a, b in zip(clone.weights, conv.weights):
    a.assign(b)
  np.testing.assert_allclose(clone(_graph(), h), out, rtol=1e-6)


def test_seeded_dropout_state_restores_the_same_masks():
  drop = layers.SeededDropout(0.5, seed=7)
  x = tf.ones([4, 10])
  drop(x, training=True)
  saved = drop.generator.state.numpy()
  first = drop(x, training=True).numpy()
  drop.generator.state.assign(saved)
  np.testing.assert_array_equal(drop(x, training=True).numpy(), first)
  np.testing.assert_array_equal(drop(x, training=False).numpy(), x.numpy())


def test_unknown_backbone():
  with pytest.raises(ValueError, match="unknown backbone 'gat'"):
    layers.make_conv("gat", 4, name="x")


def _tfgnn_neighbour_sum(graph: tfgnn.GraphTensor, hidden: tf.Tensor) -> tf.Tensor:
  messages = tfgnn.broadcast_node_to_edges(graph, "edges", tfgnn.SOURCE, feature_value=hidden)
  return tfgnn.pool_edges_to_node(graph, "edges", tfgnn.TARGET, "sum", feature_value=messages)


@pytest.mark.parametrize("num_edges", [0, 1, 5000])
def test_neighbour_sum_and_gradient_equal_tfgnn_broadcast_pool_bit_for_bit(num_edges):
  # The committed results were trained with TF-GNN's gather + segment-sum; the sparse product must
  # add the same terms in the same order (forward and backward), so that they stay reproducible.
  rng = np.random.default_rng(num_edges)
  n = 300
  src = rng.integers(0, n, num_edges)  # Unsorted, with repeated edges and self-loops.
  dst = rng.integers(0, n, num_edges)
  graph = tfgnn.GraphTensor.from_pieces(
      node_sets={"nodes": tfgnn.NodeSet.from_fields(sizes=tf.constant([n]))},
      edge_sets={"edges": tfgnn.EdgeSet.from_fields(
          sizes=tf.constant([num_edges]),
          adjacency=tfgnn.Adjacency.from_indices(("nodes", tf.constant(src, tf.int32)),
                                                 ("nodes", tf.constant(dst, tf.int32))))})
  hidden = tf.Variable(rng.normal(size=(n, 64)).astype(np.float32))
  weights = tf.constant(rng.normal(size=(n, 64)).astype(np.float32))

  def value_and_gradient(fn):
    with tf.GradientTape() as tape:
      out = fn(graph, hidden)
      loss = tf.reduce_sum(tf.sin(out) * weights)
    return out.numpy(), tf.convert_to_tensor(tape.gradient(loss, hidden)).numpy()

  out, grad = value_and_gradient(layers.neighbour_sum)
  ref_out, ref_grad = value_and_gradient(_tfgnn_neighbour_sum)
  np.testing.assert_array_equal(out, ref_out)
  np.testing.assert_array_equal(grad, ref_grad)
  adjacency = np.zeros((n, n))
  np.add.at(adjacency, (dst, src), 1)
  np.testing.assert_allclose(out, adjacency @ hidden.numpy(), rtol=1e-4, atol=1e-4)
