"""The Laplacian-PE and SPD structure embeddings end to end: stored, parsed, read, sign-flipped, exported."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from data_prep import cache
from data_prep import graph_tensor as gt
from data_prep import structure
from tff_graph import experiment
from tff_graph.models import classifiers
from tests.conftest import experiment_config


@pytest.fixture(scope="module")
def lap_setting(data_dir, cache_dir):
  config = experiment_config("fedstar", rounds=1, data=dict(setting="MUTAG:2"), model=dict(embedding_type="rw_dg_lap"))
  return config, experiment.prepare_data(config, data_dir=data_dir, cache_dir=cache_dir)


def test_the_prepared_graphs_carry_the_laplacian_pe_of_their_dataset(lap_setting, data_dir, cache_dir):
  config, prepared = lap_setting
  assert (prepared.n_lap, prepared.n_spd) == (8, 0) and prepared.options["n_lap"] == 8
  ds = cache.load_dataset("MUTAG", data_dir=data_dir, cache_dir=cache_dir)
  expected = structure.laplacian_pe(ds.data, 8)
  c = prepared.clients[0]
  rows = [r.numpy() for r in tf.data.TFRecordDataset(c.files["train"])][:5]
  graph = gt.parse_batch(tf.constant(rows), feature_dim=c.feature_dim, padded_feature_dim=c.feature_dim, n_rw=16,
                         n_dg=16, n_lap=8)
  nodes = ds.node_indices(np.asarray(c.graph_indices["train"][:5]))
  np.testing.assert_allclose(graph.node_sets[gt.NODES][gt.LAP].numpy(), expected[nodes], atol=1e-6)
  plain = experiment_config("fedstar", rounds=1, data=dict(setting="MUTAG:2"))
  with pytest.raises(ValueError, match="n_lap: config 0, data 8"):
    experiment.check_data(plain, prepared)  # A run must read the data it was prepared for.


def test_lap_signs_flip_per_graph_in_training_only_and_other_embeddings_keep_their_variables():
  spec = classifiers.ModelSpec(kind="decoupled", feature_dim=3, num_classes=2, embedding_type="rw_dg_lap", n_lap=4)
  model = classifiers.build_model(spec, seed=1)
  assert spec.structure_dim == 16 + 16 + 4 and model.structure_projection.kernel.shape[0] == 36
  g = classifiers.example_graph(spec)
  pe = tf.random.stateless_normal([3, 4], seed=[1, 2])
  nodes = g.node_sets[gt.NODES]
  g = g.replace_features(node_sets={gt.NODES: {**nodes.features, gt.LAP: pe}})
  signs = model._lap_signs(g, training=True)  # pylint: disable=protected-access
  assert signs.shape == (1, 4) and set(np.unique(signs.numpy())) <= {-1.0, 1.0}
  x = classifiers.structure_input(g, "rw_dg_lap", signs).numpy()
  np.testing.assert_allclose(x[:, 32:], pe.numpy() * signs.numpy(), rtol=1e-6)  # Same sign on every node.
  assert model._lap_signs(g, training=False) is None  # pylint: disable=protected-access
  draws = {tuple(model._lap_signs(g, training=True).numpy().ravel()) for _ in range(20)}  # pylint: disable=protected-access
  assert len(draws) > 1  # A fresh draw per step, from the model's own (checkpointed) stream.
  # Embeddings without lap build exactly the variables they built before (resumable old checkpoints).
  before = classifiers.build_model(classifiers.ModelSpec(kind="decoupled", feature_dim=3, num_classes=2), seed=1)
  assert model.sign_flips is not None and before.sign_flips is None
  assert len(model.variables) == len(before.variables)
  assert len(classifiers.random_states(model)) == len(classifiers.random_states(before)) + 1  # In the client state.


def test_an_spd_model_trains_and_its_export_reads_the_stored_histograms(tff_context, data_dir, cache_dir, tmp_path):
  config = experiment_config("fedstar", rounds=1, data=dict(setting="MUTAG:2"), model=dict(embedding_type="spd"))
  prepared = experiment.prepare_data(config, data_dir=data_dir, cache_dir=cache_dir)
  result = experiment.run_experiment(config, prepared, tmp_path / "run")
  assert set(result.seeds[0].final) == {"0-MUTAG", "1-MUTAG"}
  c = prepared.clients[0]
  examples = [r.numpy() for r in tf.data.TFRecordDataset(c.files["test"])]
  loaded = tf.saved_model.load(str(tmp_path / "run" / "seed_1" / "models" / c.client_id))
  out = loaded.signatures["score_each"](examples=tf.constant(examples))
  assert out["valid"].numpy().all() and np.isfinite(out["probabilities"].numpy()).all()
  _, params = experiment.parameter_counts(config, prepared)  # The shared structure encoder reads 8 columns.
  assert params > 0
