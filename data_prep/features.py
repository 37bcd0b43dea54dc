"""Node features as the two papers build them (through PyTorch Geometric's TUDataset).

The rule depends only on which files a dataset has, never on its name:

1. node labels present -> one-hot node labels. As PyG does, each label column is shifted by its
   minimum and one-hot encoded with width max - min + 1 (so a dataset whose labels skip values gets
   all-zero columns, e.g. BZR: labels 1..53 with 10 distinct values -> width 53).
2. else node attributes present -> the attributes (Letter-*: the 2-d node coordinates).
3. else (featureless: COLLAB, IMDB-*) -> one-hot degree with width max_degree + 1 computed from the
   data (the references hard-code 491/135/88, which is exactly what this gives).
"""

from __future__ import annotations

import enum

import numpy as np

from data_prep import tu


class FeatureKind(str, enum.Enum):
  NODE_LABELS = "one_hot_node_labels"
  NODE_ATTRIBUTES = "node_attributes"
  DEGREE = "one_hot_degree"


def feature_kind(dataset: tu.TUDataset) -> FeatureKind:
  if dataset.node_labels is not None:
    return FeatureKind.NODE_LABELS
  if dataset.node_attributes is not None:
    return FeatureKind.NODE_ATTRIBUTES
  return FeatureKind.DEGREE


def one_hot(indices: np.ndarray, width: int) -> np.ndarray:
  out = np.zeros((len(indices), width), dtype=np.float32)
  out[np.arange(len(indices)), indices] = 1.0
  return out


def node_features(dataset: tu.TUDataset) -> tuple[np.ndarray, FeatureKind]:
  """float32 [N, F] node features and the rule that produced them (see module docstring)."""
  kind = feature_kind(dataset)
  if kind is FeatureKind.NODE_LABELS:
    labels = dataset.node_labels - dataset.node_labels.min(axis=0)
    columns = [one_hot(col, int(col.max()) + 1) for col in labels.T]
    return np.concatenate(columns, axis=1), kind
  if kind is FeatureKind.NODE_ATTRIBUTES:
    return dataset.node_attributes.astype(np.float32), kind
  degrees = dataset.degrees()
  return one_hot(degrees, int(degrees.max()) + 1), kind
