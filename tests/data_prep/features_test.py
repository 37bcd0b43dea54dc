"""Node-feature rules: one-hot labels (PyG widths), attributes, one-hot degree from the data."""

from __future__ import annotations

import numpy as np
import pytest

from data_prep import features
from data_prep import tu
from tests.conftest import SMALL, write_tu


def test_one_hot_node_labels_width_is_max_minus_min_plus_one(tmp_path):
  d = tu.read_tu_dataset("TOY", write_tu(tmp_path, "TOY", SMALL))
  x, kind = features.node_features(d)
  assert kind is features.FeatureKind.NODE_LABELS
  # Labels 2, 4, 2, 3, 3, 2, 2 -> shifted 0, 2, 0, 1, 1, 0, 0, width 3.
  np.testing.assert_array_equal(x.argmax(1), [0, 2, 0, 1, 1, 0, 0])
  assert x.shape == (7, 3) and x.dtype == np.float32 and np.all(x.sum(1) == 1)


def test_attributes_when_no_node_labels(tmp_path):
  files = {k: v for k, v in SMALL.items() if k != "node_labels"}
  d = tu.read_tu_dataset("TOY", write_tu(tmp_path, "TOY", files))
  x, kind = features.node_features(d)
  assert kind is features.FeatureKind.NODE_ATTRIBUTES
  np.testing.assert_allclose(x[:, 0], [0.5, 1, 2, 3, 4, 5, 6])


def test_degree_one_hot_when_featureless(tmp_path):
  files = {k: v for k, v in SMALL.items() if k not in ("node_labels", "node_attributes")}
  d = tu.read_tu_dataset("TOY", write_tu(tmp_path, "TOY", files))
  x, kind = features.node_features(d)
  assert kind is features.FeatureKind.DEGREE
  # Degrees 2, 2, 2, 1, 2, 1, 0 (self-loop and duplicate dropped): width max degree + 1 = 3.
  np.testing.assert_array_equal(x.argmax(1), [2, 2, 2, 1, 2, 1, 0])
  assert x.shape == (7, 3)


@pytest.mark.parametrize("name, kind, width", [
    ("MUTAG", features.FeatureKind.NODE_LABELS, 7),
    ("PROTEINS", features.FeatureKind.NODE_LABELS, 3),
    ("Letter-high", features.FeatureKind.NODE_ATTRIBUTES, 2),
    ("IMDB-BINARY", features.FeatureKind.DEGREE, 136),  # The reference's OneHotDegree(135).
    ("IMDB-MULTI", features.FeatureKind.DEGREE, 89),  # OneHotDegree(88).
])
def test_real_feature_widths(data_dir, name, kind, width):
  x, got = features.node_features(tu.read_tu_dataset(name, data_dir))
  assert got is kind and x.shape[1] == width


def test_explicit_modes_labels_attributes_both_degree(tmp_path):
  d = tu.read_tu_dataset("TOY", write_tu(tmp_path, "TOY", SMALL))
  labels, _ = features.node_features(d, "labels")
  attrs, _ = features.node_features(d, "attributes")
  both, kind = features.node_features(d, "both")
  assert kind is features.FeatureKind.LABELS_AND_ATTRIBUTES
  np.testing.assert_array_equal(both, np.concatenate([labels, attrs], axis=1))
  assert features.attribute_columns(d, kind, both.shape[1]) == slice(3, 5)
  degree, _ = features.node_features(d, "degree")
  np.testing.assert_array_equal(degree.argmax(1), [2, 2, 2, 1, 2, 1, 0])
  assert features.node_features(d)[1] is features.FeatureKind.NODE_LABELS  # "auto" keeps the papers' rule.


def test_a_mode_the_files_cannot_give_is_named(tmp_path):
  files = {k: v for k, v in SMALL.items() if k != "node_attributes"}
  d = tu.read_tu_dataset("TOY", write_tu(tmp_path, "TOY", files))
  with pytest.raises(features.FeatureError, match="dataset 'TOY': node features 'both' need node labels and node "
                     "attributes, but it has node labels"):
    features.node_features(d, "both")
  with pytest.raises(features.FeatureError, match="unknown node feature mode 'colour'"):
    features.node_features(d, "colour")


def test_real_dataset_with_labels_and_attributes(data_dir):
  d = tu.read_tu_dataset("ENZYMES", data_dir)  # 3 node labels and 18 attributes.
  x, kind = features.node_features(d, "both")
  assert x.shape[1] == 3 + 18 and kind is features.FeatureKind.LABELS_AND_ATTRIBUTES
  assert features.node_features(d)[0].shape[1] == 3  # The papers' rule drops the attributes.


def test_attributes_are_standardised_with_each_clients_training_graphs_only(data_dir, tmp_path):
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  from data_prep import graph_tensor as gt  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  prepared = cache.prepare_setting("Letter-low:2", data_dir=data_dir, cache_dir=tmp_path, standardize_attributes=True)
  raw = cache.prepare_setting("Letter-low:2", data_dir=data_dir, cache_dir=tmp_path)
  assert prepared.root != raw.root
  ds = cache.load_dataset("Letter-low", data_dir=data_dir, cache_dir=tmp_path)
  means = []
  for c in prepared.clients:
    train = np.asarray(c.graph_indices["train"])
    nodes = ds.node_indices(train)
    mean, std = ds.features[nodes].mean(0), ds.features[nodes].std(0)
    means.append(mean)

    def features_of(part):
      rows = [r.numpy() for r in tf.data.TFRecordDataset(c.files[part])]
      graph = gt.parse_batch(tf.constant(rows), feature_dim=2, padded_feature_dim=2, n_rw=16, n_dg=16)
      return graph.node_sets[gt.NODES][gt.FEATURES].numpy()

    x = features_of("train")
    np.testing.assert_allclose(x.mean(0), 0.0, atol=1e-4)  # Train nodes: mean 0, std 1 ...
    np.testing.assert_allclose(x.std(0), 1.0, atol=1e-4)
    test_nodes = ds.node_indices(np.asarray(c.graph_indices["test"]))
    np.testing.assert_allclose(features_of("test"), (ds.features[test_nodes] - mean) / std, atol=1e-4)  # ... test
    # graphs scaled with the train statistics, not their own.
  assert not np.allclose(means[0], means[1])  # Each client has its own statistics.
