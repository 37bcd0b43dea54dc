"""The two model families of the papers, as Keras models that declare their own partition.

* `GINClassifier` (GCFL, Xie et al., NeurIPS 2021; the baselines):
  Linear(n_feat->h) -> L x [conv, ReLU, dropout] -> sum pooling -> Linear(h->h)+ReLU -> dropout ->
  Linear(h->n_class). Backbone `gin` (default), `gcn` or `sage`.
* `DecoupledClassifier` (FedStar, Tan et al., AAAI 2023): a structure channel
  s = Linear(n_se->h)(SE), then L x [s = tanh(conv_s(s))] (GCN by default), and a feature channel
  x = Linear(n_feat->h)(X), then L x [x = dropout(ReLU(conv_x([x, s])))] (GIN by default, input 2h),
  fused by Linear(2h->h)([x, s]), then the same pooling / post / dropout / head.

Both return logits [num_graphs, n_class] for a merged GraphTensor batch.

**Partition.** `model.parts()` maps part names to the layers that form them, e.g. for the decoupled
model `structure_encoder`, `feature_input`, `feature_encoder`, `fusion`, `post`, `head`. Algorithms
choose what to share by naming parts; variables are derived from those layer objects, never from
variable names. `check_partition()` asserts that the parts are disjoint and cover every trainable
variable.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Iterable

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from data_prep import graph_tensor as gt
from data_prep import structure
from tff_graph.models import layers

GIN_MODEL = "gin"
DECOUPLED_MODEL = "decoupled"


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """Everything needed to build one client's model.

  Attributes:
    kind: `gin` (GINClassifier) or `decoupled` (DecoupledClassifier).
    feature_dim: width of the node features.
    num_classes: number of graph classes.
    hidden: hidden width h (64 in both papers).
    num_layers: number of convolutions L (3).
    dropout: dropout rate (0.5).
    backbone: convolution of the GIN model / of the decoupled model's feature channel.
    structure_backbone: convolution of the decoupled model's structure channel (`gcn`).
    embedding_type: structure embedding read by the decoupled model: rw, dg, rw_dg, ones, lap, spd,
      rw_dg_lap or rw_dg_spd (`structure.EmbeddingType`).
    n_rw, n_dg: widths of the stored RWSE and DSE.
    n_lap, n_spd: widths of the stored Laplacian PE and SPD histogram (needed by the embeddings using them).
    feature_fan_in: true feature width when `feature_dim` is a padded width (initialisation only).
  """

  kind: str
  feature_dim: int
  num_classes: int
  hidden: int = 64
  num_layers: int = 3
  dropout: float = 0.5
  backbone: str = "gin"
  structure_backbone: str = "gcn"
  embedding_type: str = "rw_dg"
  n_rw: int = structure.N_RW
  n_dg: int = structure.N_DG
  feature_fan_in: int | None = None
  n_lap: int = 0
  n_spd: int = 0

  def __post_init__(self):
    if self.kind not in (GIN_MODEL, DECOUPLED_MODEL):
      raise ValueError(f"unknown model kind {self.kind!r}; choose {GIN_MODEL!r} or {DECOUPLED_MODEL!r}")
    for b in (self.backbone, self.structure_backbone):
      if b not in layers.CONVOLUTIONS:
        raise ValueError(f"unknown backbone {b!r}; choose one of {', '.join(layers.CONVOLUTIONS)}")
    kind = structure.EmbeddingType(self.embedding_type)
    for part, width in (("lap", self.n_lap), ("spd", self.n_spd)):
      if part in kind.parts and width < 1:
        raise ValueError(f"embedding_type {self.embedding_type!r} needs n_{part} >= 1, got {width}")
    if self.feature_dim < 1 or self.num_classes < 2 or self.num_layers < 1 or self.hidden < 1:
      raise ValueError(f"invalid model sizes in {self}")
    if not 0.0 <= self.dropout < 1.0:
      raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

  @property
  def structure_dim(self) -> int:
    return structure.embedding_width(self.embedding_type, self.n_rw, self.n_dg, self.n_lap, self.n_spd)


class PartitionError(ValueError):
  """The declared parts of a model overlap, miss a variable, or name an unknown part."""


def model_parts(model: tf.keras.Model) -> "collections.OrderedDict[str, tuple[tf.keras.layers.Layer, ...]]":
  """The parts a model declares: its `parts()` method, name -> layers (see module docstring)."""
  parts = getattr(model, "parts", None)
  if not callable(parts):
    raise PartitionError(f"{type(model).__name__} declares no parts: give it a `parts()` method returning "
                         "an OrderedDict of part name -> layers (see tff_graph.models.PartitionedModel)")
  return collections.OrderedDict(parts())


def part_variables(model: tf.keras.Model, names: Iterable[str]) -> list[tf.Variable]:
  """Trainable variables of the named parts of `model`, in declaration order."""
  parts = model_parts(model)
  names = list(names)
  unknown = [n for n in names if n not in parts]
  if unknown:
    raise PartitionError(f"{type(model).__name__} has no part(s) {unknown}; parts: {list(parts)}")
  return [v for n in parts if n in names for layer in parts[n] for v in layer.trainable_variables]


def check_partition(model: tf.keras.Model) -> None:
  """Raises PartitionError unless every trainable variable of `model` is in exactly one part."""
  seen: dict[int, str] = {}
  for name in model_parts(model):
    for v in part_variables(model, [name]):
      if id(v) in seen:
        raise PartitionError(f"variable {v.name} is in parts {seen[id(v)]!r} and {name!r}")
      seen[id(v)] = name
  missing = [v.name for v in model.trainable_variables if id(v) not in seen]
  if missing:
    raise PartitionError(f"variables in no part: {missing}")


def random_states(model: tf.keras.Model) -> list[tf.Variable]:
  """The generator states of the model's `SeededDropout` and `SeededSignFlips` layers (part of a
  client's private state).

  Restoring them restores the exact dropout masks (and Laplacian-PE sign flips) that follow. A model without such layers has none
  (its randomness, e.g. Keras' own Dropout, is then not part of the state and not resumed exactly).
  """
  return [m.generator.state for m in model.submodules
          if isinstance(m, (layers.SeededDropout, layers.SeededSignFlips))]


def parameter_counts(model: tf.keras.Model) -> "collections.OrderedDict[str, int]":
  """Number of trainable parameters per part, plus `total`."""
  counts = collections.OrderedDict(
      (n, int(sum(np.prod(v.shape) for v in part_variables(model, [n])))) for n in model_parts(model))
  counts["total"] = sum(counts.values())
  return counts


class PartitionedModel(tf.keras.Model):
  """A Keras model that declares its parts (see module docstring).

  Any `tf.keras.Model` with a `parts()` method works with the federated processes; this base class
  adds the helpers below and Keras serialisation of a `ModelSpec`.
  """

  spec: ModelSpec

  def parts(self) -> "collections.OrderedDict[str, tuple[tf.keras.layers.Layer, ...]]":
    raise NotImplementedError

  @property
  def part_names(self) -> tuple[str, ...]:
    return tuple(self.parts())

  def part_variables(self, names: Iterable[str]) -> list[tf.Variable]:
    return part_variables(self, names)

  def check_partition(self) -> None:
    check_partition(self)

  def parameter_counts(self) -> "collections.OrderedDict[str, int]":
    return parameter_counts(self)

  def get_config(self) -> dict[str, Any]:
    return {**super().get_config(), "spec": dataclasses.asdict(self.spec), "seed": self.seed}

  @classmethod
  def from_config(cls, config: dict[str, Any]) -> "PartitionedModel":
    return cls(ModelSpec(**config.pop("spec")), **config)


def _layer_seeds(seed: int) -> Iterable[int]:
  """Distinct initializer seeds per layer (each layer uses seed, seed+1, seed+2 internally)."""
  i = 0
  while True:
    yield seed * 1000 + 10 * i
    i += 1


def _pool_sum(graph: tfgnn.GraphTensor, hidden: tf.Tensor) -> tf.Tensor:
  return tfgnn.pool_nodes_to_context(graph, gt.NODES, "sum", feature_value=hidden)


@tf.keras.utils.register_keras_serializable(package="tff_graph")
class GINClassifier(PartitionedModel):
  """GCFL's GIN (see module docstring). Parts: `input`, `gnn`, `post`, `head`."""

  def __init__(self, spec: ModelSpec, *, seed: int = 0, **kwargs: Any):
    super().__init__(**kwargs)
    self.spec = spec
    self.seed = seed
    seeds = _layer_seeds(seed)
    self.pre = layers.TorchDense(spec.hidden, name="pre", seed=next(seeds), fan_in=spec.feature_fan_in)
    self.convs = [layers.make_conv(spec.backbone, spec.hidden, name=f"conv_{i}", seed=next(seeds))
                  for i in range(spec.num_layers)]
    self.post = layers.TorchDense(spec.hidden, activation="relu", name="post", seed=next(seeds))
    self.readout = layers.TorchDense(spec.num_classes, name="readout", seed=next(seeds))
    self.dropout = layers.SeededDropout(spec.dropout, seed=next(seeds), name="dropout")

  def parts(self):
    return collections.OrderedDict(
        input=(self.pre,), gnn=tuple(self.convs), post=(self.post,), head=(self.readout,))

  def call(self, graph: tfgnn.GraphTensor, training: bool | None = None) -> tf.Tensor:
    x = self.pre(graph.node_sets[gt.NODES][gt.FEATURES])
    for conv in self.convs:
      x = self.dropout(tf.nn.relu(conv(graph, x)), training=training)
    x = self.post(_pool_sum(graph, x))
    return self.readout(self.dropout(x, training=training))


def structure_input(graph: tfgnn.GraphTensor, embedding_type: str, lap_signs: tf.Tensor | None = None) -> tf.Tensor:
  """The structure embedding of type `embedding_type` from the stored node features (RWSE, DSE, and the
  Laplacian PE / SPD histogram when stored); `lap_signs` [graphs, n_lap] flips the PE's signs per graph."""
  nodes = graph.node_sets[gt.NODES]
  kind = structure.EmbeddingType(embedding_type)
  stored = {"rw": gt.RWSE, "dg": gt.DSE, "lap": gt.LAP, "spd": gt.SPD}
  pieces = []
  for part in kind.parts:
    x = nodes[stored[part]]
    if part == "lap" and lap_signs is not None:
      x = x * tf.repeat(lap_signs, nodes.sizes, axis=0)
    pieces.append(x)
  joined = pieces[0] if len(pieces) == 1 else tf.concat(pieces, axis=-1)
  return tf.ones_like(joined) if kind is structure.EmbeddingType.ONES else joined


@tf.keras.utils.register_keras_serializable(package="tff_graph")
class DecoupledClassifier(PartitionedModel):
  """FedStar's feature-structure decoupled GNN (see module docstring).

  Parts: `structure_encoder` (structure projection + structure convolutions), `feature_input`,
  `feature_encoder`, `fusion`, `post`, `head`.
  """

  def __init__(self, spec: ModelSpec, *, seed: int = 0, **kwargs: Any):
    super().__init__(**kwargs)
    self.spec = spec
    self.seed = seed
    seeds = _layer_seeds(seed)
    self.structure_projection = layers.TorchDense(spec.hidden, name="structure_projection",
                                                  seed=next(seeds))
    self.structure_convs = [
        layers.make_conv(spec.structure_backbone, spec.hidden, name=f"structure_conv_{i}", seed=next(seeds))
        for i in range(spec.num_layers)]
    self.pre = layers.TorchDense(spec.hidden, name="pre", seed=next(seeds), fan_in=spec.feature_fan_in)
    self.feature_convs = [
        layers.make_conv(spec.backbone, spec.hidden, name=f"feature_conv_{i}", seed=next(seeds))
        for i in range(spec.num_layers)]
    self.fuse = layers.TorchDense(spec.hidden, name="fuse", seed=next(seeds))
    self.post = layers.TorchDense(spec.hidden, activation="relu", name="post", seed=next(seeds))
    self.readout = layers.TorchDense(spec.num_classes, name="readout", seed=next(seeds))
    self.dropout = layers.SeededDropout(spec.dropout, seed=next(seeds), name="dropout")
    # Laplacian PE: eigenvector signs are arbitrary, so training sees a random sign per graph and
    # eigenvector (Dwivedi et al.); the stream is model state, like dropout's (exact resume).
    self.sign_flips = (layers.SeededSignFlips(spec.n_lap, seed=next(seeds), name="lap_sign_flips")
                       if "lap" in structure.EmbeddingType(spec.embedding_type).parts else None)

  def _lap_signs(self, graph: tfgnn.GraphTensor, training: bool | None) -> tf.Tensor | None:
    if not training or self.sign_flips is None:
      return None
    return self.sign_flips(tf.shape(graph.node_sets[gt.NODES].sizes)[0])

  def parts(self):
    return collections.OrderedDict(
        structure_encoder=(self.structure_projection, *self.structure_convs),
        feature_input=(self.pre,), feature_encoder=tuple(self.feature_convs), fusion=(self.fuse,),
        post=(self.post,), head=(self.readout,))

  def call(self, graph: tfgnn.GraphTensor, training: bool | None = None) -> tf.Tensor:
    x = self.pre(graph.node_sets[gt.NODES][gt.FEATURES])
    s = self.structure_projection(structure_input(graph, self.spec.embedding_type, self._lap_signs(graph, training)))
    for conv_x, conv_s in zip(self.feature_convs, self.structure_convs):
      x = self.dropout(tf.nn.relu(conv_x(graph, tf.concat([x, s], axis=-1))), training=training)
      s = tf.math.tanh(conv_s(graph, s))
    x = self.fuse(tf.concat([x, s], axis=-1))
    x = self.post(_pool_sum(graph, x))
    return self.readout(self.dropout(x, training=training))


def example_graph(spec: ModelSpec) -> tfgnn.GraphTensor:
  """A 3-node path with every feature present: builds a model's variables before training."""
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(features={gt.LABEL: tf.zeros([1], tf.int64)}),
      node_sets={gt.NODES: tfgnn.NodeSet.from_fields(sizes=tf.constant([3]), features={
          gt.FEATURES: tf.zeros([3, spec.feature_dim]), gt.RWSE: tf.zeros([3, spec.n_rw]),
          gt.DSE: tf.zeros([3, spec.n_dg]),
          **{name: tf.zeros([3, w]) for name, w in ((gt.LAP, spec.n_lap), (gt.SPD, spec.n_spd)) if w}})},
      edge_sets={gt.EDGES: tfgnn.EdgeSet.from_fields(
          sizes=tf.constant([4]), adjacency=tfgnn.Adjacency.from_indices(
              (gt.NODES, tf.constant([0, 1, 1, 2])), (gt.NODES, tf.constant([1, 0, 2, 1]))))})


def build_model(spec: ModelSpec, *, seed: int = 0) -> PartitionedModel:
  """Builds (creates the variables of) the model described by `spec`.

  Initial weights and the dropout stream are a deterministic function of (spec, seed); no global RNG
  is touched.
  """
  cls = GINClassifier if spec.kind == GIN_MODEL else DecoupledClassifier
  model = cls(spec, seed=seed)
  model(example_graph(spec), training=False)
  return model



def model_fn_for(spec: ModelSpec) -> "Callable[[int, Any], PartitionedModel]":
  """`model_fn(seed, client)` for `tff_graph.federated.process`: the model of `spec` from `seed`.

  When a client's own model is built (`client` given), its input layer is initialised for the
  client's true feature width (`client.feature_dim`) although it reads the padded width.
  """
  def model_fn(seed: int, client: Any = None) -> PartitionedModel:
    fan_in = None if client is None else int(client.feature_dim)
    return build_model(dataclasses.replace(spec, feature_fan_in=fan_in), seed=seed)
  return model_fn
