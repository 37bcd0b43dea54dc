"""The GraphTensor data contract: schema, tf.train.Example encoding, and tf.data readers.

Every graph is one GraphTensor with

* node set `nodes`: `features` float32 [F] (see `features.py`), `rwse` float32 [n_rw],
  `dse` float32 [n_dg] and, when a setting asks for them, `lap` float32 [n_lap] (Laplacian PE) and
  `spd` float32 [n_spd] (shortest-path-distance histogram) (see `structure.py`);
* edge set `edges` from `nodes` to `nodes`, each undirected edge in both directions;
* context: `label` int64 [] (class index 0..C-1).

The schema for a dataset is `graph_schema(...)`; the prepared cache writes it beside each setting
(`<NAME>.schema.pbtxt`, see `cache.py`). Examples are written in TF-GNN's own encoding
(`tfgnn.write_example` keys), built directly from NumPy for speed; `tfgnn.parse_example` reads them
back. TFF cannot carry a GraphTensor across a computation boundary: clients read serialized batches
(`read_serialized_batches`) and parse them inside TF code (`parse_batch`).
"""

from __future__ import annotations

import collections
import pathlib
from typing import Iterable

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from google.protobuf import text_format

NODES = "nodes"
EDGES = "edges"
FEATURES = "features"
RWSE = "rwse"
DSE = "dse"
LAP = "lap"
SPD = "spd"
LABEL = "label"


def graph_schema(feature_dim: int, n_rw: int, n_dg: int, n_lap: int = 0, n_spd: int = 0) -> tfgnn.GraphSchema:
  """The GraphSchema of one dataset's graphs (`lap` / `spd` only when their width is > 0)."""
  schema = tfgnn.GraphSchema()
  schema.context.features[LABEL].dtype = tf.int64.as_datatype_enum
  node_set = schema.node_sets[NODES]
  widths = [(FEATURES, feature_dim), (RWSE, n_rw), (DSE, n_dg)] + [(n, w) for n, w in ((LAP, n_lap), (SPD, n_spd)) if w]
  for name, width in widths:
    feature = node_set.features[name]
    feature.dtype = tf.float32.as_datatype_enum
    feature.shape.dim.add().size = width
  schema.edge_sets[EDGES].source = NODES
  schema.edge_sets[EDGES].target = NODES
  return schema


def schema_to_text(schema: tfgnn.GraphSchema) -> str:
  return text_format.MessageToString(schema)


def graph_spec(schema: tfgnn.GraphSchema) -> tfgnn.GraphTensorSpec:
  return tfgnn.create_graph_spec_from_schema_pb(schema)


def _float_feature(values: np.ndarray) -> tf.train.Feature:
  return tf.train.Feature(float_list=tf.train.FloatList(value=values.ravel()))


def _int_feature(values: np.ndarray) -> tf.train.Feature:
  return tf.train.Feature(int64_list=tf.train.Int64List(value=np.asarray(values).ravel()))


def encode_graph(*, features: np.ndarray, rwse: np.ndarray, dse: np.ndarray, edges: np.ndarray,
                 label: int, lap: np.ndarray | None = None, spd: np.ndarray | None = None) -> bytes:
  """Serialized tf.train.Example of one graph (same keys as `tfgnn.write_example`).

  Args:
    features, rwse, dse: [n, .] node arrays of the graph.
    edges: [e, 2] local undirected edges (u < v); both directions are written.
    label: class index.
  """
  source = np.concatenate([edges[:, 0], edges[:, 1]])
  target = np.concatenate([edges[:, 1], edges[:, 0]])
  feature = {
      f"nodes/{NODES}.#size": _int_feature([len(features)]),
      f"nodes/{NODES}.{FEATURES}": _float_feature(features),
      f"nodes/{NODES}.{RWSE}": _float_feature(rwse),
      f"nodes/{NODES}.{DSE}": _float_feature(dse),
      f"edges/{EDGES}.#size": _int_feature([len(source)]),
      f"edges/{EDGES}.#source": _int_feature(source),
      f"edges/{EDGES}.#target": _int_feature(target),
      f"context/{LABEL}": _int_feature([label]),
  }
  for name, values in ((LAP, lap), (SPD, spd)):
    if values is not None:
      feature[f"nodes/{NODES}.{name}"] = _float_feature(values)
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_tfrecord(path: str | pathlib.Path, examples: Iterable[bytes]) -> int:
  """Writes serialized examples (an uncompressed TFRecord file); returns the count."""
  count = 0
  with tf.io.TFRecordWriter(str(path)) as writer:
    for example in examples:
      writer.write(example)
      count += 1
  return count


def from_flat(flat: dict[str, tf.Tensor]) -> tfgnn.GraphTensor:
  """A merged GraphTensor (components = graphs) from its dense pieces."""
  node_features = {FEATURES: flat["features"], RWSE: flat["rwse"], DSE: flat["dse"]}
  node_features.update({name: flat[name] for name in (LAP, SPD) if name in flat})
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(
          sizes=tf.ones_like(flat["node_sizes"]), features={LABEL: flat["label"]}),
      node_sets={NODES: tfgnn.NodeSet.from_fields(
          sizes=flat["node_sizes"], features=node_features)},
      edge_sets={EDGES: tfgnn.EdgeSet.from_fields(
          sizes=flat["edge_sizes"],
          adjacency=tfgnn.Adjacency.from_indices((NODES, flat["source"]), (NODES, flat["target"])))})


def parse_batch(serialized: tf.Tensor, *, feature_dim: tf.Tensor | int, padded_feature_dim: int,
                n_rw: int, n_dg: int, require_label: bool = True, n_lap: int = 0,
                n_spd: int = 0) -> tfgnn.GraphTensor:
  """Parses a batch of serialized graphs straight into one merged GraphTensor (components = graphs).

  Unlike `tfgnn.parse_example`, the node-feature width may be a tensor: features of width
  `feature_dim` are zero-padded to `padded_feature_dim`. This lets clients of one setting, whose
  datasets have different feature widths, run one TFF computation with one model type (a Linear layer
  on zero-padded inputs computes exactly what it computes on the unpadded ones).

  `require_label=False` (scoring): a graph without `context/label` gets label -1. `n_lap` / `n_spd`
  > 0 read the optional `lap` / `spd` node features.
  """
  extra = [(name, w) for name, w in ((LAP, n_lap), (SPD, n_spd)) if w]
  p = tf.io.parse_example(serialized, {
      **{f"nodes/{NODES}.{name}": tf.io.RaggedFeature(tf.float32) for name, _ in extra},
      f"nodes/{NODES}.#size": tf.io.FixedLenFeature([1], tf.int64),
      f"edges/{EDGES}.#size": tf.io.FixedLenFeature([1], tf.int64),
      f"context/{LABEL}": (tf.io.FixedLenFeature([1], tf.int64) if require_label
                           else tf.io.FixedLenFeature([1], tf.int64, default_value=[-1])),
      f"nodes/{NODES}.{FEATURES}": tf.io.RaggedFeature(tf.float32),
      f"nodes/{NODES}.{RWSE}": tf.io.RaggedFeature(tf.float32),
      f"nodes/{NODES}.{DSE}": tf.io.RaggedFeature(tf.float32),
      f"edges/{EDGES}.#source": tf.io.RaggedFeature(tf.int64),
      f"edges/{EDGES}.#target": tf.io.RaggedFeature(tf.int64),
  })
  node_sizes = p[f"nodes/{NODES}.#size"][:, 0]
  edge_sizes = p[f"edges/{EDGES}.#size"][:, 0]
  offsets = tf.repeat(tf.cumsum(node_sizes, exclusive=True), edge_sizes)
  source = p[f"edges/{EDGES}.#source"].flat_values + offsets
  target = p[f"edges/{EDGES}.#target"].flat_values + offsets
  feature_dim = tf.cast(feature_dim, tf.int64)
  features = tf.reshape(p[f"nodes/{NODES}.{FEATURES}"].flat_values, tf.stack([-1, feature_dim]))
  features = tf.pad(features, [[0, 0], [0, padded_feature_dim - feature_dim]])
  features = tf.ensure_shape(features, [None, padded_feature_dim])
  flat = collections.OrderedDict(
      node_sizes=node_sizes, edge_sizes=edge_sizes, source=source, target=target, features=features,
      rwse=tf.reshape(p[f"nodes/{NODES}.{RWSE}"].flat_values, [-1, n_rw]),
      dse=tf.reshape(p[f"nodes/{NODES}.{DSE}"].flat_values, [-1, n_dg]),
      label=p[f"context/{LABEL}"][:, 0])
  for name, width in extra:
    flat[name] = tf.reshape(p[f"nodes/{NODES}.{name}"].flat_values, [-1, width])
  return from_flat(flat)


def valid_examples(serialized: tf.Tensor, *, feature_dim: tf.Tensor | int, n_rw: int, n_dg: int, n_lap: int = 0,
                   n_spd: int = 0) -> tf.Tensor:
  """bool [batch]: which serialized graphs parse and are consistent (feature, embedding and edge
  lengths fit the node count; edge endpoints are nodes). Never raises on bad bytes: each example is
  checked on its own, so one bad example does not hide the validity of the others."""
  feature_dim = tf.cast(feature_dim, tf.int64)

  def check(index, example):
    p = tf.io.parse_single_example(example, {
        f"nodes/{NODES}.#size": tf.io.FixedLenFeature([1], tf.int64),
        f"edges/{EDGES}.#size": tf.io.FixedLenFeature([1], tf.int64),
        f"nodes/{NODES}.{FEATURES}": tf.io.VarLenFeature(tf.float32),
        f"nodes/{NODES}.{RWSE}": tf.io.VarLenFeature(tf.float32),
        f"nodes/{NODES}.{DSE}": tf.io.VarLenFeature(tf.float32),
        f"edges/{EDGES}.#source": tf.io.VarLenFeature(tf.int64),
        f"edges/{EDGES}.#target": tf.io.VarLenFeature(tf.int64),
        **{f"nodes/{NODES}.{name}": tf.io.VarLenFeature(tf.float32) for name, w in ((LAP, n_lap), (SPD, n_spd)) if w},
    })
    n, e = p[f"nodes/{NODES}.#size"][0], p[f"edges/{EDGES}.#size"][0]
    count = lambda key: tf.size(p[key].values, out_type=tf.int64)
    source, target = p[f"edges/{EDGES}.#source"].values, p[f"edges/{EDGES}.#target"].values
    ends = tf.concat([source, target, tf.zeros([1], tf.int64)], 0)
    ok = tf.reduce_all(tf.stack([
        n >= 1, count(f"nodes/{NODES}.{FEATURES}") == n * feature_dim,
        count(f"nodes/{NODES}.{RWSE}") == n * n_rw, count(f"nodes/{NODES}.{DSE}") == n * n_dg,
        count(f"edges/{EDGES}.#source") == e, count(f"edges/{EDGES}.#target") == e,
        tf.reduce_min(ends) >= 0, tf.reduce_max(ends) < tf.maximum(n, 1)]
        + [count(f"nodes/{NODES}.{name}") == n * w for name, w in ((LAP, n_lap), (SPD, n_spd)) if w]))
    with tf.control_dependencies([tf.debugging.Assert(ok, ["inconsistent graph"])]):
      return tf.identity(index)

  ds = tf.data.Dataset.from_tensor_slices(serialized).enumerate().map(check)
  ds = ds.ignore_errors()
  good = ds.reduce(tf.zeros([0], tf.int64), lambda acc, i: tf.concat([acc, [i]], 0))
  size = tf.shape(serialized, out_type=tf.int64)[0]
  return tf.scatter_nd(good[:, None], tf.ones_like(good, tf.bool), [size])


def read_serialized_batches(path: str | tf.Tensor, *, batch_size: int,
                            shuffle_seed: tf.Tensor | int | None = None,
                            shuffle_buffer: int = 10_000) -> tf.data.Dataset:
  """Batches of serialized graphs (string vectors) from one TFRecord file; parse with `parse_batch`.

  Built to be cheap to create, because a client creates its pipelines anew in every call (every
  round). Creating an iterator makes tf.data rewrite the pipeline's graph, autotune it, and
  instantiate (and Grappler-optimise) every user function in it, such as a parsing `map`: tens of ms
  per pipeline, more than reading a client's few batches. So the pipeline has no user function (the
  caller parses each batch in its own loop body, see `read_batches`) and no rewrites or autotuning.
  """
  ds = tf.data.TFRecordDataset(path)
  if shuffle_seed is not None:
    ds = ds.shuffle(shuffle_buffer, seed=shuffle_seed)
  options = tf.data.Options()
  options.experimental_optimization.apply_default_optimizations = False
  options.autotune.enabled = False
  options.experimental_optimization.inject_prefetch = False
  return ds.batch(batch_size).with_options(options)
