"""SavedModel export of one client's model, in the TF-GNN serving convention.

The exported signature `serving_default` takes `examples`: a string tensor [batch] of serialized
tf.train.Example GraphTensors (as written by `data_prep`), and returns `probabilities`
[batch, n_class]. Loading needs TensorFlow only:

    loaded = tf.saved_model.load(path)
    probs = loaded.signatures["serving_default"](examples=tf.constant(serialized))["probabilities"]
"""

from __future__ import annotations

import json
import os
import pathlib

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow.python.trackable import data_structures  # pylint: disable=g-direct-tensorflow-import

from data_prep import graph_tensor as gt
from tff_graph.models import classifiers


class _Serving(tf.Module):
  """Tracks only the model's variables, not the Keras model itself: the model's own traced functions
  take GraphTensors, whose spec types would make loading require TF-GNN."""

  def __init__(self, model: classifiers.PartitionedModel, feature_dim: int, num_classes: int):
    super().__init__()
    self.model_variables = list(model.variables)
    self._model = data_structures.NoDependency(model)
    self._feature_dim = feature_dim
    self._num_classes = num_classes

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
    spec = self._model.spec
    graph = gt.parse_batch(examples, feature_dim=self._feature_dim, padded_feature_dim=spec.feature_dim,
                           n_rw=spec.n_rw, n_dg=spec.n_dg)
    logits = self._model(graph, training=False)[:, :self._num_classes]
    return {"probabilities": tf.nn.softmax(logits, axis=-1)}


def input_spec(spec: classifiers.ModelSpec) -> tfgnn.GraphTensorSpec:
  """The GraphTensorSpec of the examples the model of `spec` reads."""
  return gt.graph_spec(gt.graph_schema(spec.feature_dim, spec.n_rw, spec.n_dg))


def export_saved_model(model: classifiers.PartitionedModel, path: str | os.PathLike[str], *,
                       feature_dim: int | None = None, num_classes: int | None = None) -> pathlib.Path:
  """Writes `model` as a SavedModel with a `serving_default` signature (see module docstring).

  A federated client's model may be wider than its data (features zero-padded to the setting's
  widest, classes to the most classes): `feature_dim` and `num_classes` give the client's own, and the
  exported model reads that client's examples and returns its classes only.

  The model spec is written beside it as `model_spec.json`. Writes into a temporary folder first and
  renames it into place, so `path` is either absent or complete.
  """
  path = pathlib.Path(path)
  tmp = path.with_name(f".{path.name}.tmp")
  if tmp.exists():
    tf.io.gfile.rmtree(str(tmp))
  module = _Serving(model, feature_dim or model.spec.feature_dim, num_classes or model.spec.num_classes)
  tf.saved_model.save(module, str(tmp), signatures={"serving_default": module.serve})
  (tmp / "model_spec.json").write_text(json.dumps(
      {**classifiers.dataclasses.asdict(model.spec), "client_feature_dim": feature_dim or model.spec.feature_dim,
       "client_num_classes": num_classes or model.spec.num_classes}, indent=1))
  if path.exists():
    tf.io.gfile.rmtree(str(path))
  os.replace(tmp, path)
  return path


def predict_saved_model(path: str | os.PathLike[str], examples: list[bytes]) -> tf.Tensor:
  """Class probabilities from an exported model (loads it with TensorFlow only)."""
  loaded = tf.saved_model.load(str(path))
  return loaded.signatures["serving_default"](examples=tf.constant(examples))["probabilities"]
