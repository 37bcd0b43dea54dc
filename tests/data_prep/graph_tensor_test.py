"""GraphTensor contract: schema files, Example encoding equal to TF-GNN's, exact round trips."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from data_prep import graph_tensor as gt
from data_prep import partition


def _graph_arrays(seed: int = 0, n: int = 5):
  rng = np.random.default_rng(seed)
  return dict(features=rng.random((n, 3), dtype=np.float32), rwse=rng.random((n, 4), dtype=np.float32),
              dse=np.eye(n, 2, dtype=np.float32), edges=np.array([[0, 1], [1, 2], [3, 4]]), label=1)


def _spec():
  return gt.graph_spec(gt.graph_schema(3, 4, 2))


def _read(path, spec=None):
  spec = spec or _spec()
  return tf.data.TFRecordDataset(str(path)).map(lambda s: tfgnn.parse_single_example(spec, s))


def test_encoding_equals_tfgnn_write_example():
  a = _graph_arrays()
  ours = tfgnn.parse_single_example(_spec(), tf.constant(gt.encode_graph(**a)))
  theirs = tfgnn.write_example(ours).SerializeToString()
  again = tfgnn.parse_single_example(_spec(), tf.constant(theirs))
  for name in (gt.FEATURES, gt.RWSE, gt.DSE):
    np.testing.assert_array_equal(ours.node_sets[gt.NODES][name], again.node_sets[gt.NODES][name])
  np.testing.assert_array_equal(ours.edge_sets[gt.EDGES].adjacency.source,
                                again.edge_sets[gt.EDGES].adjacency.source)


def test_tfrecord_round_trip_is_exact(tmp_path):
  graphs = [_graph_arrays(seed, n=5 + seed) for seed in range(3)]
  path = tmp_path / "g.tfrecord"
  assert gt.write_tfrecord(path, (gt.encode_graph(**g) for g in graphs)) == 3
  back = list(_read(path))
  for g, t in zip(graphs, back):
    nodes = t.node_sets[gt.NODES]
    np.testing.assert_array_equal(nodes[gt.FEATURES], g["features"])
    np.testing.assert_array_equal(nodes[gt.RWSE], g["rwse"])
    np.testing.assert_array_equal(nodes[gt.DSE], g["dse"])
    adj = t.edge_sets[gt.EDGES].adjacency
    e = g["edges"]
    np.testing.assert_array_equal(adj.source, np.concatenate([e[:, 0], e[:, 1]]))
    np.testing.assert_array_equal(adj.target, np.concatenate([e[:, 1], e[:, 0]]))
    assert int(t.context[gt.LABEL]) == g["label"]


def test_parse_batch_equals_tfgnn_parse_and_pads(tmp_path):
  graphs = [_graph_arrays(seed, n=4 + seed) for seed in range(5)]
  serialized = tf.constant([gt.encode_graph(**g) for g in graphs])
  expected = tfgnn.parse_example(_spec(), serialized).merge_batch_to_components()
  got = gt.parse_batch(serialized, feature_dim=3, padded_feature_dim=6, n_rw=4, n_dg=2)
  np.testing.assert_array_equal(got.node_sets[gt.NODES].sizes, expected.node_sets[gt.NODES].sizes)
  feats = got.node_sets[gt.NODES][gt.FEATURES].numpy()
  np.testing.assert_array_equal(feats[:, :3], expected.node_sets[gt.NODES][gt.FEATURES])
  np.testing.assert_array_equal(feats[:, 3:], 0)
  for name in (gt.RWSE, gt.DSE):
    np.testing.assert_array_equal(got.node_sets[gt.NODES][name], expected.node_sets[gt.NODES][name])
  for end in ("source", "target"):
    np.testing.assert_array_equal(getattr(got.edge_sets[gt.EDGES].adjacency, end),
                                  getattr(expected.edge_sets[gt.EDGES].adjacency, end))
  np.testing.assert_array_equal(got.context[gt.LABEL], expected.context[gt.LABEL])
  path = tmp_path / "g.tfrecord"
  gt.write_tfrecord(path, serialized.numpy().tolist())
  batches = [gt.parse_batch(s, feature_dim=3, padded_feature_dim=3, n_rw=4, n_dg=2)
             for s in gt.read_serialized_batches(str(path), batch_size=2)]
  assert [int(tf.size(b.context[gt.LABEL])) for b in batches] == [2, 2, 1]
  np.testing.assert_array_equal(batches[1].node_sets[gt.NODES].sizes, [6, 7])
  # Edge endpoints are shifted into the merged node numbering.
  assert int(tf.reduce_max(batches[1].edge_sets[gt.EDGES].adjacency.source)) < 13
