r"""Graph convolutions on TF-GNN graphs, matching PyTorch Geometric's GINConv, GCNConv, SAGEConv.

Every convolution is called as `conv(graph, hidden, training=...)`: `graph` is a scalar GraphTensor
(a merged batch) whose edge set `edges` holds each undirected edge in both directions, and `hidden` is
the [num_nodes, d] node state. Messages travel from `SOURCE` to `TARGET`, so $\mathcal{N}(i)$ below is
the set of neighbours of i. Dense layers are initialised as PyTorch's `nn.Linear` (weights and bias
$U(\pm 1/\sqrt{fan\_in})$), so that training starts from the same distribution as the papers' code.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_gnn as tfgnn

EDGES = "edges"
NODES = "nodes"


@tf.keras.utils.register_keras_serializable(package="tff_graph")
class TorchDense(tf.keras.layers.Dense):
  """`Dense` initialised like `torch.nn.Linear`: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""


  def __init__(self, units: int, *, seed: int | None = None, fan_in: int | None = None, **kwargs: Any):
    super().__init__(units, **kwargs)
    self.seed = seed
    self.fan_in = fan_in

  def build(self, input_shape: tf.TensorShape) -> None:
    # `fan_in` overrides the input width for initialisation only: a layer reading zero-padded inputs
    # then starts from the distribution of the unpadded layer.
    fan_in = self.fan_in or int(tf.TensorShape(input_shape)[-1])
    self.kernel_initializer = tf.keras.initializers.RandomUniform(
        -1.0 / fan_in ** 0.5, 1.0 / fan_in ** 0.5, seed=self.seed)
    limit = 1.0 / fan_in ** 0.5
    self.bias_initializer = tf.keras.initializers.RandomUniform(
        -limit, limit, seed=None if self.seed is None else self.seed + 1)
    super().build(input_shape)

  def get_config(self) -> dict[str, Any]:
    config = super().get_config()
    config.pop("kernel_initializer", None)
    config.pop("bias_initializer", None)
    return {**config, "seed": self.seed, "fan_in": self.fan_in}


@tf.keras.utils.register_keras_serializable(package="tff_graph")
class SeededSignFlips(tf.keras.layers.Layer):
  """Random +-1 signs of shape [rows, width] from a `tf.random.Generator` held as a layer variable (so,
  as `SeededDropout`'s, the stream is model state: checkpointed, restored, exact on resume)."""

  def __init__(self, width: int, *, seed: int = 0, **kwargs: Any):
    super().__init__(**kwargs)
    self.width = width
    self.seed = seed
    self.generator = tf.random.Generator.from_seed(seed)

  def call(self, rows: tf.Tensor) -> tf.Tensor:
    bits = self.generator.uniform(tf.stack([rows, self.width]), maxval=2, dtype=tf.int32)
    return tf.cast(2 * bits - 1, tf.float32)

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "width": self.width, "seed": self.seed}


@tf.keras.utils.register_keras_serializable(package="tff_graph")
class SeededDropout(tf.keras.layers.Layer):
  """Dropout driven by a `tf.random.Generator` whose state is a (non-trainable) variable of the layer.

  The random stream is therefore part of the model's state: saving and restoring the model's
  variables restores the exact dropout masks that follow (needed for exact resume after a crash).
  """

  def __init__(self, rate: float, *, seed: int = 0, **kwargs: Any):
    super().__init__(**kwargs)
    self.rate = rate
    self.seed = seed
    self.generator = tf.random.Generator.from_seed(seed)

  def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    if not training or self.rate == 0.0:
      return x
    return tf.nn.experimental.stateless_dropout(
        x, rate=self.rate, seed=self.generator.make_seeds(1)[:, 0])

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "rate": self.rate, "seed": self.seed}


def neighbour_sum(graph: tfgnn.GraphTensor, hidden: tf.Tensor) -> tf.Tensor:
  r"""$\sum_{j \in \mathcal{N}(i)} h_j$ for every node i, as a sparse adjacency times `hidden`.

  Equal, bit for bit and gradient included, to TF-GNN's broadcast-to-edges then sum-pool (gather +
  unsorted segment sum: both add each node's messages in edge order), but 3x faster on large graphs
  on CPU: the [num_edges, d] message tensor and its gradient are never materialised
  (`benchmarks.models`; COLLAB's 210k edges per batch).
  """
  adjacency = graph.edge_sets[EDGES].adjacency
  num_nodes = tf.shape(hidden, out_type=tf.int64)[0]
  indices = tf.stack([tf.cast(adjacency.target, tf.int64), tf.cast(adjacency.source, tf.int64)], axis=1)
  matrix = tf.sparse.SparseTensor(indices, tf.ones(tf.shape(indices)[:1], hidden.dtype),
                                  tf.stack([num_nodes, num_nodes]))
  return tf.sparse.sparse_dense_matmul(matrix, hidden)


def _in_degree(graph: tfgnn.GraphTensor, dtype: tf.DType) -> tf.Tensor:
  ones = tf.ones_like(graph.edge_sets[EDGES].adjacency.source, dtype=dtype)
  return tfgnn.pool_edges_to_node(graph, EDGES, tfgnn.TARGET, "sum", feature_value=ones)


@tf.keras.utils.register_keras_serializable(package="tff_graph")
class GINConv(tf.keras.layers.Layer):
  r"""Graph Isomorphism Network convolution (Xu et al., ICLR 2019).

  $$h_i' = \mathrm{MLP}\Big((1+\epsilon)\, h_i + \sum_{j \in \mathcal{N}(i)} h_j\Big),\qquad
  \mathrm{MLP}(z) = W_2\, \mathrm{ReLU}(W_1 z + b_1) + b_2$$

  with $\epsilon = 0$ (not trained), as in the GCFL and FedStar code.

  Init arguments:
    units: output width (and the MLP's hidden width unless `hidden_units` is given).
    hidden_units: width of the MLP's hidden layer.
    epsilon: the fixed self weight $\epsilon$.
  """

  def __init__(self, units: int, *, hidden_units: int | None = None, epsilon: float = 0.0,
               seed: int | None = None, **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self.hidden_units = hidden_units or units
    self.epsilon = epsilon
    self.seed = seed
    self.mlp_in = TorchDense(self.hidden_units, activation="relu", name="mlp_in", seed=seed)
    self.mlp_out = TorchDense(units, name="mlp_out", seed=None if seed is None else seed + 2)

  def call(self, graph: tfgnn.GraphTensor, hidden: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    del training
    z = (1.0 + self.epsilon) * hidden + neighbour_sum(graph, hidden)
    return self.mlp_out(self.mlp_in(z))

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "units": self.units, "hidden_units": self.hidden_units,
            "epsilon": self.epsilon, "seed": self.seed}


@tf.keras.utils.register_keras_serializable(package="tff_graph")
class GCNConv(tf.keras.layers.Layer):
  r"""Graph convolution of Kipf & Welling (ICLR 2017), with self-loops and symmetric normalisation.

  $$h_i' = \sum_{j \in \mathcal{N}(i) \cup \{i\}} \frac{1}{\sqrt{\hat d_i \hat d_j}}\, W h_j + b,
  \qquad \hat d_i = 1 + |\mathcal{N}(i)|$$

  An isolated node keeps its own term: $h_i' = W h_i + b$. As in PyG, W is Glorot-initialised and b
  starts at zero.

  Init arguments:
    units: output width.
  """

  def __init__(self, units: int, *, seed: int | None = None, **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self.seed = seed
    self.linear = tf.keras.layers.Dense(
        units, use_bias=False, name="linear",
        kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed))

  def build(self, input_shape: Any) -> None:
    self.bias = self.add_weight(name="bias", shape=[self.units], initializer="zeros")
    super().build(input_shape)

  def call(self, graph: tfgnn.GraphTensor, hidden: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    del training
    if not self.built:
      self.build(hidden.shape)
    h = self.linear(hidden)
    scale = tf.math.rsqrt(_in_degree(graph, h.dtype) + 1.0)[:, None]
    return scale * (neighbour_sum(graph, scale * h) + scale * h) + self.bias

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "units": self.units, "seed": self.seed}


@tf.keras.utils.register_keras_serializable(package="tff_graph")
class SAGEConv(tf.keras.layers.Layer):
  r"""GraphSAGE convolution with mean aggregation (Hamilton et al., NeurIPS 2017), as PyG's SAGEConv.

  $$h_i' = W_1 \frac{1}{|\mathcal{N}(i)|}\sum_{j \in \mathcal{N}(i)} h_j + b + W_2 h_i$$

  The mean over an empty neighbourhood is 0.

  Init arguments:
    units: output width.
  """

  def __init__(self, units: int, *, seed: int | None = None, **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self.seed = seed
    self.neighbours = TorchDense(units, name="neighbours", seed=seed)
    self.root = TorchDense(units, use_bias=False, name="root",
                           seed=None if seed is None else seed + 2)

  def call(self, graph: tfgnn.GraphTensor, hidden: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    del training
    mean = neighbour_sum(graph, hidden) / tf.maximum(_in_degree(graph, hidden.dtype), 1.0)[:, None]
    return self.neighbours(mean) + self.root(hidden)

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "units": self.units, "seed": self.seed}


@tf.keras.utils.register_keras_serializable(package="tff_graph")
class TFGNNConvolution(tf.keras.layers.Layer):
  """A TF-GNN convolution (called as `conv(graph, edge_set_name=...)` on the node set's
  `hidden_state`) used as a tff-graph convolution `conv(graph, hidden)`.

  `make_layer()` builds the wrapped layer, e.g.
  `lambda: tensorflow_gnn.models.gcn.GCNConv(64, add_self_loops=True)` or
  `lambda: tensorflow_gnn.models.gat_v2.GATv2Conv(num_heads=4, per_head_channels=16)`.
  """

  def __init__(self, make_layer, **kwargs):
    super().__init__(**kwargs)
    self.inner = make_layer()

  def call(self, graph: tfgnn.GraphTensor, hidden: tf.Tensor, training: bool | None = None) -> tf.Tensor:
    graph = graph.replace_features(node_sets={NODES: {tfgnn.HIDDEN_STATE: hidden}})
    return self.inner(graph, edge_set_name=EDGES, training=training)


def tfgnn_convolution(make_layer):
  """A convolution factory `(units, name, seed) -> layer` from a TF-GNN layer factory `make_layer(units)`.

  Register it to use it as a backbone, e.g.
  `register_convolution("gat_v2", tfgnn_convolution(lambda units: gat_v2.GATv2Conv(
      num_heads=2, per_head_channels=units // 2)))` then `ModelSpec(backbone="gat_v2")`. Its
  initialisation follows TF-GNN's (the seed is not used).
  """
  def factory(units: int, *, name: str, seed: int | None = None) -> tf.keras.layers.Layer:
    del seed
    return TFGNNConvolution(lambda: make_layer(units), name=name)
  return factory


CONVOLUTIONS = {"gin": GINConv, "gcn": GCNConv, "sage": SAGEConv}


def register_convolution(name: str, factory, *, replace: bool = False) -> None:
  """Makes `factory(units, *, name, seed)` -> a convolution `conv(graph, hidden)` known as backbone `name`."""
  if name in CONVOLUTIONS and not replace:
    raise ValueError(f"a convolution named {name!r} is already registered (pass replace=True)")
  if not callable(factory):
    raise TypeError(f"the factory of convolution {name!r} must be callable")
  CONVOLUTIONS[name] = factory


def make_conv(kind: str, units: int, *, name: str, seed: int | None = None) -> tf.keras.layers.Layer:
  """A convolution by backbone name (`gin`, `gcn`, `sage`, or a registered one)."""
  if kind not in CONVOLUTIONS:
    raise ValueError(f"unknown backbone {kind!r}; choose one of {', '.join(CONVOLUTIONS)}")
  return CONVOLUTIONS[kind](units, name=name, seed=seed)
