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

  def __init__(self, model: classifiers.PartitionedModel, spec: tfgnn.GraphTensorSpec):
    super().__init__()
    self.model_variables = list(model.variables)
    self._model = data_structures.NoDependency(model)
    self._spec = spec

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
    graph = tfgnn.parse_example(self._spec, examples).merge_batch_to_components()
    return {"probabilities": tf.nn.softmax(self._model(graph, training=False), axis=-1)}


def input_spec(spec: classifiers.ModelSpec) -> tfgnn.GraphTensorSpec:
  """The GraphTensorSpec of the examples the model of `spec` reads."""
  return gt.graph_spec(gt.graph_schema(spec.feature_dim, spec.n_rw, spec.n_dg))


def export_saved_model(model: classifiers.PartitionedModel, path: str | os.PathLike[str]) -> pathlib.Path:
  """Writes `model` as a SavedModel with a `serving_default` signature (see module docstring).

  The model spec is written beside it as `model_spec.json`. Writes into a temporary folder first and
  renames it into place, so `path` is either absent or complete.
  """
  path = pathlib.Path(path)
  tmp = path.with_name(f".{path.name}.tmp")
  if tmp.exists():
    tf.io.gfile.rmtree(str(tmp))
  module = _Serving(model, input_spec(model.spec))
  tf.saved_model.save(module, str(tmp), signatures={"serving_default": module.serve})
  (tmp / "model_spec.json").write_text(json.dumps(classifiers.dataclasses.asdict(model.spec), indent=1))
  if path.exists():
    tf.io.gfile.rmtree(str(path))
  os.replace(tmp, path)
  return path


def predict_saved_model(path: str | os.PathLike[str], examples: list[bytes]) -> tf.Tensor:
  """Class probabilities from an exported model (loads it with TensorFlow only)."""
  loaded = tf.saved_model.load(str(path))
  return loaded.signatures["serving_default"](examples=tf.constant(examples))["probabilities"]
