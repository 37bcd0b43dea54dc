"""Node features: the papers' rule by default, or the node labels, attributes or both on request.

`mode="auto"` is how the two papers build them (through PyTorch Geometric's TUDataset); it depends only
on which files a dataset has, never on its name:

1. node labels present -> one-hot node labels. As PyG does, each label column is shifted by its
   minimum and one-hot encoded with width max - min + 1 (so a dataset whose labels skip values gets
   all-zero columns, e.g. BZR: labels 1..53 with 10 distinct values -> width 53).
2. else node attributes present -> the attributes (Letter-*: the 2-d node coordinates).
3. else (featureless: COLLAB, IMDB-*) -> one-hot degree with width max_degree + 1 computed from the
   data (the references hard-code 491/135/88, which is exactly what this gives).

The other modes choose explicitly: `labels` (one-hot labels as in 1), `attributes` (as in 2), `both`
(one-hot labels, then the attributes, concatenated: e.g. ENZYMES 3 + 18, PROTEINS 3 + 1 columns) and
`degree` (as in 3). A mode whose files the dataset lacks is an error naming the dataset.

`attribute_columns` says which columns hold attributes: `data_prep.cache` can standardise them per
client with the statistics of that client's training graphs only (`standardize_attributes`), so that
raw coordinates (Letter-*: 0..3; other datasets: hundreds) do not swamp the one-hot columns and nothing
leaks from the validation or test graphs.
"""

from __future__ import annotations

import enum

import numpy as np

from data_prep import tu

MODES = ("auto", "labels", "attributes", "both", "degree")


class FeatureKind(str, enum.Enum):
  NODE_LABELS = "one_hot_node_labels"
  NODE_ATTRIBUTES = "node_attributes"
  LABELS_AND_ATTRIBUTES = "one_hot_node_labels+node_attributes"
  DEGREE = "one_hot_degree"


class FeatureError(ValueError):
  """A feature mode that the dataset's files cannot provide, or an unknown mode."""


def feature_kind(dataset: tu.TUDataset, mode: str = "auto") -> FeatureKind:
  if mode not in MODES:
    raise FeatureError(f"unknown node feature mode {mode!r}; choose one of {', '.join(MODES)}")
  has_labels, has_attrs = dataset.node_labels is not None, dataset.node_attributes is not None
  if mode == "auto":
    if has_labels:
      return FeatureKind.NODE_LABELS
    return FeatureKind.NODE_ATTRIBUTES if has_attrs else FeatureKind.DEGREE
  needed = {"labels": (has_labels, "node labels"), "attributes": (has_attrs, "node attributes"),
            "both": (has_labels and has_attrs, "node labels and node attributes"), "degree": (True, "")}
  ok, what = needed[mode]
  if not ok:
    have = [w for w, h in (("node labels", has_labels), ("node attributes", has_attrs)) if h] or ["neither"]
    raise FeatureError(f"dataset {dataset.name!r}: node features {mode!r} need {what}, but it has "
                       f"{' and '.join(have)} (files {dataset.name}_node_labels.txt / "
                       f"{dataset.name}_node_attributes.txt)")
  return {"labels": FeatureKind.NODE_LABELS, "attributes": FeatureKind.NODE_ATTRIBUTES,
          "both": FeatureKind.LABELS_AND_ATTRIBUTES, "degree": FeatureKind.DEGREE}[mode]


def one_hot(indices: np.ndarray, width: int) -> np.ndarray:
  out = np.zeros((len(indices), width), dtype=np.float32)
  out[np.arange(len(indices)), indices] = 1.0
  return out


def _one_hot_labels(dataset: tu.TUDataset) -> np.ndarray:
  labels = dataset.node_labels - dataset.node_labels.min(axis=0)
  return np.concatenate([one_hot(col, int(col.max()) + 1) for col in labels.T], axis=1)


def node_features(dataset: tu.TUDataset, mode: str = "auto") -> tuple[np.ndarray, FeatureKind]:
  """float32 [N, F] node features and the rule that produced them (see module docstring)."""
  kind = feature_kind(dataset, mode)
  if kind is FeatureKind.NODE_LABELS:
    return _one_hot_labels(dataset), kind
  if kind is FeatureKind.NODE_ATTRIBUTES:
    return dataset.node_attributes.astype(np.float32), kind
  if kind is FeatureKind.LABELS_AND_ATTRIBUTES:
    return np.concatenate([_one_hot_labels(dataset), dataset.node_attributes.astype(np.float32)], axis=1), kind
  degrees = dataset.degrees()
  return one_hot(degrees, int(degrees.max()) + 1), kind


def attribute_columns(dataset: tu.TUDataset, kind: FeatureKind, width: int) -> slice | None:
  """The columns of `node_features` that hold node attributes (None when there are none)."""
  if kind is FeatureKind.NODE_ATTRIBUTES:
    return slice(0, width)
  if kind is FeatureKind.LABELS_AND_ATTRIBUTES:
    return slice(width - dataset.node_attributes.shape[1], width)
  return None


def standardizer(features: np.ndarray, nodes: np.ndarray, columns: slice) -> tuple[np.ndarray, np.ndarray]:
  """(mean, std) of `columns` over the rows `nodes` (float64; a constant column gets std 1)."""
  x = features[nodes, columns].astype(np.float64)
  if not len(x):
    raise FeatureError("cannot standardise attributes over an empty set of training nodes")
  std = x.std(axis=0)
  return x.mean(axis=0), np.where(std > 0, std, 1.0)
