"""Program logic end to end on a tiny real setting: every algorithm, run folder contents."""

from __future__ import annotations

import csv
import json
import types

import numpy as np
import pytest
import tensorflow as tf

from tff_graph import algorithms
from tff_graph import comparison
from tff_graph import experiment
from tff_graph import program_logic
from tff_graph.models import export
from tests.conftest import experiment_config


def _config(algorithm: str, setting="MUTAG:2", seeds=(1,), **kw) -> experiment.ExperimentConfig:
  if "clustering" in algorithms.get(algorithm).options:  # A gate that can open within 2 rounds.
    kw.setdefault("clustering", dict(eps1=10.0, eps2=0.0))
  return experiment_config(algorithm, rounds=2, data=dict(setting=setting), run=dict(seeds=seeds), **kw)


def _tags(folder) -> set[str]:
  tags = set()
  for path in folder.glob("events.out.tfevents.*"):
    for event in tf.compat.v1.train.summary_iterator(str(path)):
      tags.update(v.tag for v in event.summary.value)
  return tags


@pytest.fixture(scope="module")
def mutag2(data_dir, cache_dir):
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  return cache.prepare_setting("MUTAG:2", data_dir=data_dir, cache_dir=cache_dir)


@pytest.mark.parametrize("algorithm", algorithms.names())
def test_every_algorithm_runs_and_fills_its_run_folder(tff_context, mutag2, tmp_path, algorithm):
  result = experiment.run_experiment(_config(algorithm), mutag2, tmp_path / "run")
  run = tmp_path / "run"
  for name in ("config.json", "per_client.csv", "summary.csv", "accuracy.png", "DONE"):
    assert (run / name).is_file(), name
  seed = run / "seed_1"
  ids = [c.client_id for c in mutag2.clients]
  with open(seed / "eval_metrics.csv") as f:
    rows = list(csv.DictReader(f))
  assert [r["round"] for r in rows] == ["1", "2"]
  assert {f"{ids[0]}/test_accuracy", "average/test_accuracy", "average/val_loss"} <= set(rows[0])
  assert float(rows[-1]["average/test_accuracy"]) == pytest.approx(result.seeds[0].curve[-1][1])
  tags = _tags(seed / "tensorboard")
  assert {"eval/average/test_accuracy", f"eval/{ids[0]}/test_loss", f"train/{ids[1]}/train_loss"} <= tags
  assert "server/server/train/train_loss" in tags  # Server metrics are released too.
  if "clustering" in algorithms.get(algorithm).options:
    assert "gcfl/clusters" in tags and (run / "clusters.png").is_file()
    assert set(result.seeds[0].gcfl["best_snapshot_accuracy"]) == set(ids)
  for cid in ids:
    assert (seed / "models" / cid / "saved_model.pb").is_file()
  assert json.loads((run / "config.json").read_text())["algorithm"] == algorithm


def test_saved_models_predict_like_the_final_client_models(tff_context, chem_tiny, tmp_path):
  config = _config("fedstar", setting="chem_tiny")
  experiment.run_experiment(config, chem_tiny, tmp_path / "run")
  # The same run again through the library's loop, and its final client models.
  process = experiment.build_process(config, chem_tiny, 1)
  result = program_logic.train_process(process, chem_tiny.clients, seed=1, rounds=2)
  for i, c in enumerate(chem_tiny.clients[:3]):
    examples = [r.numpy() for r in tf.data.TFRecordDataset(c.files["test"])]
    got = export.predict_saved_model(tmp_path / "run" / "seed_1" / "models" / c.client_id, examples).numpy()
    assert got.shape == (len(examples), c.num_classes)
    model = process.client_model(result.state.server_state, result.state.client_states[i], i)
    from data_prep import graph_tensor as gt  # pylint: disable=g-import-not-at-top
    graph = gt.parse_batch(tf.constant(examples), feature_dim=c.feature_dim,
                           padded_feature_dim=process.input_spec.feature_dim, n_rw=16, n_dg=16)
    expected = tf.nn.softmax(model(graph, training=False)[:, :c.num_classes]).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_seeds_are_aggregated_as_the_papers_do(tff_context, mutag2, tmp_path):
  result = experiment.run_experiment(_config("fedavg", seeds=(1, 2)), mutag2, tmp_path / "run")
  per = result.per_client()
  mean, std = result.aggregate()
  assert mean == pytest.approx(np.mean([np.mean(v) for v in per.values()]))
  assert std == pytest.approx(np.mean([np.std(v) for v in per.values()]))
  summary = (tmp_path / "run" / "summary.csv").read_text()
  assert f"aggregate_mean,{mean:.4f}" in summary


def test_run_folder_rules(tmp_path):
  config = _config("fedavg")
  folder = tmp_path / "run"
  experiment.check_run_folder(folder, config)  # Absent: fine.
  folder.mkdir()
  (folder / "notes.txt").write_text("mine")
  with pytest.raises(experiment.RunFolderError, match="holds no run of tff-graph"):
    experiment.check_run_folder(folder, config)
  (folder / "notes.txt").unlink()
  (folder / "config.json").write_text(_config("fedstar").to_json())
  with pytest.raises(experiment.RunFolderError, match="another configuration"):
    experiment.check_run_folder(folder, config)
  (folder / "config.json").write_text(experiment.run_record(config))
  experiment.check_run_folder(folder, config)  # Same run, unfinished: resumable.
  (folder / "DONE").write_text("")
  with pytest.raises(experiment.RunFolderError, match="finished run"):
    experiment.check_run_folder(folder, config)
  (folder / ".lock").write_text("")  # The caller's own lock survives the overwrite.
  experiment.check_run_folder(folder, config, overwrite=True)
  assert [p.name for p in folder.iterdir()] == [".lock"]


def test_comparison_plot(tmp_path):
  cfg = _config("fedavg", seeds=(1, 2))
  seeds = [experiment.SeedResult(s, {}, [(1, 0.5), (2, 0.6)], None) for s in (1, 2)]
  comparison.write_plot(tmp_path, [experiment.ExperimentResult(cfg, seeds)])
  assert (tmp_path / "accuracy.png").stat().st_size > 1000


def test_comparison_table_gains_against_local(mutag2):
  def fake(algorithm, accs):
    cfg = _config(algorithm, seeds=(1, 2))
    seeds = [experiment.SeedResult(s, {cid: {"test_accuracy": a[i]} for cid, a in accs.items()}, [], None)
             for i, s in enumerate((1, 2))]
    return experiment.ExperimentResult(cfg, seeds)

  local = fake("local", {"0-MUTAG": [0.6, 0.8], "1-MUTAG": [0.5, 0.5]})
  fedstar = fake("fedstar", {"0-MUTAG": [0.8, 0.8], "1-MUTAG": [0.4, 0.4]})
  rows = comparison.comparison_table([local, fedstar], mutag2)
  assert rows[0].gain == pytest.approx(0.0) and rows[0].gain_ratio == 1.0
  # Per-client gains: 0.8 - 0.7 = +0.1 and 0.4 - 0.5 = -0.1 -> average 0, half the clients >= 0.
  assert rows[1].gain == pytest.approx(0.0, abs=1e-9) and rows[1].gain_ratio == 0.5
  assert rows[1].min_gain == pytest.approx(-10.0) and rows[0].min_gain == pytest.approx(0.0)
  assert rows[1].mean == pytest.approx(60.0) and rows[1].std == pytest.approx(0.0)
  assert rows[0].mean == pytest.approx(60.0) and rows[0].std == pytest.approx(5.0)
  assert rows[1].parameters > rows[0].parameters and rows[0].shared_parameters == 0
  assert "| fedstar | 60.00 ± 0.00 | +0.00 | 0.50 | -10.00 |" in comparison.to_markdown(rows)


def test_parameter_counts_follow_the_configured_embedding(chem_tiny):
  # The structure projection reads 32 embedding features with rw_dg (and ones), 16 with rw or dg:
  # 16 * 64 = 1024 parameters fewer, all of them in the shared structure encoder.
  counts = {e: experiment.parameter_counts(_config("fedstar", setting="chem_tiny", model=dict(embedding_type=e)),
                                           chem_tiny) for e in ("rw_dg", "rw", "dg", "ones")}
  total, shared = counts["rw_dg"]
  assert counts["rw"] == counts["dg"] == (total - 1024, shared - 1024)
  assert counts["ones"] == (total, shared)
  from tff_graph.models import classifiers  # pylint: disable=g-import-not-at-top
  width = max(c.feature_dim for c in chem_tiny.clients)
  model = classifiers.build_model(classifiers.ModelSpec(kind="decoupled", feature_dim=width, num_classes=2,
                                                        embedding_type="rw"))
  assert counts["rw"] == (model.parameter_counts()["total"], model.parameter_counts()["structure_encoder"])


def test_the_configured_backbones_build_the_model_and_count_its_parameters(chem_tiny):
  from tff_graph.models import classifiers  # pylint: disable=g-import-not-at-top
  width = max(c.feature_dim for c in chem_tiny.clients)

  def built(**spec):
    model = classifiers.build_model(classifiers.ModelSpec(kind="decoupled", feature_dim=width, num_classes=2, **spec))
    counts = model.parameter_counts()
    return counts["total"], counts["structure_encoder"]

  fedstar = experiment.parameter_counts(_config("fedstar", setting="chem_tiny"), chem_tiny)
  assert fedstar == built()  # The paper's: GIN feature encoder, GCN structure encoder.
  for b in ("gin", "sage"):  # Only the shared structure encoder changes with its backbone.
    counts = experiment.parameter_counts(_config("fedstar", setting="chem_tiny", model=dict(structure_backbone=b)),
                                         chem_tiny)
    assert counts == built(structure_backbone=b) and counts[1] != fedstar[1]
  for b in ("gcn", "sage"):  # The private feature encoder's: the shared part keeps its size.
    counts = experiment.parameter_counts(_config("fedstar", setting="chem_tiny", model=dict(backbone=b)), chem_tiny)
    assert counts == built(backbone=b) and counts[0] != fedstar[0] and counts[1] == fedstar[1]
  # FedSage is FedAvg with SAGE: --backbone=sage on fedavg builds the same model.
  assert (experiment.parameter_counts(_config("fedavg", setting="chem_tiny", model=dict(backbone="sage")), chem_tiny)
          == experiment.parameter_counts(_config("fedsage", setting="chem_tiny"), chem_tiny))
  with pytest.raises(ValueError, match="unknown structure_backbone 'gat'; choose one of gin, gcn, sage"):
    _config("fedstar", model=dict(structure_backbone="gat"))
  with pytest.raises(ValueError, match="fedavg does not use structure_backbone=gin"):
    experiment.check_options(_config("fedavg", model=dict(structure_backbone="gin")))
  experiment.check_options(_config("fedavg", model=dict(backbone="gcn")))
  plugged = experiment.Components(model_fn=lambda seed, client: None)
  with pytest.raises(ValueError, match="backbone=gcn .a plugged-in model_fn builds its own model"):
    experiment.check_options(_config("fedavg", model=dict(backbone="gcn")), plugged)


def test_runs_recorded_before_the_reference_split_were_on_the_numpy_split(tmp_path, mutag2):
  config = _config("fedavg")
  assert config.data.split == "reference"
  old = config.to_dict()
  for key in ("split", "node_features", "standardize_attributes"):
    del old["data"][key]  # config.json as written before these options existed.
  assert experiment.ExperimentConfig.from_dict(old).data.split == "numpy"
  folder = tmp_path / "run"
  folder.mkdir()
  (folder / "config.json").write_text(json.dumps(old))
  numpy_config = experiment.ExperimentConfig.from_dict(old)
  experiment.check_run_folder(folder, numpy_config)  # The same run: resumable.
  with pytest.raises(experiment.RunFolderError, match="another configuration"):
    experiment.check_run_folder(folder, config)  # Not the same graphs in each split: refused.
  # The prepared data must be the data the configuration describes.
  experiment.check_data(config, mutag2)
  with pytest.raises(ValueError, match="split: config 'numpy', data 'reference'"):
    experiment.check_data(numpy_config, mutag2)


def test_a_resumed_seed_keeps_its_client_states_where_its_checkpoints_put_them(tmp_path):
  seed = tmp_path / "seed_1"
  assert experiment.client_states_of(seed, "worker") == "worker"  # New seed: as configured.
  assert experiment.client_states_of(seed, "driver") == "driver"
  (seed / "checkpoints").mkdir(parents=True)
  (seed / "checkpoints" / "program_state_10.npz").write_bytes(b"")
  # Checkpoints holding the states themselves (no state files): continue with the states on the driver.
  assert experiment.client_states_of(seed, "worker") == "driver"
  (seed / "client_states").mkdir()
  # Checkpoints holding references to state files: continue with them, whatever is configured now.
  assert experiment.client_states_of(seed, "driver") == "worker"


def test_worker_held_states_are_built_once_by_the_builtin_builders_and_still_given_to_a_plugin(
    mutag2, tmp_path, monkeypatch):
  from tff_graph.federated import process as process_lib  # pylint: disable=g-import-not-at-top
  # Every builder ends in process.build_process; recorded here instead of built (what is built with the
  # states is worker_states_test's; here: which builds happen, with which states).
  builds = []

  def counting(**kwargs):
    builds.append(kwargs.get("worker_states"))
    return types.SimpleNamespace(worker_states=kwargs.get("worker_states"),
                                 build_arguments={k: v for k, v in kwargs.items() if k != "worker_states"})

  monkeypatch.setattr(process_lib, "build_process", counting)
  states = process_lib.WorkerStates(str(tmp_path / "states"))
  config = experiment_config("fedavg")
  for name in ("local", "fedavg", "fedprox", "fedper", "fedsage", "fedstar", "gcfl", "gcfl_plus", "gcfl_plus_dws"):
    builds.clear()
    process = experiment.build_process(experiment_config(name), mutag2, 1, worker_states=states)
    assert process.worker_states == states and builds == [states], name  # One build, with the states.
  # A user's algorithm whose builder ignores BuildContext.worker_states: rebuilt once with them.
  plugin = algorithms.AlgorithmSpec("mine", lambda c: process_lib.build_process(shared_parts=("gnn",), **c.common),
                                    shared_parts=("gnn",))
  builds.clear()
  process = experiment.build_process(config, mutag2, 1, experiment.Components(algorithm=plugin),
                                     worker_states=states)
  assert process.worker_states == states and builds == [None, states]
  # One that keeps them somewhere else is refused rather than silently used.
  elsewhere = process_lib.WorkerStates(str(tmp_path / "other"))
  stray = algorithms.AlgorithmSpec("stray", lambda c: process_lib.build_process(
      shared_parts=("gnn",), worker_states=elsewhere, **c.common), shared_parts=("gnn",))
  with pytest.raises(process_lib.ProcessError, match="other"):
    experiment.build_process(config, mutag2, 1, experiment.Components(algorithm=stray), worker_states=states)
