"""The heterogeneity program on a small real setting, with a GCFL run folder's clusters."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

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
  within = (out / "within_clusters.csv").read_text().splitlines()
  assert within[0] == "seed,measure,within_clusters,all_clients,clusters"
  seed, measure, w, a = within[1].split(",")[:4]
  assert (seed, measure) == ("seed_1", "structure")
  assert abs(float(w) - matrix[0][1]) < 1e-4  # The only within-cluster pair.
  assert abs(float(a) - sum(matrix[i][j] for i in range(3) for j in range(i + 1, 3)) / 3) < 2e-4
