"""Models: declared partitions, determinism, SavedModel round trip, and real training on MUTAG."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from data_prep import cache
from data_prep import graph_tensor as gt
from tff_graph import models
from tff_graph.models import classifiers

GIN_SPEC = models.ModelSpec(kind="gin", feature_dim=7, num_classes=2)
DEC_SPEC = models.ModelSpec(kind="decoupled", feature_dim=7, num_classes=2)


@pytest.mark.parametrize("spec", [GIN_SPEC, DEC_SPEC,
                                  models.ModelSpec(kind="gin", feature_dim=5, num_classes=3, backbone="sage"),
                                  models.ModelSpec(kind="decoupled", feature_dim=5, num_classes=3,
                                                   backbone="gcn", structure_backbone="gin")],
                         ids=["gin", "decoupled", "gin-sage", "decoupled-gcn-gin"])
def test_partition_is_disjoint_and_complete(spec):
  model = models.build_model(spec)
  model.check_partition()
  ids = [id(v) for name in model.part_names for v in model.part_variables([name])]
  assert len(ids) == len(set(ids)) == len(model.trainable_variables)


def test_shared_part_of_decoupled_model_is_exactly_the_structure_encoder():
  model = models.build_model(DEC_SPEC)
  shared = model.part_variables(["structure_encoder"])
  expected = (model.structure_projection.trainable_variables
              + [v for conv in model.structure_convs for v in conv.trainable_variables])
  assert {id(v) for v in shared} == {id(v) for v in expected}
  # Nothing of the feature channel, fusion or head is in it.
  others = model.part_variables([n for n in model.part_names if n != "structure_encoder"])
  assert not {id(v) for v in shared} & {id(v) for v in others}
  # Projection n_se (16 + 16) -> 64, then three 64 -> 64 GCNs with bias.
  assert model.parameter_counts()["structure_encoder"] == (32 * 64 + 64) + 3 * (64 * 64 + 64)


def test_parameter_counts_per_part():
  counts = models.build_model(GIN_SPEC).parameter_counts()
  assert counts["input"] == 7 * 64 + 64
  assert counts["gnn"] == 3 * 2 * (64 * 64 + 64)
  assert counts["post"] == 64 * 64 + 64 and counts["head"] == 64 * 2 + 2
  assert counts["total"] == sum(v for k, v in counts.items() if k != "total")
  dec = models.build_model(DEC_SPEC).parameter_counts()
  assert dec["feature_encoder"] == 3 * ((128 * 64 + 64) + (64 * 64 + 64))
  assert dec["fusion"] == 128 * 64 + 64


def test_overlapping_or_incomplete_partition_is_detected():
  model = models.build_model(GIN_SPEC)

  class Overlapping(type(model)):
    def parts(self):
      p = super().parts()
      p["post"] = (self.post, self.pre)
      return p

  class Incomplete(type(model)):
    def parts(self):
      p = super().parts()
      del p["head"]
      return p

  with pytest.raises(models.PartitionError, match="is in parts 'input' and 'post'"):
    m = Overlapping(GIN_SPEC)
    m(classifiers.example_graph(GIN_SPEC))
    m.check_partition()
  with pytest.raises(models.PartitionError, match="variables in no part"):
    m = Incomplete(GIN_SPEC)
    m(classifiers.example_graph(GIN_SPEC))
    m.check_partition()
  with pytest.raises(models.PartitionError, match="has no part"):
    model.part_variables(["structure_encoder"])


def test_same_seed_same_weights_different_seed_different():
  a, b, c = (models.build_model(DEC_SPEC, seed=s) for s in (4, 4, 5))
  for x, y in zip(a.trainable_variables, b.trainable_variables):
    np.testing.assert_array_equal(x.numpy(), y.numpy())
  assert any(not np.array_equal(x.numpy(), z.numpy()) for x, z in zip(a.trainable_variables, c.trainable_variables))


@pytest.mark.parametrize("embedding, width", [("rw", 16), ("dg", 16), ("rw_dg", 32), ("ones", 32)])
def test_structure_embedding_types(embedding, width):
  spec = models.ModelSpec(kind="decoupled", feature_dim=7, num_classes=2, embedding_type=embedding)
  model = models.build_model(spec)
  assert model.structure_projection.kernel.shape == (width, 64)
  graph = classifiers.example_graph(spec)
  assert classifiers.structure_input(graph, embedding).shape == (3, width)


def test_bad_specs():
  with pytest.raises(ValueError, match="unknown model kind 'mlp'"):
    models.ModelSpec(kind="mlp", feature_dim=3, num_classes=2)
  with pytest.raises(ValueError, match="'walk' is not a valid EmbeddingType"):
    models.ModelSpec(kind="decoupled", feature_dim=3, num_classes=2, embedding_type="walk")
  with pytest.raises(ValueError, match="dropout must be in"):
    models.ModelSpec(kind="gin", feature_dim=3, num_classes=2, dropout=1.5)


@pytest.fixture(scope="module")
def mutag(data_dir, cache_dir):
  prepared = cache.prepare_setting("chem", data_dir=data_dir, cache_dir=cache_dir)
  client = prepared.clients[0]
  spec = gt.graph_spec(tfgnn.read_schema(client.schema_path))
  return client, spec


def _train(model, dataset, steps: int) -> float:
  optimizer = tf.keras.optimizers.Adam(1e-3)
  loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  @tf.function
  def step(graph):
    with tf.GradientTape() as tape:
      loss = loss_fn(graph.context[gt.LABEL], model(graph, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))

  it = iter(dataset.repeat())
  for _ in range(steps):
    step(next(it))
  correct = total = 0
  for graph in dataset:
    pred = tf.argmax(model(graph, training=False), axis=-1)
    correct += int(tf.reduce_sum(tf.cast(pred == graph.context[gt.LABEL], tf.int32)))
    total += int(graph.context[gt.LABEL].shape[0])
  return correct / total


@pytest.mark.parametrize("kind", ["gin", "decoupled"])
def test_models_learn_mutag(mutag, kind):
  client, spec = mutag
  del spec
  train = gt.read_serialized_batches(client.files["train"], batch_size=32, shuffle_seed=0).map(
      lambda s: gt.parse_batch(s, feature_dim=client.feature_dim, padded_feature_dim=client.feature_dim,
                               n_rw=16, n_dg=16)).cache()
  labels = np.concatenate([g.context[gt.LABEL].numpy() for g in train])
  majority = np.bincount(labels).max() / len(labels)
  model = models.build_model(models.ModelSpec(kind=kind, feature_dim=client.feature_dim, num_classes=2), seed=0)
  accuracy = _train(model, train, 300)
  assert majority < 0.7
  assert accuracy > majority + 0.12, (accuracy, majority)


@pytest.mark.parametrize("spec", [GIN_SPEC, DEC_SPEC], ids=["gin", "decoupled"])
def test_saved_model_predicts_like_the_model(mutag, tmp_path, spec):
  client, graph_spec = mutag
  model = models.build_model(spec, seed=3)
  examples = [r.numpy() for r in tf.data.TFRecordDataset(client.files["test"])]
  graph = tfgnn.parse_example(graph_spec, tf.constant(examples)).merge_batch_to_components()
  expected = tf.nn.softmax(model(graph, training=False)).numpy()
  path = models.export_saved_model(model, tmp_path / "client0")
  got = models.predict_saved_model(path, examples).numpy()
  assert got.shape == (len(examples), 2)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
  assert (path / "model_spec.json").is_file()
  # A user without this library (nor TF-GNN) loads it with TensorFlow alone.
  np.save(tmp_path / "examples.npy", np.array(examples, dtype=object), allow_pickle=True)
  subprocess.run([sys.executable, "-c", _PLAIN_TF_PREDICT, str(path), str(tmp_path)], check=True,
                 capture_output=True, timeout=300)
  np.testing.assert_allclose(np.load(tmp_path / "probs.npy"), expected, rtol=1e-5, atol=1e-6)


_PLAIN_TF_PREDICT = """
import builtins, sys
import numpy as np
_import = builtins.__import__
def _guard(name, *args, **kwargs):
  if name.split(".")[0] in ("tensorflow_gnn", "tff_graph", "data_prep"):
    raise ImportError("blocked: " + name)
  return _import(name, *args, **kwargs)
builtins.__import__ = _guard
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
examples = np.load(sys.argv[2] + "/examples.npy", allow_pickle=True).tolist()
probs = model.signatures["serving_default"](examples=tf.constant(examples))["probabilities"]
np.save(sys.argv[2] + "/probs.npy", probs.numpy())
"""


@pytest.mark.parametrize("spec", [GIN_SPEC, DEC_SPEC], ids=["gin", "decoupled"])
def test_model_config_round_trip_rebuilds_the_same_model(spec):
  model = models.build_model(spec, seed=7)
  clone = type(model).from_config(model.get_config())
  clone(classifiers.example_graph(spec))
  assert clone.spec == spec
  for a, b in zip(clone.trainable_variables, model.trainable_variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())  # Same seed, same initial weights.
