"""Run records: archived from real run folders, restored on a new tree, loaded instead of retrained."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tff_graph import experiment
from tff_graph import records
from tff_graph import results
from tests.conftest import experiment_config

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mutag2(data_dir, cache_dir):
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  return cache.prepare_setting("MUTAG:2", data_dir=data_dir, cache_dir=cache_dir)


def _config(seeds):
  return experiment_config("fedavg", rounds=2, data=dict(setting="MUTAG:2"), run=dict(seeds=seeds))


@pytest.fixture(scope="module")
def runs(tff_context, mutag2, tmp_path_factory):
  """A tree as results/reproduce.sh makes it: a finished two-seed run and a run with an unfinished seed."""
  root = tmp_path_factory.mktemp("runs")
  result = experiment.run_experiment(_config((1, 2)), mutag2, root / "chem" / "seed1" / "fedavg")
  unfinished = root / "chem" / "seed3" / "fedavg"
  (unfinished / "seed_3" / "checkpoints").mkdir(parents=True)
  (unfinished / "config.json").write_text(_config((3,)).to_json())
  (unfinished / "seed_3" / "eval_metrics.csv").write_text("round\n1\n")
  return root, result


def test_records_hold_the_small_files_of_finished_seeds_only(runs, tmp_path):
  root, _ = runs
  done = records.archive(root, tmp_path / "records")
  kept = {p.relative_to(tmp_path / "records").as_posix() for p in (tmp_path / "records").rglob("*") if p.is_file()}
  run = "chem/seed1/fedavg"
  assert kept == {f"{run}/{f}" for f in ("config.json", "per_client.csv", "summary.csv", "DONE")} | {
      f"{run}/seed_{s}/{f}" for s in (1, 2) for f in ("final.json", "eval_metrics.csv", "train_metrics.csv")}
  assert len(done.copied) == len(kept) and done.unchanged == 0
  for f in kept:  # Byte for byte.
    assert (tmp_path / "records" / f).read_bytes() == (root / f).read_bytes()
  again = records.archive(root, tmp_path / "records")  # Idempotent.
  assert again.copied == () and again.unchanged == len(kept)


def test_restored_records_rebuild_the_tables_and_load_instead_of_training(runs, mutag2, tmp_path):
  root, result = runs
  records.archive(root, tmp_path / "records")
  new = tmp_path / "new"
  restored = records.restore(tmp_path / "records", new)
  assert len(restored.copied) == 10
  # The same table rows as from the original folders.
  original = results.load_results([root / "chem" / "seed1"])
  back = results.load_results([new / "chem" / "seed1"])
  assert [(r.config, r.seeds) for r in back] == [(r.config, r.seeds) for r in original]
  # A rerun on the restored folder (what reproduce.sh's programs.compare does next) loads both seeds: no
  # training, no export.
  rerun = experiment.run_experiment(_config((1, 2)), mutag2, new / "chem" / "seed1" / "fedavg", allow_finished=True)
  assert rerun.per_client() == result.per_client()
  assert [s.curve for s in rerun.seeds] == [s.curve for s in result.seeds]
  assert not list((new / "chem" / "seed1" / "fedavg").glob("seed_*/models"))
  assert not list((new / "chem" / "seed1" / "fedavg").glob("seed_*/checkpoints"))


def test_restore_keeps_finished_seeds_completes_unfinished_ones_and_refuses_other_configs(runs, tmp_path):
  root, _ = runs
  records.archive(root, tmp_path / "records")
  new = tmp_path / "new" / "chem" / "seed1" / "fedavg"
  (new / "seed_1").mkdir(parents=True)
  (new / "config.json").write_bytes((root / "chem/seed1/fedavg/config.json").read_bytes())
  final = json.loads((root / "chem/seed1/fedavg/seed_1/final.json").read_text())
  final["curve"] = [[2, 0.0]]  # A finished seed here: left as it is.
  (new / "seed_1" / "final.json").write_text(json.dumps(final))
  (new / "seed_1" / "eval_metrics.csv").write_text("round\nmine\n")
  (new / "seed_2" / "checkpoints").mkdir(parents=True)  # Unfinished here: the record replaces its CSVs.
  (new / "seed_2" / "eval_metrics.csv").write_text("round\npartial\n")
  records.restore(tmp_path / "records", tmp_path / "new")
  assert json.loads((new / "seed_1" / "final.json").read_text())["curve"] == [[2, 0.0]]
  assert (new / "seed_1" / "eval_metrics.csv").read_text() == "round\nmine\n"
  assert (new / "seed_2" / "eval_metrics.csv").read_bytes() == (root / "chem/seed1/fedavg/seed_2/eval_metrics.csv").read_bytes()
  assert (new / "seed_2" / "final.json").is_file()
  other = tmp_path / "other" / "chem" / "seed1" / "fedavg"
  other.mkdir(parents=True)
  (other / "config.json").write_text(_config((1, 2, 7)).to_json())
  with pytest.raises(records.RecordsError, match="differs from the archived"):
    records.restore(tmp_path / "records", tmp_path / "other")
  assert sorted(p.name for p in other.iterdir()) == ["config.json"]  # Nothing half-written.


def _program(*args):
  return subprocess.run([sys.executable, "-m", "programs.records", *args], cwd=REPO, capture_output=True, text=True)


def test_program_archives_and_refuses_bad_requests(runs, tmp_path):
  root, _ = runs
  ok = _program("--archive", f"--runs={root}", f"--records={tmp_path / 'rec'}")
  assert ok.returncode == 0 and "archived 10 files" in ok.stdout
  for bad, message in [(["--archive", "--restore"], "exactly one of"), ([], "exactly one of"),
                       (["--archive", f"--runs={tmp_path / 'missing'}"], "does not exist"),
                       (["--archive", f"--runs={root}", f"--records={root / 'chem'}"], "overlap")]:
    flags = bad if any(a.startswith("--runs") for a in bad) else [*bad, f"--runs={root}"]
    if not any(a.startswith("--records") for a in flags):
      flags.append(f"--records={tmp_path / 'rec2'}")
    p = _program(*flags)
    errors = [line for line in p.stderr.splitlines() if line.startswith("error: ")]
    assert p.returncode == 2 and len(errors) == 1 and message in errors[0] and "Traceback" not in p.stderr, (
        bad, p.stderr)
  assert not (tmp_path / "rec2").exists()


def test_two_jobs_archiving_into_the_same_records_at_once_do_not_collide(runs, tmp_path, monkeypatch):
  # Two reproduce.sh pieces may archive the same finished seeds at the same moment. Replay the worst
  # interleaving: while this process copies its first file, another process (another pid) archives
  # everything; each must rename only its own temporary file, and both must leave whole records.
  root, _ = runs
  copy = shutil.copyfile
  nested = []

  def copy_and_let_the_other_job_run(src, dst):
    out = copy(src, dst)
    if not nested:
      nested.append(True)
      pid = os.getpid()
      monkeypatch.setattr(records.os, "getpid", lambda: pid + 1)
      try:
        records.archive(root, tmp_path / "records")
      finally:
        monkeypatch.setattr(records.os, "getpid", lambda: pid)
    return out

  monkeypatch.setattr(records.shutil, "copyfile", copy_and_let_the_other_job_run)
  records.archive(root, tmp_path / "records")
  kept = sorted(p.relative_to(tmp_path / "records") for p in (tmp_path / "records").rglob("*") if p.is_file())
  assert kept and not [p for p in kept if p.name.endswith(".tmp")]
  for f in kept:
    assert (tmp_path / "records" / f).read_bytes() == (root / f).read_bytes()
