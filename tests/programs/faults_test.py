"""Fault injection: every way a realistic user or machine breaks a run, and what tff-graph does about it.

Each case asserts the outcome a user needs: a correct recovery, or one clear line on stderr with exit
code 2 and nothing written; never a traceback, a silent wrong result or a worker left behind. (Kill -9
at a checkpoint and during export, SIGTERM and worker death are in cli_test.py and distributed_test.py.)
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from data_prep import cache
from data_prep import graph_tensor
from tests.programs.cli_test import REPO, _env, _orphan_workers, _workers


def _program(name, *args, timeout=600):
  return subprocess.run([sys.executable, "-m", f"programs.{name}", *args], cwd=REPO, env=_env(),
                        capture_output=True, text=True, timeout=timeout)


def _train(data_dir, cache_dir, out, *extra, rounds=2):
  return _program("train", "--algorithm=fedavg", "--setting=MUTAG:2", f"--rounds={rounds}", "--seeds=1",
                  "--checkpoint_every=1", f"--data_dir={data_dir}", f"--cache_dir={cache_dir}", f"--output_dir={out}",
                  *extra)


def _one_line_error(proc, *parts):
  assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
  lines = [l for l in proc.stderr.splitlines() if l.strip()]
  errors = [l for l in lines if l.startswith("error: ")]
  assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
  for part in parts:
    assert part in errors[0], errors[0]


# ---------------------------------------------------------------------------------------------
# 1. A corrupt cache entry is found, said, and rebuilt
# ---------------------------------------------------------------------------------------------


def test_a_truncated_cached_split_is_rebuilt_not_reported_as_a_worker_failure(data_dir, tmp_path, caplog):
  first = cache.prepare_setting("MUTAG:2", data_dir=data_dir, cache_dir=tmp_path)
  target = first.root / "0-MUTAG" / "train.tfrecord"
  good = target.read_bytes()
  target.write_bytes(good[: len(good) // 2])
  again = _program("data_stats", "--setting=MUTAG:2", f"--data_dir={data_dir}", f"--cache_dir={tmp_path}")
  assert again.returncode == 0, again.stderr[-2000:]  # As a user sees it: a warning, then the statistics.
  assert f"cache entry {first.root} is corrupt (0-MUTAG/train.tfrecord has" in again.stderr
  assert "rebuilt" in again.stderr and "0-MUTAG" in again.stdout
  assert target.read_bytes() == good  # Rebuilt from the source, identically.
  target.write_bytes(good[:-4] + b"\x00\x00\x00\x00")  # Same size, other bytes: the checksum catches it.
  cache.prepare_setting("MUTAG:2", data_dir=data_dir, cache_dir=tmp_path)
  assert "does not match its checksum" in caplog.text and target.read_bytes() == good


def test_a_damaged_dataset_cache_is_rebuilt(data_dir, tmp_path):
  first = cache.load_dataset("MUTAG", data_dir=data_dir, cache_dir=tmp_path)
  (npz,) = (tmp_path / "datasets").glob("MUTAG-*.npz")
  npz.write_bytes(npz.read_bytes()[:100])
  again = cache.load_dataset("MUTAG", data_dir=data_dir, cache_dir=tmp_path)
  np.testing.assert_array_equal(again.rwse, first.rwse)
  assert zipfile.is_zipfile(npz)


def test_stale_cache_entries_are_listed_and_pruned(data_dir, tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  (data / "MUTAG.zip").write_bytes((data_dir / "MUTAG.zip").read_bytes())
  cache_dir = tmp_path / "cache"
  cache.prepare_setting("MUTAG:2", data_dir=data, cache_dir=cache_dir)
  (cache_dir / "settings" / ".left-by-a-kill.tmp-1").mkdir()
  with zipfile.ZipFile(data_dir / "MUTAG.zip") as src, zipfile.ZipFile(data / "MUTAG.zip", "w") as out:
    for m in src.namelist():  # The same dataset with one graph label changed.
      content = src.read(m)
      if m.endswith("MUTAG_graph_labels.txt"):
        content = b"-1\n" + content.split(b"\n", 1)[1] if not content.startswith(b"-1") else b"1\n" + content.split(
            b"\n", 1)[1]
      out.writestr(m, content)
  listed = _program("cache", f"--data_dir={data}", f"--cache_dir={cache_dir}")
  assert listed.returncode == 0, listed.stderr[-2000:]
  assert listed.stdout.count("STALE") == 3, listed.stdout  # setting + dataset (source changed) + leftover.
  assert "source changed: MUTAG" in listed.stdout and "left by an interrupted write" in listed.stdout
  pruned = _program("cache", f"--data_dir={data}", f"--cache_dir={cache_dir}", "--prune")
  assert "removed 3 stale entries" in pruned.stdout
  assert not list((cache_dir / "settings").iterdir()) and not list((cache_dir / "datasets").iterdir())


def test_a_full_cache_disk_leaves_nothing_half_written(data_dir, tmp_path, monkeypatch):
  written = []

  def full(path, records):
    written.append(path)
    raise OSError(errno.ENOSPC, "No space left on device", str(path))

  monkeypatch.setattr(graph_tensor, "write_tfrecord", full)
  with pytest.raises(OSError, match="No space left"):
    cache.prepare_setting("MUTAG:2", data_dir=data_dir, cache_dir=tmp_path)
  assert written and not list((tmp_path / "settings").iterdir())


# ---------------------------------------------------------------------------------------------
# 2. Resume checks that the data is the same; 3. one run per folder; 5./6. clear refusals
# ---------------------------------------------------------------------------------------------


def _mutag_without_edges(data_dir, folder):
  folder.mkdir(parents=True)
  with zipfile.ZipFile(data_dir / "MUTAG.zip") as src, zipfile.ZipFile(folder / "MUTAG.zip", "w") as out:
    for m in src.namelist():
      content = src.read(m)
      if m.endswith("MUTAG_A.txt"):  # Keep one self-loop per graph's first node: no real edge left.
        content = b"1, 1\n"
      out.writestr(m, content)


def test_resume_on_other_data_is_refused_and_leftover_temp_checkpoints_are_cleaned(data_dir, cache_dir, tmp_path):
  before = _workers()
  out = tmp_path / "run"
  first = _train(data_dir, cache_dir, out)
  assert first.returncode == 0, first.stderr[-2000:]
  # As if killed after a checkpoint (and during a save): not finished, a temp checkpoint left behind.
  (out / "DONE").unlink()
  (out / "seed_1" / "final.json").unlink()
  temp = out / "seed_1" / "checkpoints" / "program_state_2_temp1234"
  temp.mkdir()
  other = tmp_path / "other"
  _mutag_without_edges(data_dir, other)
  refused = _train(other, cache_dir, out)
  _one_line_error(refused, "holds a run of this configuration on other data", "MUTAG (content")
  assert not (out / "DONE").exists() and temp.is_dir()  # Nothing touched.
  resumed = _train(data_dir, cache_dir, out)
  assert resumed.returncode == 0, resumed.stderr[-2000:]
  assert (out / "DONE").is_file() and not temp.exists()
  time.sleep(1)
  assert not _orphan_workers() - before


def test_a_second_run_on_a_folder_in_use_is_refused_with_the_holders_pid(data_dir, cache_dir, tmp_path):
  out = tmp_path / "run"
  out.mkdir()
  holder = subprocess.Popen([sys.executable, "-c", (  # Another process holding the run's OS lock.
      "import fcntl, os, sys, time\n"
      f"fd = os.open({str(out / '.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
      "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, str(os.getpid()).encode()); print('held', flush=True)\n"
      "time.sleep(600)")], stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    second = _train(data_dir, cache_dir, out)
    _one_line_error(second, "is being written by another run", f"PID {holder.pid}")
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # Nothing written.
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
  # kill -9 released the lock: the folder is usable at once.
  from tff_graph import experiment  # pylint: disable=g-import-not-at-top
  with experiment.RunLock(out):
    assert (out / ".lock").read_text().strip() == str(os.getpid())


_NONSENSE = [
    (["--algorithm=fedstar", "--proximal_mu=0.1"], ["fedstar does not use proximal_mu=0.1 (read by fedprox"]),
    (["--algorithm=fedstar", "--eps1=0.05"], ["fedstar does not use eps1=0.05 (read by gcfl"]),
    (["--algorithm=gcfl", "--seq_length=7"], ["gcfl does not use seq_length=7 (read by gcfl_plus"]),
    (["--algorithm=fedavg", "--embedding_type=rw"], ["fedavg does not use embedding_type=rw"]),
    (["--seq_length=-3"], ["--seq_length=-3"]),
    (["--algorithm=gcfl", "--eps1=nan"], ["eps1 must be a finite number >= 0, got nan"]),
    (["--seeds=1,1"], ["seeds must differ"]),
    (["--seeds=-1"], ["seeds must be in 0..2**31-1"]),
    (["--split_seed=-1"], ["--split_seed=-1"]),
    (["--n_rw=100000"], ["--n_rw=100000"]),
    (["--split=sklearn"], ["--split"]),
]


@pytest.mark.parametrize("flags, parts", [_NONSENSE[0]])
def test_nonsense_options_are_refused_before_any_work(data_dir, cache_dir, tmp_path, flags, parts):
  # As a user meets one (the program's exit code, stderr, nothing written); every case in-process below.
  out = tmp_path / "out"
  args = [f for f in flags if not f.startswith("--algorithm")]
  algorithm = next((f for f in flags if f.startswith("--algorithm")), "--algorithm=fedavg")
  proc = _program("train", algorithm, "--setting=MUTAG:2", "--rounds=2", f"--data_dir={data_dir}",
                  f"--cache_dir={cache_dir}", f"--output_dir={out}", *args, timeout=300)
  _one_line_error(proc, *parts)
  assert not out.exists()


@pytest.mark.parametrize("flags, parts", _NONSENSE)
def test_every_nonsense_option_is_one_usage_error(flags, parts, capsys):
  import programs.train  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (defines the flags)
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  from programs import cli  # pylint: disable=g-import-not-at-top
  from programs import common  # pylint: disable=g-import-not-at-top
  algorithm = next((f.split("=", 1)[1] for f in flags if f.startswith("--algorithm")), "fedavg")
  args = [f for f in flags if not f.startswith("--algorithm")]
  try:
    with pytest.raises((common.UsageError, SystemExit)) as e:
      cli.parse_flags(["train", *args])
      common.experiment_config(algorithm)
    message = capsys.readouterr().err if isinstance(e.value, SystemExit) else f"error: {e.value}"
    if isinstance(e.value, SystemExit):
      assert e.value.code == 2
    assert message.count("\n") <= 1 and all(p in message for p in parts), message
  finally:
    absl_flags.FLAGS.unparse_flags()


def test_a_comparison_passes_each_option_to_the_algorithms_that_read_it(data_dir, cache_dir, tmp_path):
  proc = _program("compare", "--algorithms=local,fedavg", "--setting=MUTAG:2", "--rounds=1", "--proximal_mu=0.1",
                  f"--data_dir={data_dir}", f"--cache_dir={cache_dir}", f"--output_dir={tmp_path / 'cmp'}")
  _one_line_error(proc, "none of local, fedavg uses proximal_mu=0.1")


@pytest.mark.parametrize("case", ["file", "file+overwrite", "unwritable"])
def test_an_output_folder_that_cannot_be_one_is_a_one_line_error(data_dir, cache_dir, tmp_path, case):
  if case == "unwritable":
    out = pathlib.Path("/proc/tff_graph_cannot_write_here")  # Refused even to root.
  else:
    out = tmp_path / "a_file"
    out.write_text("keep me")
  proc = _train(data_dir, cache_dir, out, *(["--overwrite"] if case == "file+overwrite" else []))
  if case == "unwritable":
    _one_line_error(proc, "cannot write to output folder /proc/tff_graph_cannot_write_here")
  else:
    _one_line_error(proc, f"output folder {out} is a file")
    assert out.read_text() == "keep me"


# ---------------------------------------------------------------------------------------------
# 4. The exported model scores unlabelled graphs and reports bad examples one by one
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(data_dir, cache_dir, tmp_path_factory):
  from tff_graph.federated import client_work as cw  # pylint: disable=g-import-not-at-top
  from tff_graph.models import classifiers  # pylint: disable=g-import-not-at-top
  from tff_graph.models import export  # pylint: disable=g-import-not-at-top
  prepared = cache.prepare_setting("MUTAG:2", data_dir=data_dir, cache_dir=cache_dir)
  model = classifiers.build_model(classifiers.ModelSpec(kind="decoupled", feature_dim=7, num_classes=2), seed=3)
  path = export.export_saved_model(model, tmp_path_factory.mktemp("model") / "m",
                                   input_spec=cw.InputSpec(feature_dim=7, num_classes=2))
  examples = [r.numpy() for r in tf.data.TFRecordDataset(prepared.clients[0].files["test"])][:5]
  return tf.saved_model.load(str(path)), examples


def test_unlabelled_graphs_are_scored_like_labelled_ones(exported):
  loaded, examples = exported
  unlabelled = []
  for raw in examples:
    e = tf.train.Example.FromString(raw)
    del e.features.feature["context/label"]
    unlabelled.append(e.SerializeToString())
  serve = loaded.signatures["serving_default"]
  np.testing.assert_array_equal(serve(examples=tf.constant(unlabelled))["probabilities"],
                                serve(examples=tf.constant(examples))["probabilities"])


def test_bad_examples_are_reported_one_by_one_and_any_bytes_give_a_tensorflow_error(exported):
  loaded, examples = exported
  rng = np.random.default_rng(0)
  truncated = examples[1][: len(examples[1]) // 2]
  bad_edge = tf.train.Example.FromString(examples[2])
  bad_edge.features.feature["edges/edges.#target"].int64_list.value[0] = 10_000
  batch = [examples[0], rng.bytes(64), truncated, bad_edge.SerializeToString(), examples[3], b"\xff\xfe\xfd"]
  out = loaded.signatures["score_each"](examples=tf.constant(batch))
  np.testing.assert_array_equal(out["valid"], [True, False, False, False, True, False])
  probs = out["probabilities"].numpy()
  alone = loaded.signatures["serving_default"](examples=tf.constant([examples[0], examples[3]]))["probabilities"]
  np.testing.assert_allclose(probs[[0, 4]], alone, rtol=1e-6)
  assert np.isnan(probs[[1, 2, 3, 5]]).all()
  for _ in range(20):  # Random bytes: always TensorFlow's error naming the index, never a UnicodeDecodeError.
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid serialized graphs"):
      loaded.signatures["serving_default"](examples=tf.constant([examples[0], rng.bytes(int(rng.integers(1, 300)))]))
