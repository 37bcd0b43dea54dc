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
  checkpoint = tmp_path / "b" / "seed_1" / "checkpoints" / "program_state_4"
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
    ("--plugins=no_such_module", 2, "cannot import 'no_such_module'"),
    ("--setting=nope", 2, "unknown setting 'nope'"),
    ("--rounds=0", 1, "--rounds=0"),
    ("--data_dir=/nonexistent/tu", 2, "data folder /nonexistent/tu does not exist"),
    ("--embedding_type=walk", 1, "value should be one of"),
])
def test_bad_flags_fail_before_any_work(data_dir, cache_dir, tmp_path, flag, code, message):
  out = tmp_path / "out"
  proc = subprocess.run(_cmd(data_dir, cache_dir, out, flag), cwd=REPO, env=_env(), capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == code
  assert message in proc.stderr
  assert not (out / "config.json").exists() and not (out / "seed_1").exists()


def test_output_folder_of_another_run_is_refused(data_dir, cache_dir, tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  (out / "config.json").write_text(json.dumps({"algorithm": "fedavg"}))
  proc = subprocess.run(_cmd(data_dir, cache_dir, out), cwd=REPO, env=_env(), capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 2 and "holds a run with another configuration" in proc.stderr
  assert sorted(p.name for p in out.iterdir()) == ["config.json"]


def test_compare_rerun_reuses_finished_algorithms(data_dir, cache_dir, tmp_path):
  out = tmp_path / "cmp"
  cmd = [sys.executable, "-m", "programs.compare", "--algorithms=local,fedavg", "--setting=MUTAG:2",
         "--rounds=2", "--seeds=1", f"--data_dir={data_dir}", f"--cache_dir={cache_dir}", f"--output_dir={out}"]
  first = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
  assert first.returncode == 0, first.stderr[-2000:]
  # As if the comparison had been killed while running fedavg: local finished, fedavg not.
  shutil.rmtree(out / "fedavg")
  stamp = (out / "local" / "seed_1" / "final.json").stat().st_mtime_ns
  again = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
  assert again.returncode == 0, again.stderr[-2000:]
  assert (out / "local" / "seed_1" / "final.json").stat().st_mtime_ns == stamp  # Loaded, not rerun.
  assert again.stdout == first.stdout  # Same table (fedavg rerun from scratch with the same seed).
  assert (out / "fedavg" / "DONE").exists()
