"""The papers' figures from a fixture of run folders: what is plotted, and bad input."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tff_graph import experiment
from tff_graph import figures

REPO = pathlib.Path(__file__).resolve().parents[2]
CLIENTS = ("0-MUTAG", "1-MUTAG")


def _write_csv(path: pathlib.Path, rows: list[dict]) -> None:
  keys = list(rows[0])
  path.write_text("\n".join([",".join(keys)] + [",".join(str(r[k]) for k in keys) for r in rows]) + "\n")


def _run(folder: pathlib.Path, algorithm: str, seed: int, curve: dict[int, float], final, *, splits=None,
         setting="MUTAG:2", split="reference"):
  folder.mkdir(parents=True)
  (folder / "config.json").write_text(experiment.ExperimentConfig.from_dict(
      dict(algorithm=algorithm, setting=setting, split=split, rounds=30, seeds=[seed])).to_json())
  s = folder / f"seed_{seed}"
  s.mkdir()
  gcfl = None if splits is None else {"splits": splits, "best_snapshot_accuracy": {}}
  clients = CLIENTS if len(final) == 2 else [f"{i}-MUTAG" for i in range(len(final))]
  (s / "final.json").write_text(json.dumps({"final": {c: {"test_accuracy": a} for c, a in zip(clients, final)},
                                            "curve": [], "gcfl": gcfl}))
  eval_rows = [{"round": r, "average/test_accuracy": a, "average/test_loss": 1 - a} for r, a in curve.items()]
  _write_csv(s / "eval_metrics.csv", eval_rows)
  train_rows = [{"round": r, **{f"{c}/last_grad_norm": (i + 1) * r for i, c in enumerate(CLIENTS)},
                 "server/train/train_loss": 0.1} for r in range(1, 31)]
  _write_csv(s / "train_metrics.csv", train_rows)
  return s


@pytest.fixture
def runs(tmp_path):
  a, b = tmp_path / "seed1", tmp_path / "seed2"
  _run(a / "fedavg", "fedavg", 1, {10: 0.5, 20: 0.6, 30: 0.7}, [0.7, 0.7])
  _run(b / "fedavg", "fedavg", 2, {10: 0.7, 20: 0.8, 30: 0.9}, [0.9, 0.5])
  gcfl = _run(a / "gcfl", "gcfl", 1, {10: 0.6, 20: 0.6, 30: 0.6}, [0.6, 0.6],
              splits=[{"round": 21, "into": [["0-MUTAG"], ["1-MUTAG"]]}])
  # A resumed run released rounds 20-30 again: the last release of a round counts, and seed 2 of
  # gcfl evaluated only at round 30 (rounds not evaluated by every seed are left out).
  with open(gcfl / "eval_metrics.csv", "a") as f:
    f.write("20,0.65,0.35\n")
  _run(b / "gcfl", "gcfl", 2, {30: 0.8}, [0.8, 0.8])
  return [a, b], gcfl


def test_convergence_is_the_mean_and_std_over_seeds_per_round(runs, tmp_path):
  folders, _ = runs
  series = figures.convergence(folders, tmp_path / "c.png")
  np.testing.assert_array_equal(series["fedavg"]["round"], [10, 20, 30])
  np.testing.assert_allclose(series["fedavg"]["mean"], [0.6, 0.7, 0.8])
  np.testing.assert_allclose(series["fedavg"]["std"], [0.1, 0.1, 0.1])
  np.testing.assert_array_equal(series["gcfl"]["round"], [30])
  np.testing.assert_allclose(series["gcfl"]["mean"], [0.7])
  assert (tmp_path / "c.png").stat().st_size > 10_000
  loss = figures.convergence([folders[0]], tmp_path / "l.png", metric="average/test_loss")
  np.testing.assert_allclose(loss["gcfl"]["mean"], [0.4, 0.35, 0.4])  # Round 20 as released last.


def test_gradient_norms_and_violins(runs, tmp_path):
  folders, gcfl = runs
  drawn = figures.gradient_norms(gcfl, tmp_path / "g.png")
  assert drawn["splits"] == [(21, [1, 1])]
  np.testing.assert_array_equal(drawn["norms"]["1-MUTAG"][:3], [2, 4, 6])
  data = figures.violins(folders, tmp_path / "v.png")
  np.testing.assert_allclose(data["fedavg"], [80.0, 60.0])  # Per client, mean over seeds 1 and 2.
  with pytest.raises(figures.FigureError, match="not a run of the GCFL family"):
    figures.gradient_norms(folders[0] / "fedavg" / "seed_1", tmp_path / "x.png")
  with pytest.raises(figures.FigureError, match="neither a run folder"):
    figures.violins([tmp_path / "seed1" / "fedavg" / "seed_1"], tmp_path / "x.png")
  (folders[0] / "fedavg" / "seed_1" / "final.json").unlink()  # An unfinished seed is not drawn.
  with pytest.raises(figures.FigureError, match="no finished seed"):
    figures.violins([folders[0] / "fedavg"], tmp_path / "x.png")


def test_figures_program(runs, tmp_path):
  folders, gcfl = runs
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  run = lambda *flags: subprocess.run([sys.executable, "-m", "programs.figures", *flags], cwd=REPO, env=env,
                                      capture_output=True, text=True, timeout=300)
  ok = run("--kind=convergence", f"--runs={folders[0]},{folders[1]}", f"--output={tmp_path / 'f' / 'c.png'}")
  assert ok.returncode == 0, ok.stderr[-2000:]
  assert "fedavg: seeds 1,2, round 30: 0.8000 ± 0.1000" in ok.stdout
  assert (tmp_path / "f" / "c.png").is_file()
  bad = run("--kind=gradient_norms", f"--runs={folders[0]}", f"--output={tmp_path / 'g' / 'g.png'}")
  assert bad.returncode == 2 and "error:" in bad.stderr
  assert list((tmp_path / "g").iterdir()) == []  # Nothing half-written.
  flat = run("--kind=scaling", f"--runs={folders[0]},{folders[1]}", f"--output={tmp_path / 'g' / 's.png'}")
  assert flat.returncode == 2 and "every run has 2 clients" in flat.stderr  # One client count: no curve.
  assert list((tmp_path / "g").iterdir()) == []


def test_scaling_is_the_average_over_clients_against_the_client_count(tmp_path):
  curve = {30: 0.5}
  for seed, (two, four) in {1: ([0.6, 0.8], [0.5, 0.5, 0.6, 0.6]), 2: ([0.8, 0.8], [0.7, 0.7, 0.8, 0.8])}.items():
    _run(tmp_path / f"seed{seed}" / "k2" / "fedavg", "fedavg", seed, curve, two)
    _run(tmp_path / f"seed{seed}" / "k4" / "fedavg", "fedavg", seed, curve, four, setting="MUTAG:4")
  _run(tmp_path / "seed3" / "k4" / "fedavg", "fedavg", 3, curve, [0.9] * 4, setting="MUTAG:4")
  folders = [tmp_path / f"seed{s}" / k for s in (1, 2) for k in ("k2", "k4")] + [tmp_path / "seed3" / "k4"]
  series = figures.scaling(folders, tmp_path / "s.png")
  np.testing.assert_array_equal(series["fedavg"]["clients"], [2, 4])
  # Per seed the average over its clients (70, 80 at 2 clients; 55, 75, 90 at 4), then mean and std.
  np.testing.assert_allclose(series["fedavg"]["mean"], [75.0, 220 / 3])
  np.testing.assert_allclose(series["fedavg"]["std"], [5.0, np.std([55, 75, 90])])
  np.testing.assert_array_equal(series["fedavg"]["seeds"], [2, 3])
  assert (tmp_path / "s.png").stat().st_size > 10_000
  with pytest.raises(figures.FigureError, match="needs runs of the same data split over different numbers"):
    figures.scaling([tmp_path / "seed1" / "k2"], tmp_path / "x.png")
  _run(tmp_path / "other" / "fedavg", "fedavg", 1, curve, [0.5] * 3, setting="BZR:3")
  with pytest.raises(figures.FigureError, match="same data over more clients, but") as e:
    figures.scaling(folders + [tmp_path / "other"], tmp_path / "x.png")
  assert "BZR (reference split)" in str(e.value) and "MUTAG (reference split)" in str(e.value)
  _run(tmp_path / "numpy" / "fedavg", "fedavg", 1, curve, [0.5] * 3, setting="MUTAG:3", split="numpy")
  with pytest.raises(figures.FigureError, match="MUTAG .numpy split."):
    figures.scaling(folders + [tmp_path / "numpy"], tmp_path / "x.png")
