"""SavedModel export of one client's model, in the TF-GNN serving convention.

Two signatures take `examples`, a string tensor [batch] of serialized tf.train.Example GraphTensors
(as `data_prep` writes them; `context/label` is optional and ignored, so unlabelled graphs are scored):

* `serving_default` -> `probabilities` [batch, n_class]. A malformed example fails the whole call
  with a TensorFlow `InvalidArgumentError` naming the bad indices (whatever the bytes are).
* `score_each` -> `probabilities` [batch, n_class] and `valid` [batch] (bool): each example is
  checked on its own; an invalid one gets a row of NaN and `valid=False`, its neighbours are scored.

Loading needs TensorFlow only:

    loaded = tf.saved_model.load(path)
    probs = loaded.signatures["serving_default"](examples=tf.constant(serialized))["probabilities"]
    out = loaded.signatures["score_each"](examples=tf.constant(serialized))   # out["valid"]
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib

import tensorflow as tf
from tensorflow.python.trackable import data_structures  # pylint: disable=g-direct-tensorflow-import

from data_prep import graph_tensor as gt


class _Serving(tf.Module):
  """Tracks only the model's variables, not the Keras model itself: the model's own traced functions
  take GraphTensors, whose spec types would make loading require TF-GNN."""

  def __init__(self, model: tf.keras.Model, input_spec, feature_dim: int, num_classes: int):
    super().__init__()
    self.model_variables = list(model.variables)
    self._model = data_structures.NoDependency(model)
    self._input_spec = input_spec
    self._feature_dim = feature_dim
    self._num_classes = num_classes

  # One traced function shared by both signatures: the model's forward pass is traced (and stored in
  # the SavedModel) once, not once per signature.
  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def _probabilities(self, examples: tf.Tensor) -> tf.Tensor:
    spec = self._input_spec
    graph = gt.parse_batch(examples, feature_dim=self._feature_dim, padded_feature_dim=spec.feature_dim,
                           n_rw=spec.n_rw, n_dg=spec.n_dg, require_label=False, n_lap=spec.n_lap,
                           n_spd=spec.n_spd)
    logits = self._model(graph, training=False)[:, :self._num_classes]
    return tf.nn.softmax(logits, axis=-1)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def serve(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
    # Checked first, so that bad bytes fail with this message: TF's own parse error would quote the
    # bytes, and Python cannot decode them (a UnicodeDecodeError instead of a TensorFlow error).
    spec = self._input_spec
    valid = gt.valid_examples(examples, feature_dim=self._feature_dim, n_rw=spec.n_rw, n_dg=spec.n_dg,
                              n_lap=spec.n_lap, n_spd=spec.n_spd)
    check = tf.debugging.Assert(tf.reduce_all(valid), [
        "not valid serialized graphs (use the score_each signature to score the others); indices:",
        tf.where(tf.logical_not(valid))[:, 0]], summarize=20)
    with tf.control_dependencies([check]):
      return {"probabilities": self._probabilities(tf.identity(examples))}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def score_each(self, examples: tf.Tensor) -> dict[str, tf.Tensor]:
    spec = self._input_spec
    valid = gt.valid_examples(examples, feature_dim=self._feature_dim, n_rw=spec.n_rw, n_dg=spec.n_dg,
                              n_lap=spec.n_lap, n_spd=spec.n_spd)
    index = tf.where(valid)[:, 0]
    good = self._probabilities(tf.gather(examples, index))
    rows = tf.fill([tf.shape(examples)[0], self._num_classes], float("nan"))
    return {"probabilities": tf.tensor_scatter_nd_update(rows, index[:, None], good), "valid": valid}


def export_saved_model(model: tf.keras.Model, path: str | os.PathLike[str], *, input_spec=None,
                       feature_dim: int | None = None, num_classes: int | None = None) -> pathlib.Path:
  """Writes `model` as a SavedModel with a `serving_default` signature (see module docstring).

  A federated client's model may be wider than its data (features zero-padded to the setting's
  widest, classes to the most classes): `feature_dim` and `num_classes` give the client's own, and the
  exported model reads that client's examples and returns its classes only.

  `input_spec` (a `client_work.InputSpec`) gives the widths the model reads; default: the model's own
  `spec` (tff-graph's models). The input spec, the client's widths and the model spec (if the model
  has one) are written beside it as `model_spec.json`. Writes into a temporary folder first and
  renames it into place, so `path` is either absent or complete.
  """
  spec = getattr(model, "spec", None)
  if input_spec is None:
    if spec is None:
      raise ValueError("export_saved_model needs input_spec for a model without a ModelSpec")
    input_spec = spec
  feature_dim = feature_dim or input_spec.feature_dim
  num_classes = num_classes or input_spec.num_classes
  path = pathlib.Path(path)
  tmp = path.with_name(f".{path.name}.tmp")
  if tmp.exists():
    tf.io.gfile.rmtree(str(tmp))
  module = _Serving(model, input_spec, feature_dim, num_classes)
  tf.saved_model.save(module, str(tmp), signatures={"serving_default": module.serve,
                                                     "score_each": module.score_each})
  record = dataclasses.asdict(spec) if dataclasses.is_dataclass(spec) else {}
  record.update({"input_feature_dim": input_spec.feature_dim, "input_num_classes": input_spec.num_classes,
                 "n_rw": input_spec.n_rw, "n_dg": input_spec.n_dg, "n_lap": getattr(input_spec, "n_lap", 0),
                 "n_spd": getattr(input_spec, "n_spd", 0), "client_feature_dim": feature_dim,
                 "client_num_classes": num_classes})
  (tmp / "model_spec.json").write_text(json.dumps(record, indent=1))
  if path.exists():
    tf.io.gfile.rmtree(str(path))
  os.replace(tmp, path)
  return path


def predict_saved_model(path: str | os.PathLike[str], examples: list[bytes]) -> tf.Tensor:
  """Class probabilities from an exported model (loads it with TensorFlow only)."""
  loaded = tf.saved_model.load(str(path))
  return loaded.signatures["serving_default"](examples=tf.constant(examples))["probabilities"]
