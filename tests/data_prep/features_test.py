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
