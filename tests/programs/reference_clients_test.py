"""Per-client comparison with the papers' code's output, on a fixture of both sides' files."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.programs.tables_test import _run
from tff_graph import experiment
from tff_graph import reference_runs
from tff_graph import results

REPO = pathlib.Path(__file__).resolve().parents[2]


def _reference(folder: pathlib.Path, seed: int, accuracies: dict[str, float], tests: dict[str, int],
               algorithm: str = "fedstar_rw_dg") -> None:
  """As the papers' code writes a finished seed: the accuracy CSV (pandas index = client) and the stats."""
  raw = folder / f"seed{seed}" / "raw" / "group"
  raw.mkdir(parents=True)
  (raw / f"accuracy_{algorithm}_GC.csv").write_text(
      ",test_acc\n" + "".join(f"{c},{a}\n" for c, a in accuracies.items()))
  (raw / "stats_trainData.csv").write_text(",#graphs_train,#graphs_test\n" + "".join(
      f"{c},{4 * n}.0,{n}.0\n" for c, n in tests.items()))


@pytest.fixture
def both_sides(tmp_path):
  ours = tmp_path / "ours"
  _run(ours / "seed1", "fedstar", 1, [0.8, 0.5], split="reference")
  _run(ours / "seed2", "fedstar", 2, [0.6, 0.7], split="reference")
  _run(ours / "seed3", "fedstar", 3, [0.1, 0.1], split="reference")  # Not run on the reference side.
  theirs = tmp_path / "theirs"
  tests = {"0-MUTAG": 10, "1-MUTAG": 20}
  _reference(theirs, 1, {"0-MUTAG": 0.7, "1-MUTAG": 0.5}, tests)
  _reference(theirs, 2, {"0-MUTAG": 0.5, "1-MUTAG": 0.6}, tests)
  (theirs / "seed4" / "raw" / "group").mkdir(parents=True)  # Unfinished: no accuracy CSV yet.
  return ours, theirs


def test_clients_are_compared_on_the_seeds_both_sides_finished(both_sides):
  ours, theirs = both_sides
  loaded = results.load_results([ours])
  reference = reference_runs.load_reference(theirs, "fedstar_rw_dg")
  assert sorted(reference.accuracy) == [1, 2] and reference.test_graphs == {"0-MUTAG": 10, "1-MUTAG": 20}
  seeds, rows = reference_runs.compare_clients(loaded[0], reference)
  assert seeds == (1, 2)  # Our seed 3 has no counterpart.
  a, b = rows
  assert a.client == "0-MUTAG" and a.ours == pytest.approx((80.0, 60.0)) and a.theirs == pytest.approx((70.0, 50.0))
  assert a.diff == pytest.approx(10.0) and a.diff_graphs == pytest.approx(1.0)  # 10 points of 10 test graphs.
  assert b.diff == pytest.approx(5.0) and b.diff_graphs == pytest.approx(1.0)
  md = reference_runs.to_markdown(seeds, rows)
  assert "| 0-MUTAG | 10 | 70.00 ± 10.00 | 60.00 ± 10.00 | +10.00 | +1.0 |" in md
  assert md.splitlines()[-1] == "| average | | 65.00 | 57.50 | +7.50 | |"


def test_dataset_named_clients_pair_with_ours_and_mismatches_are_refused(both_sides, tmp_path):
  ours, _ = both_sides
  loaded = results.load_results([ours])[0]
  # Multi-dataset groups: the reference names clients by dataset; ours are "<i>-<dataset>".
  named = tmp_path / "named"
  _reference(named, 1, {"MUTAG": 0.7, "PTC_MR": 0.5}, {"MUTAG": 10, "PTC_MR": 20})
  by_name = reference_runs.load_reference(named, "fedstar_rw_dg")
  group = experiment.ExperimentResult(loaded.config, [experiment.SeedResult(
      1, {"0-MUTAG": {"test_accuracy": 0.9}, "1-PTC_MR": {"test_accuracy": 0.4}}, [], None, None)])
  _, rows = reference_runs.compare_clients(group, by_name)
  assert [(r.client, r.test_graphs, r.theirs) for r in rows] == [("0-MUTAG", 10, (70.0,)), ("1-PTC_MR", 20, (50.0,))]
  # Two of our clients on one dataset cannot both be the reference's "MUTAG".
  with pytest.raises(reference_runs.ReferenceError, match="do not pair one to one"):
    reference_runs.compare_clients(loaded, by_name)
  bad = tmp_path / "bad"
  _reference(bad, 1, {"0-MUTAG": "n/a", "1-MUTAG": 0.5}, {"0-MUTAG": 10, "1-MUTAG": 20})
  with pytest.raises(reference_runs.ReferenceError, match="client '0-MUTAG' has no numeric 'test_acc'"):
    reference_runs.load_reference(bad, "fedstar_rw_dg")
  with pytest.raises(reference_runs.ReferenceError, match="no finished seed of 'fedavg'"):
    reference_runs.load_reference(named, "fedavg")
  other = tmp_path / "other"
  _reference(other, 1, {"0-MUTAG": 0.7, "1-MUTAG": 0.5}, {"0-MUTAG": 10, "1-MUTAG": 20})
  _reference(other, 2, {"0-MUTAG": 0.7, "1-MUTAG": 0.5}, {"0-MUTAG": 11, "1-MUTAG": 20})
  with pytest.raises(reference_runs.ReferenceError, match="other test sets"):
    reference_runs.load_reference(other, "fedstar_rw_dg")


def test_program_writes_the_table_and_refuses_runs_on_another_split(both_sides, tmp_path):
  ours, theirs = both_sides
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  out = tmp_path / "out" / "vs.md"
  cmd = [sys.executable, "-m", "programs.reference_clients", f"--runs={ours}", f"--reference={theirs}",
         "--reference_algorithm=fedstar_rw_dg"]
  proc = subprocess.run(cmd + [f"--output={out}"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert out.read_text() == proc.stdout and "| 1-MUTAG | 20 | 60.00 ± 10.00 | 55.00 ± 5.00 | +5.00 | +1.0 |" in out.read_text()
  numpy_runs = tmp_path / "numpy"
  _run(numpy_runs / "seed1", "fedstar", 1, [0.8, 0.5])  # Recorded without a split: the NumPy split.
  bad = subprocess.run([*cmd[:3], f"--runs={numpy_runs}", *cmd[4:], f"--output={tmp_path / 'no.md'}"], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=300)
  assert bad.returncode == 2 and "the runs use the numpy split" in bad.stderr
  assert not (tmp_path / "no.md").exists()


def test_gcfl_repo_layout_is_found_and_compared_with_our_best_snapshots(tmp_path):
  """The GCFL repo nests its CSVs deeper and reports each client's best snapshot, not the final round."""
  ours = tmp_path / "ours"
  _run(ours / "seed10", "gcfl", 10, [0.5, 0.6], best=[0.8, 0.9], split="reference")
  theirs = tmp_path / "theirs"
  nested = theirs / "seed10" / "raw" / "multiDS-nonOverlap" / "molecules" / "eps_0.07_0.28"
  nested.mkdir(parents=True)
  (nested / "accuracy_gcfl_GC.csv").write_text(",test_acc\n0-MUTAG,0.7\n1-MUTAG,0.7\n")
  (nested / "stats_trainData.csv").write_text(",#graphs_train,#graphs_test\n0-MUTAG,40.0,10.0\n1-MUTAG,80.0,20.0\n")
  reference = reference_runs.load_reference(theirs, "gcfl")
  assert reference.accuracy == {10: {"0-MUTAG": 0.7, "1-MUTAG": 0.7}}
  loaded = results.load_results([ours])[0]
  _, best = reference_runs.compare_clients(loaded, reference, "best_snapshot")
  assert [r.ours for r in best] == [pytest.approx((80.0,)), pytest.approx((90.0,))]
  _, final = reference_runs.compare_clients(loaded, reference)
  assert [r.ours for r in final] == [pytest.approx((50.0,)), pytest.approx((60.0,))]
  fedavg = tmp_path / "fedavg"
  _run(fedavg / "seed10", "fedavg", 10, [0.5, 0.6], split="reference")
  with pytest.raises(reference_runs.ReferenceError, match="fedavg runs have no best-snapshot accuracy"):
    reference_runs.compare_clients(results.load_results([fedavg])[0], reference, "best_snapshot")
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  proc = subprocess.run([sys.executable, "-m", "programs.reference_clients", f"--runs={ours}", f"--reference={theirs}",
                         "--reference_algorithm=gcfl", "--our_accuracy=best_snapshot"], cwd=REPO, env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "best-snapshot test accuracy" in proc.stdout and "| 1-MUTAG | 20 | 90.00 ± 0.00 | 70.00 ± 0.00 | +20.00 | +4.0 |" in proc.stdout


def _curves(folder: pathlib.Path, seed: int, rows: list[tuple[str, int, str, float]]) -> None:
  """As results/reference_curves.py writes a traced seed: algorithm, round, client, test_loss, test_acc."""
  (folder / f"seed{seed}").mkdir(parents=True, exist_ok=True)
  (folder / f"seed{seed}" / "curves.csv").write_text("algorithm,round,client,test_loss,test_acc\n" + "".join(
      f"{a},{r},{c},0.5,{acc}\n" for a, r, c, acc in rows))


def test_fedavg_is_compared_round_by_round_with_the_traced_reference(tmp_path):
  ours = tmp_path / "ours"
  for seed, curve in ((10, [[10, 0.5], [20, 0.6], [30, 0.7]]), (42, [[10, 0.45], [20, 0.6], [30, 0.9]]),
                      (79, [[10, 0.1], [20, 0.1], [30, 0.1]])):  # Seed 79 is not traced.
    _run(ours / f"seed{seed}", "fedavg", seed, [0.5, 0.5], split="reference")
    record = ours / f"seed{seed}" / f"seed_{seed}" / "final.json"
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "curve": curve}))
  theirs = tmp_path / "theirs"
  trace = [("fedprox", 10, "0-MUTAG", 0.0)]  # Another algorithm in the same file: not mixed in.
  for rnd, (a, b) in {0: (0.5, 0.5), 10: (0.4, 0.8), 20: (0.7, 0.7), 30: (0.9, 0.9)}.items():
    trace += [("fedavg", rnd, "0-MUTAG", a), ("fedavg", rnd, "1-MUTAG", b)]
  _curves(theirs, 10, trace)
  _curves(theirs, 42, [("fedavg", 10, "0-MUTAG", 0.5), ("fedavg", 10, "1-MUTAG", 0.5),
                       ("fedavg", 20, "0-MUTAG", 0.5), ("fedavg", 20, "1-MUTAG", 0.5),
                       ("fedavg", 30, "0-MUTAG", 0.5), ("fedavg", 30, "1-MUTAG", 0.5)])
  curves = reference_runs.load_reference_curves(theirs, "fedavg")
  assert curves == {10: {0: pytest.approx(0.5), 10: pytest.approx(0.6), 20: pytest.approx(0.7), 30: pytest.approx(0.9)},
                    42: {10: pytest.approx(0.5), 20: pytest.approx(0.5), 30: pytest.approx(0.5)}}
  seeds, rows = reference_runs.compare_curves(results.load_results([ours])[0], curves)
  assert seeds == (10, 42) and [r.round for r in rows] == [10, 20, 30]  # Round 0: on one side only.
  assert rows[0].ours == pytest.approx((50.0, 45.0)) and rows[0].theirs == pytest.approx((60.0, 50.0))
  assert rows[0].diff == pytest.approx(-7.5) and rows[0].seeds_below == 2
  assert rows[1].diff == pytest.approx(0.0) and rows[1].seeds_below == 1
  md = reference_runs.curves_to_markdown(seeds, rows)
  assert "| 10 | 47.50 ± 2.50 | 55.00 ± 5.00 | -7.50 | 2 of 2 |" in md
  # The later half of the rounds (20, 30) averaged per seed: seed 10 65 vs 80, seed 42 75 vs 50.
  assert md.splitlines()[-1] == "| mean of rounds 20-30 | 70.00 ± 5.00 | 65.00 ± 15.00 | +5.00 | 1 of 2 |"
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  cmd = [sys.executable, "-m", "programs.reference_clients", f"--runs={ours}", f"--reference={theirs}",
         "--reference_algorithm=fedavg", "--by_round"]
  proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "average test accuracy (%) by round" in proc.stdout and "| 20 | 60.00 ± 0.00 | 60.00 ± 10.00 | +0.00 | 1 of 2 |" in proc.stdout
  bad = subprocess.run(cmd + ["--our_accuracy=best_snapshot"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=300)
  assert bad.returncode == 2 and "takes no --our_accuracy=best_snapshot" in bad.stderr
  _curves(theirs, 42, [("fedavg", 10, "0-MUTAG", 0.5), ("fedavg", 20, "1-MUTAG", 0.5)])
  with pytest.raises(reference_runs.ReferenceError, match="round 20 has clients"):
    reference_runs.load_reference_curves(theirs, "fedavg")
  with pytest.raises(reference_runs.ReferenceError, match="no traced seed of 'gcfl'"):
    reference_runs.load_reference_curves(theirs, "gcfl")
