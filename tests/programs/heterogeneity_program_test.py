"""The heterogeneity program on a small real setting, with a GCFL run folder's clusters."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from tff_graph import experiment

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_program_writes_tables_heatmaps_and_within_cluster_numbers(data_dir, cache_dir, tmp_path):
  run = tmp_path / "run" / "seed_1"
  run.mkdir(parents=True)
  clusters = [["0-MUTAG", "1-MUTAG"], ["2-MUTAG"]]
  (run / "final.json").write_text(json.dumps({"final": {}, "curve": [], "gcfl": {"clusters": clusters}}))
  out = tmp_path / "out"
  cmd = [sys.executable, "-m", "programs.heterogeneity", "--setting=MUTAG:3", "--graphs_per_client=10",
         "--num_walks=50", f"--run_dir={tmp_path / 'run'}", f"--output_dir={out}", f"--data_dir={data_dir}",
         f"--cache_dir={cache_dir}"]
  proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  for name in ("properties.csv", "properties.md", "structure.csv", "feature.csv", "summary.md",
               "heatmap_structure.png", "heatmap_feature.png", "within_clusters.csv"):
    assert (out / name).is_file(), name
  rows = (out / "structure.csv").read_text().splitlines()
  assert rows[0] == "client,0-MUTAG,1-MUTAG,2-MUTAG" and len(rows) == 4
  matrix = [[float(v) for v in r.split(",")[1:]] for r in rows[1:]]
  assert all(matrix[i][j] == matrix[j][i] for i in range(3) for j in range(3))
  # Shards of one dataset: the summary compares a client with itself and with the other clients.
  diagonal, between = sum(matrix[i][i] for i in range(3)) / 3, (matrix[0][1] + matrix[0][2] + matrix[1][2]) / 3
  summary = (out / "summary.md").read_text()
  assert "| measure | within a client | between clients |" in summary
  assert any(abs(float(r.split("|")[2]) - diagonal) < 1e-3 and abs(float(r.split("|")[3]) - between) < 1e-3
             for r in summary.splitlines() if r.startswith("| structure |")), summary
  within = (out / "within_clusters.csv").read_text().splitlines()
  assert within[0] == "algorithm,seed,measure,within_clusters,all_clients,clusters"
  algorithm, seed, measure, w, a = within[1].split(",")[:5]
  assert (algorithm, seed, measure) == ("run", "seed_1", "structure")  # No config.json: the folder's name.
  assert abs(float(w) - matrix[0][1]) < 1e-4  # The only within-cluster pair.
  assert abs(float(a) - sum(matrix[i][j] for i in range(3) for j in range(i + 1, 3)) / 3) < 2e-4


def _gcfl_run(folder: pathlib.Path, algorithm: str, seed: int, clusters, setting="MUTAG:3") -> None:
  (folder / f"seed_{seed}").mkdir(parents=True)
  (folder / "config.json").write_text(experiment.ExperimentConfig.from_dict(
      dict(algorithm=algorithm, setting=setting, seeds=[seed])).to_json())
  (folder / f"seed_{seed}" / "final.json").write_text(
      json.dumps({"final": {}, "curve": [], "gcfl": {"clusters": clusters}}))


def test_runs_of_several_algorithms_and_seeds_are_summarised_and_bad_runs_refused(data_dir, cache_dir, tmp_path):
  runs = tmp_path / "runs"
  _gcfl_run(runs / "s1" / "gcfl", "gcfl", 1, [["0-MUTAG", "1-MUTAG"], ["2-MUTAG"]])
  _gcfl_run(runs / "s2" / "gcfl", "gcfl", 2, [["0-MUTAG", "2-MUTAG"], ["1-MUTAG"]])
  _gcfl_run(runs / "s1" / "gcfl_plus", "gcfl_plus", 1, [["0-MUTAG"], ["1-MUTAG", "2-MUTAG"]])
  out = tmp_path / "out"
  base = [sys.executable, "-m", "programs.heterogeneity", "--setting=MUTAG:3", "--graphs_per_client=10",
          "--num_walks=50", f"--data_dir={data_dir}", f"--cache_dir={cache_dir}"]
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  run = lambda *a: subprocess.run([*base, *a], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  proc = run(f"--run_dir={runs / 's1' / 'gcfl'},{runs / 's2' / 'gcfl'},{runs / 's1' / 'gcfl_plus'}",
             f"--output_dir={out}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  m = [[float(v) for v in r.split(",")[1:]] for r in (out / "structure.csv").read_text().splitlines()[1:]]
  rows = [r.split(",") for r in (out / "within_clusters.csv").read_text().splitlines()[1:]]
  structure = {(r[0], r[1]): float(r[3]) for r in rows if r[2] == "structure"}
  assert structure.keys() == {("gcfl", "seed_1"), ("gcfl", "seed_2"), ("gcfl_plus", "seed_1")}
  assert abs(structure[("gcfl", "seed_2")] - m[0][2]) < 1e-4 and abs(structure[("gcfl_plus", "seed_1")] - m[1][2]) < 1e-4
  mean = (m[0][1] + m[0][2]) / 2  # gcfl over its two seeds, in the summary table.
  assert f"| gcfl | structure | 2 | {mean:.3f} ± " in (out / "within_clusters.md").read_text()
  assert (out / "within_clusters.png").stat().st_size > 0
  # A run on another setting, or without clusters, is one error, exit 2, and nothing written.
  _gcfl_run(runs / "other", "gcfl", 1, [["0-MUTAG", "1-MUTAG"]], setting="MUTAG:2")
  bad = run(f"--run_dir={runs / 'other'}", f"--output_dir={tmp_path / 'bad'}")
  assert bad.returncode == 2 and "is a run on MUTAG:2, not --setting=MUTAG:3" in bad.stderr
  _gcfl_run(runs / "stranger", "gcfl", 1, [["0-MUTAG", "7-PTC_MR"]])
  bad = run(f"--run_dir={runs / 'stranger'}", f"--output_dir={tmp_path / 'bad'}")
  assert bad.returncode == 2 and "clients ['7-PTC_MR'] are not clients of MUTAG:3" in bad.stderr
  (runs / "fedavg" / "seed_1").mkdir(parents=True)
  (runs / "fedavg" / "seed_1" / "final.json").write_text(json.dumps({"final": {}, "curve": [], "gcfl": None}))
  bad = run(f"--run_dir={runs / 'fedavg'}", f"--output_dir={tmp_path / 'bad'}")
  assert bad.returncode == 2 and "has no clusters (not a GCFL-family run)" in bad.stderr
  assert not (tmp_path / "bad").exists()
