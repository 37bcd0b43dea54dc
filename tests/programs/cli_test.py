"""The command-line programs as a user runs them: kill -9 and resume, bad flags, outputs."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def _cmd(data_dir, cache_dir, output, *extra):
  return [sys.executable, "-m", "programs.train", "--algorithm=fedstar", "--setting=MUTAG:2", "--rounds=8",
          "--seeds=1", "--checkpoint_every=2", f"--data_dir={data_dir}", f"--cache_dir={cache_dir}",
          f"--output_dir={output}", *extra]


def _env():
  return {**os.environ, "PYTHONPATH": str(REPO)}


def _workers() -> set[str]:
  return set(subprocess.run(["pgrep", "-f", "tensorflow_federated/data/worker_binary"],
                            capture_output=True, text=True).stdout.split())


def _orphan_workers() -> set[str]:
  """worker_binary processes whose parent is gone (re-parented to init): a run that leaked its worker.
  Workers of other live jobs on the machine have their parent and do not count."""
  orphans = set()
  for pid in _workers():
    try:
      with open(f"/proc/{pid}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
      continue
    if ppid == 1:
      orphans.add(pid)
  return orphans


def test_killed_run_resumes_to_the_same_final_metrics(data_dir, cache_dir, tmp_path):
  before = _workers()
  reference = subprocess.run(_cmd(data_dir, cache_dir, tmp_path / "a"), cwd=REPO, env=_env(),
                             capture_output=True, text=True, timeout=600)
  assert reference.returncode == 0, reference.stderr[-2000:]
  assert "average test accuracy" in reference.stdout
  # Start the same run elsewhere and SIGKILL it once a checkpoint past round 2 exists.
  run = subprocess.Popen(_cmd(data_dir, cache_dir, tmp_path / "b"), cwd=REPO, env=_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
  checkpoint = tmp_path / "b" / "seed_1" / "checkpoints" / "program_state_4.npz"
  deadline = time.monotonic() + 300
  while not checkpoint.exists() and run.poll() is None and time.monotonic() < deadline:
    time.sleep(0.1)
  assert checkpoint.exists() and run.poll() is None, "run ended before it could be killed"
  its_workers = set(subprocess.run(["pgrep", "-P", str(run.pid), "-f", "worker_binary"], capture_output=True,
                                   text=True).stdout.split())
  assert len(its_workers) == 1
  os.killpg(run.pid, signal.SIGKILL)
  run.wait(30)
  assert not (tmp_path / "b" / "seed_1" / "final.json").exists()
  time.sleep(1)
  assert not its_workers & _workers(), "the killed run's TFF worker survived it"
  resumed = subprocess.run(_cmd(data_dir, cache_dir, tmp_path / "b"), cwd=REPO, env=_env(),
                           capture_output=True, text=True, timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  a = json.loads((tmp_path / "a" / "seed_1" / "final.json").read_text())
  b = json.loads((tmp_path / "b" / "seed_1" / "final.json").read_text())
  assert a["final"] == b["final"]
  assert a["curve"] == b["curve"]
  rounds = [line.split(",")[0] for line in
            (tmp_path / "b" / "seed_1" / "eval_metrics.csv").read_text().splitlines()[1:]]
  assert rounds == [str(r) for r in range(1, 9)]
  # A finished run is not overwritten without --overwrite.
  again = subprocess.run(_cmd(data_dir, cache_dir, tmp_path / "b"), cwd=REPO, env=_env(),
                         capture_output=True, text=True, timeout=600)
  assert again.returncode == 2 and "holds a finished run" in again.stderr
  time.sleep(1)
  assert not _orphan_workers() - before


@pytest.mark.parametrize("flag, code, message", [
    ("--algorithm=fedfoo", 2, "unknown algorithm 'fedfoo'"),
    ("--rounds=0", 2, "--rounds=0"),
    ("--data_dir=/nonexistent/tu", 2, "data folder /nonexistent/tu does not exist"),
])
def test_bad_flags_fail_before_any_work(data_dir, cache_dir, tmp_path, flag, code, message):
  out = tmp_path / "out"
  proc = subprocess.run(_cmd(data_dir, cache_dir, out, flag), cwd=REPO, env=_env(), capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == code
  assert message in proc.stderr
  assert not (out / "config.json").exists() and not (out / "seed_1").exists()


@pytest.mark.parametrize("flag, message", [
    ("--plugins=no_such_module", "cannot import 'no_such_module'"),
    ("--setting=nope", "dataset 'nope' not found"),
    ("--setting=MUTAG:188", "client 0-MUTAG would hold 1 graph(s)"),
    ("--embedding_type=walk", "value should be one of"),
])
def test_more_bad_flags_are_one_error_before_any_work(data_dir, cache_dir, tmp_path, flag, message, capsys):
  # The same path as above, in-process (a program start costs ~10 s of imports).
  import programs.train  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (defines the flags)
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  from programs import cli  # pylint: disable=g-import-not-at-top
  from programs import common  # pylint: disable=g-import-not-at-top
  out = tmp_path / "out"
  try:
    try:
      cli.parse_flags(_cmd(data_dir, cache_dir, out, flag)[2:])
    except SystemExit as e:  # A bad flag value: exit 2, one line.
      assert e.code == 2
      text = capsys.readouterr().err
    else:
      if not common.start([""]):  # A plugin that does not import: the program exits 2.
        text = capsys.readouterr().err
      else:
        with pytest.raises(common.UsageError) as e:
          common.resolve("fedstar")
        text = str(e.value)
    assert message in text
  finally:
    absl_flags.FLAGS.unparse_flags()
  assert not out.exists()


def test_output_folder_of_another_run_is_refused(data_dir, cache_dir, tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  (out / "config.json").write_text(json.dumps({"algorithm": "fedavg"}))
  proc = subprocess.run(_cmd(data_dir, cache_dir, out), cwd=REPO, env=_env(), capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 2 and "holds a run with another configuration" in proc.stderr
  assert sorted(p.name for p in out.iterdir()) == ["config.json"]


_RUN_FILES = ("final.json", "train_metrics.csv", "eval_metrics.csv")


def test_compare_rerun_reuses_finished_algorithms(data_dir, cache_dir, tmp_path):
  # The first run trains its algorithms in parallel (--parallel=2: one programs.train process each),
  # the rerun one at a time in-process: the same bits either way.
  out = tmp_path / "cmp"
  cmd = [sys.executable, "-m", "programs.compare", "--algorithms=local,fedavg", "--setting=MUTAG:2",
         "--rounds=2", "--seeds=1", f"--data_dir={data_dir}", f"--cache_dir={cache_dir}", f"--output_dir={out}"]
  first = subprocess.run(cmd + ["--parallel=2"], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
  assert first.returncode == 0, first.stderr[-2000:]
  assert "local: seed 1  round 2/2" in first.stderr and "fedavg: seed 1  round 2/2" in first.stderr
  parallel = {f: (out / "fedavg" / "seed_1" / f).read_bytes() for f in _RUN_FILES}
  # As if the comparison had been killed while running fedavg: local finished, fedavg not.
  shutil.rmtree(out / "fedavg")
  stamp = (out / "local" / "seed_1" / "final.json").stat().st_mtime_ns
  again = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
  assert again.returncode == 0, again.stderr[-2000:]
  assert (out / "local" / "seed_1" / "final.json").stat().st_mtime_ns == stamp  # Loaded, not rerun.
  assert again.stdout == first.stdout  # Same table (fedavg rerun from scratch with the same seed).
  assert (out / "fedavg" / "DONE").exists()
  assert {f: (out / "fedavg" / "seed_1" / f).read_bytes() for f in _RUN_FILES} == parallel


def test_compare_parallel_refuses_remote_workers(data_dir, cache_dir, tmp_path):
  out = tmp_path / "cmp"
  proc = subprocess.run([sys.executable, "-m", "programs.compare", "--algorithms=local,fedavg", "--setting=MUTAG:2",
                         "--parallel=2", "--workers=localhost:1", f"--data_dir={data_dir}",
                         f"--cache_dir={cache_dir}", f"--output_dir={out}"],
                        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines()[-1] == (
      "error: --parallel starts a local worker per algorithm: it cannot be combined with --workers=host:port,...")
  assert not out.exists()


def _write_rings(folder: pathlib.Path, graphs: int = 90) -> None:
  """A dataset that is not one of the 16: 3 classes (cycles, stars, paths), 2 raw node attributes (~100, ~1)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  a, ind, labels, attrs = [], [], [], []
  base = 1
  for g in range(graphs):
    n, kind = int(rng.integers(5, 11)), g % 3
    pairs = ([(i, (i + 1) % n) for i in range(n)] if kind == 0 else [(0, i) for i in range(1, n)] if kind == 1
             else [(i, i + 1) for i in range(n - 1)])
    a += [f"{base + u}, {base + v}\n{base + v}, {base + u}" for u, v in pairs]
    ind += [str(g + 1)] * n
    attrs += [f"{rng.normal() * 50 + 100:.3f}, {rng.normal():.3f}" for _ in range(n)]
    labels.append(str(kind + 10))
    base += n
  d = folder / "RINGS" / "RINGS"  # As extracted from RINGS.zip into RINGS/.
  d.mkdir(parents=True)
  for suffix, lines in (("A", a), ("graph_indicator", ind), ("graph_labels", labels), ("node_attributes", attrs)):
    (d / f"RINGS_{suffix}.txt").write_text("\n".join(lines) + "\n")


def test_a_new_dataset_in_a_federation_of_chosen_datasets_trains_end_to_end(data_dir, cache_dir, tmp_path):
  # A TU-format dataset that is not built in, federated with two real ones of other feature widths (7, 18)
  # and class counts (2 vs 3); its raw attributes standardised per client; stats, then training.
  data = tmp_path / "data"
  _write_rings(data)
  for name in ("MUTAG", "PTC_MR"):
    (data / f"{name}.zip").symlink_to(data_dir / f"{name}.zip")
  setting = "--setting=RINGS:2,MUTAG,PTC_MR"
  common = [setting, "--node_features=both", "--standardize_attributes", f"--data_dir={data}",
            f"--cache_dir={tmp_path / 'cache'}"]
  common[1] = "--node_features=auto"  # ("both" needs node labels too: features_test.)
  stats = subprocess.run([sys.executable, "-m", "programs.data_stats", *common], cwd=REPO, env=_env(),
                         capture_output=True, text=True, timeout=300)
  assert stats.returncode == 0, stats.stderr[-2000:]
  lines = stats.stdout.splitlines()
  assert "setting RINGS:2,MUTAG,PTC_MR: 4 clients, reference split" in lines[0]
  assert any(l.startswith("  RINGS: read from") and l.endswith("RINGS") for l in lines)
  rows = {l.split()[0]: l.split() for l in lines if l[:1].isdigit()}
  assert list(rows) == ["0-RINGS", "1-RINGS", "2-MUTAG", "3-PTC_MR"]
  assert [rows[c][6:9] for c in rows] == [["3", "2", "node_attributes"], ["3", "2", "node_attributes"],
                                          ["2", "7", "one_hot_node_labels"], ["2", "18", "one_hot_node_labels"]]
  out = tmp_path / "run"
  train = subprocess.run([sys.executable, "-m", "programs.train", "--algorithm=fedstar", "--rounds=2", "--seeds=1",
                          f"--output_dir={out}", *common], cwd=REPO, env=_env(), capture_output=True, text=True,
                         timeout=900)
  assert train.returncode == 0, train.stderr[-3000:]
  per_client = (out / "per_client.csv").read_text().splitlines()
  assert [l.split(",")[0] for l in per_client[1:5]] == ["0-RINGS", "1-RINGS", "2-MUTAG", "3-PTC_MR"]
  config = json.loads((out / "config.json").read_text())["data"]
  assert (config["setting"], config["split"], config["node_features"]) == ("RINGS:2,MUTAG,PTC_MR", "reference", "auto")
  final = json.loads((out / "seed_1" / "final.json").read_text())["final"]
  assert all(0.0 <= final[c]["test_accuracy"] <= 1.0 for c in rows)
