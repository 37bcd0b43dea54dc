"""Result tables from a fixture of run folders: merging seeds, the papers' aggregate, errors."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from data_prep import cache
from tff_graph import anchors
from tff_graph import experiment
from tff_graph import results

REPO = pathlib.Path(__file__).resolve().parents[2]
SETTING = "MUTAG:2"
CLIENTS = ("0-MUTAG", "1-MUTAG")


def _run(folder: pathlib.Path, algorithm: str, seed: int, accuracies, *, best=None, spent=None,
         **overrides) -> None:
  flat = dict(algorithm=algorithm, setting=SETTING, rounds=200, seeds=[seed], **overrides)
  folder.mkdir(parents=True)
  if overrides.pop("legacy", False):  # A run folder written before the configuration tree.
    flat.pop("legacy")
    (folder / "config.json").write_text(json.dumps(flat))
  else:
    (folder / "config.json").write_text(experiment.ExperimentConfig.from_dict(flat).to_json())
  final = {cid: {"test_accuracy": a, "val_accuracy": 0.5} for cid, a in zip(CLIENTS, accuracies)}
  gcfl = None if best is None else {"best_snapshot_accuracy": dict(zip(CLIENTS, best))}
  (folder / f"seed_{seed}").mkdir()
  record = {"final": final, "curve": [[200, sum(accuracies) / 2]], "gcfl": gcfl}
  if spent is not None:  # As run_seed records a DP run: epsilon at delta after all rounds.
    record["privacy"] = {"epsilon": spent, "delta": 1e-3, "noise_multiplier": overrides["dp_noise_multiplier"],
                         "clip": overrides["dp_clip"], "rounds": 200}
  (folder / f"seed_{seed}" / "final.json").write_text(json.dumps(record, allow_nan=True))


@pytest.fixture
def two_seed_folders(tmp_path):
  """Two comparison folders, one per seed (as the results were run), plus an unfinished seed."""
  a, b = tmp_path / "seed1", tmp_path / "seed2"
  _run(a / "local", "local", 1, [0.8, 0.5])
  _run(b / "local", "local", 2, [0.6, 0.7])
  _run(a / "fedavg", "fedavg", 1, [0.9, 0.5])
  _run(b / "fedavg", "fedavg", 2, [0.7, 0.5])
  _run(a / "gcfl", "gcfl", 1, [0.6, 0.6], best=[0.7, 0.8])
  _run(b / "gcfl", "gcfl", 2, [0.6, 0.6], best=[0.9, 0.8], legacy=True)
  _run(a / "fedstar_rw", "fedstar", 1, [0.75, 0.75], embedding_type="rw")
  unfinished = tmp_path / "seed3" / "fedavg"
  unfinished.mkdir(parents=True)
  (unfinished / "config.json").write_text(experiment.ExperimentConfig.from_dict(
      dict(algorithm="fedavg", setting=SETTING, rounds=200, seeds=(3,))).to_json())
  return [a, b, tmp_path / "seed3"]


@pytest.fixture(scope="module")
def mutag2(data_dir, cache_dir):
  return cache.prepare_setting(SETTING, data_dir=data_dir, cache_dir=cache_dir)


def test_seeds_are_merged_and_aggregated_as_the_papers_do(two_seed_folders, mutag2, tmp_path):
  loaded = results.load_results(two_seed_folders)
  paper = {"fedavg": (60.0, 1.0), "local": (70.0, None)}
  rows = {r.label: r for r in results.results_table(loaded, mutag2, paper)}
  assert list(rows) == ["fedavg", "local", "fedstar emb=rw", "gcfl"]  # Paper's order, then the table's.
  local, fedavg, gcfl = rows["local"], rows["fedavg"], rows["gcfl"]
  # local: client means 0.7 and 0.6, stds 0.1 and 0.1 (the unfinished seed 3 is left out).
  assert local.seeds == (1, 2) and fedavg.seeds == (1, 2)
  assert local.mean == pytest.approx(65.0) and local.std == pytest.approx(10.0)
  # fedavg: client means 0.8 and 0.5, stds 0.1 and 0: gains +10 and -10 points.
  assert fedavg.mean == pytest.approx(65.0) and fedavg.std == pytest.approx(5.0)
  assert fedavg.gain == pytest.approx(0.0) and fedavg.gain_ratio == pytest.approx(0.5)
  assert fedavg.min_gain == pytest.approx(-10.0) and local.min_gain == pytest.approx(0.0)
  assert fedavg.paper_mean == 60.0 and fedavg.diff == pytest.approx(5.0)
  assert local.diff == pytest.approx(-5.0) and local.paper_std is None
  assert gcfl.best_mean == pytest.approx(80.0) and gcfl.best_std == pytest.approx(5.0)
  assert local.best_mean is None and rows["fedstar emb=rw"].seeds == (1,)
  assert rows["fedstar emb=rw"].paper_mean is None
  # A one-seed row is compared with local's same seed (0.8, 0.5): gains -5 and +25 points, one client
  # below local (against local's two-seed means 0.7 and 0.6 both clients would look above it).
  assert rows["fedstar emb=rw"].gain == pytest.approx(10.0)
  assert rows["fedstar emb=rw"].gain_ratio == pytest.approx(0.5)
  assert rows["fedstar emb=rw"].min_gain == pytest.approx(-5.0)
  # FedStar's model is bigger and shares less than FedAvg's.
  assert rows["fedstar emb=rw"].parameters > fedavg.parameters
  assert 0 < rows["fedstar emb=rw"].shared_parameters < fedavg.shared_parameters
  assert local.shared_parameters == 0

  results.write(tmp_path / "table", list(rows.values()), loaded)
  csv = (tmp_path / "table" / "table.csv").read_text().splitlines()
  assert csv[0].startswith("algorithm,seeds,mean,std,best_snapshot_mean,best_snapshot_std,paper_mean,paper_std,"
                           "diff,gain,gain_ratio,min_gain,parameters,")
  assert csv[1].startswith("fedavg,1 2,65.00,5.00,,,60.00,1.00,5.00,0.00,0.50,-10.00,")
  md = (tmp_path / "table" / "table.md").read_text()
  assert "| gcfl | 1,2 | 60.00 ± 0.00 | 80.00 ± 5.00 |" in md
  assert "| fedavg | 1,2 | 65.00 ± 5.00 |  | 60.00 ± 1.00 | +5.00 | +0.00 | 0.50 | -10.00 |" in md
  per_client = (tmp_path / "table" / "per_client_local.csv").read_text().splitlines()
  assert per_client == ["client,seed_1,seed_2,mean,std", "0-MUTAG,0.8000,0.6000,0.7000,0.1000",
                        "1-MUTAG,0.5000,0.7000,0.6000,0.1000"]
  assert (tmp_path / "table" / "per_client_fedstar_emb_rw.csv").is_file()


def test_same_seeds_compares_every_row_on_the_seeds_all_have(two_seed_folders, mutag2):
  loaded = results.load_results(two_seed_folders)
  rows = {r.label: r for r in results.results_table(results.same_seeds(loaded), mutag2)}
  # fedstar emb=rw has only seed 1: every row is cut to seed 1 (local: 0.8, 0.5 -> 65 ± 0; fedavg 70).
  assert {r.seeds for r in rows.values()} == {(1,)}
  assert rows["local"].mean == pytest.approx(65.0) and rows["local"].std == pytest.approx(0.0)
  assert rows["fedavg"].mean == pytest.approx(70.0) and rows["gcfl"].best_mean == pytest.approx(75.0)
  assert [len(r.seeds) for r in loaded] != [1] * len(loaded)  # The loaded results are not changed.
  later = two_seed_folders[0].parent / "seed9" / "fedsage"
  _run(later, "fedsage", 9, [0.5, 0.5])
  with pytest.raises(results.ResultsError, match=r"no seed is finished in every row \(.*fedsage: 9"):
    results.same_seeds(results.load_results(two_seed_folders + [later]))


def test_private_runs_get_their_own_rows_with_the_epsilon_spent_and_a_plot(mutag2, tmp_path):
  for seed, accuracies in ((1, [0.8, 0.6]), (2, [0.6, 0.6])):
    _run(tmp_path / f"s{seed}" / "plain", "fedstar", seed, accuracies)
    _run(tmp_path / f"s{seed}" / "z1", "fedstar", seed, [a - 0.1 for a in accuracies], spent=12.5,
         dp_noise_multiplier=1.0, dp_clip=0.1, dp_delta=1e-3)
    _run(tmp_path / f"s{seed}" / "z0", "fedstar", seed, accuracies, spent=float("inf"), dp_noise_multiplier=0.0,
         dp_clip=0.1, dp_delta=1e-3)
    _run(tmp_path / f"s{seed}" / "sec", "fedstar", seed, accuracies, secure_aggregation=True)
    for z, spent in ((4.0, 3.5), (16.0, 0.9)):
      _run(tmp_path / f"s{seed}" / f"z{z:g}", "fedstar", seed, [0.5, 0.5], spent=spent, dp_noise_multiplier=z,
           dp_clip=0.1, dp_delta=1e-3)
  loaded = results.load_results([tmp_path / "s1", tmp_path / "s2"])
  table = results.results_table(loaded, mutag2)
  # Noise multipliers in numeric order (z=16 after z=4, not before it as text would sort).
  assert [r.label for r in table] == ["fedstar", "fedstar dp z=0 clip=0.1", "fedstar dp z=1 clip=0.1",
                                      "fedstar dp z=4 clip=0.1", "fedstar dp z=16 clip=0.1", "fedstar secagg"]
  rows = {r.label: r for r in table if r.label not in ("fedstar dp z=4 clip=0.1", "fedstar dp z=16 clip=0.1")}
  assert set(rows) == {"fedstar", "fedstar dp z=1 clip=0.1", "fedstar dp z=0 clip=0.1", "fedstar secagg"}
  assert rows["fedstar dp z=1 clip=0.1"].epsilon == 12.5 and rows["fedstar dp z=1 clip=0.1"].delta == 1e-3
  assert rows["fedstar dp z=1 clip=0.1"].mean == pytest.approx(rows["fedstar"].mean - 10.0)
  assert rows["fedstar dp z=0 clip=0.1"].epsilon == float("inf")
  assert rows["fedstar"].epsilon is None and rows["fedstar secagg"].epsilon is None
  results.write(tmp_path / "table", list(rows.values()), loaded)
  md = (tmp_path / "table" / "table.md").read_text()
  assert "| 12.50 (δ=0.001) |" in md and "| inf (δ=0.001) |" in md
  csv = (tmp_path / "table" / "table.csv").read_text().splitlines()
  assert csv[0].endswith(",split,epsilon,delta")
  assert any(line.startswith("fedstar dp z=1 clip=0.1,") and line.endswith(",12.5000,0.001") for line in csv)
  assert (tmp_path / "table" / "per_client_fedstar_dp_z_1_clip_0.1.csv").is_file()
  assert (tmp_path / "table" / "privacy.png").stat().st_size > 10_000
  # Seeds that disagree on the privacy spent cannot share a row.
  _run(tmp_path / "s3" / "z1", "fedstar", 3, [0.5, 0.5], spent=99.0, dp_noise_multiplier=1.0, dp_clip=0.1,
       dp_delta=1e-3)
  with pytest.raises(results.ResultsError, match="different privacy spent"):
    results.results_table(results.load_results([tmp_path / "s1", tmp_path / "s3"]), mutag2)


def test_runs_that_do_not_belong_in_one_table_are_refused(tmp_path):
  _run(tmp_path / "a" / "fedavg", "fedavg", 1, [0.5, 0.5])
  _run(tmp_path / "b" / "fedavg", "fedavg", 1, [0.6, 0.6])
  with pytest.raises(results.ResultsError, match="fedavg seed 1 is in both"):
    results.load_results([tmp_path / "a", tmp_path / "b"])
  _run(tmp_path / "c" / "fedavg", "fedavg", 2, [0.6, 0.6], learning_rate=0.01)
  with pytest.raises(results.ResultsError, match="another configuration.*learning_rate"):
    results.load_results([tmp_path / "a", tmp_path / "c"])
  (tmp_path / "d").mkdir()
  with pytest.raises(results.ResultsError, match="neither a run folder"):
    results.load_results([tmp_path / "d"])
  bad = tmp_path / "e" / "x"
  bad.mkdir(parents=True)
  (bad / "config.json").write_text('{"algorithm": "fedfoo"}')
  with pytest.raises(results.ResultsError, match="not a tff-graph run configuration"):
    results.load_results([tmp_path / "e"])


def test_model_and_training_variants_get_their_own_rows_beside_the_papers_numbers(tmp_path):
  _run(tmp_path / "s1" / "fedstar", "fedstar", 1, [0.8, 0.6])
  _run(tmp_path / "s1" / "e2", "fedstar", 1, [0.7, 0.6], local_epochs=2)
  _run(tmp_path / "s1" / "feature_gcn", "fedstar", 1, [0.6, 0.6], backbone="gcn")
  _run(tmp_path / "s1" / "structure_gin", "fedstar", 1, [0.5, 0.6], structure_backbone="gin", local_epochs=3)
  labels = {results.row_label(r.config): r for r in results.load_results([tmp_path / "s1"])}
  assert set(labels) == {"fedstar", "fedstar epochs=2", "fedstar backbone=gcn", "fedstar structure=gin epochs=3"}
  assert labels["fedstar structure=gin epochs=3"].per_client() == {"0-MUTAG": [0.5], "1-MUTAG": [0.6]}
  assert results.file_label("fedstar structure=gin epochs=3") == "fedstar_structure_gin_epochs_3"
  # The paper's local-epochs study (CHEM) is set beside the rows of the same label.
  chem = anchors.lookup("fedstar", "chem")
  assert chem["fedavg epochs=2"] == (76.59, None) and chem["gcfl epochs=3"] == (75.88, None)
  assert chem["fedstar epochs=4"] == (80.58, None)


def test_anchors_hold_the_papers_numbers():
  assert anchors.lookup("fedstar", "chem")["fedstar"] == (79.79, 2.44)
  assert anchors.lookup("fedstar", "biochem")["fedstar_share_none"] == (74.08, None)
  assert anchors.lookup("fedstar", "biochem")["fedstar emb=ones"] == (69.51, None)
  assert anchors.lookup("gcfl", "molecules")["gcfl_plus"] == (74.35, None)
  with pytest.raises(KeyError, match="no published numbers for fedstar:chem_tiny"):
    anchors.lookup("fedstar", "chem_tiny")


def test_tables_program(two_seed_folders, data_dir, cache_dir, tmp_path):
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  out = tmp_path / "out"
  cmd = [sys.executable, "-m", "programs.tables", f"--runs={','.join(map(str, two_seed_folders[:2]))}",
         f"--output_dir={out}", f"--data_dir={data_dir}", f"--cache_dir={cache_dir}"]
  proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "| local | 1,2 | 65.00 ± 10.00 |" in proc.stdout
  assert (out / "table.md").read_text().strip() == proc.stdout.strip()
  assert proc.stdout.strip().endswith(results.SPLIT_NOTE["numpy"])  # Runs recorded before the split option.
  bad = subprocess.run(cmd[:4] + [f"--output_dir={tmp_path / 'bad'}", "--paper=gcfl"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
  assert bad.returncode == 2 and "no published numbers for gcfl:MUTAG:2" in bad.stderr
  assert not (tmp_path / "bad").exists()
  fair = subprocess.run(cmd[:4] + [f"--output_dir={tmp_path / 'fair'}", "--same_seeds"] + cmd[5:], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=300)
  assert fair.returncode == 0, fair.stderr[-2000:]
  assert "| local | 1 | 65.00 ± 0.00 |" in fair.stdout  # Cut to fedstar emb=rw's only seed.
