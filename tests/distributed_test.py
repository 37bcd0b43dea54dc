"""Simulations across several TFF workers: same results as one process, clean life-cycle, lost workers."""

from __future__ import annotations

import json
import os
import pathlib
import platform
import signal
import subprocess
import sys
import time

import numpy as np
import portpicker
import pytest
import tensorflow as tf

from tff_graph import clustering
from tff_graph import program_logic
from tff_graph import runtime
from tests.conftest import make_process

REPO = pathlib.Path(__file__).resolve().parents[1]


def _child_workers() -> set[str]:
  """worker_binary processes started by this test process (other jobs' workers do not count)."""
  return set(subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "worker_binary"],
                            capture_output=True, text=True).stdout.split())


def _port_workers(ports) -> set[str]:
  """worker_binary processes listening on these ports (started by a launcher under test)."""
  found = set()
  for port in ports:
    found |= set(subprocess.run(["pgrep", "-f", f"worker_binary --port={port} "], capture_output=True,
                                text=True).stdout.split())
  return found


def _worker_pid(port: int) -> int:
  out = subprocess.run(["pgrep", "-f", f"worker_binary --port={port}"], capture_output=True, text=True).stdout
  pids = [int(p) for p in out.split()]
  assert len(pids) == 1, f"expected one worker on port {port}, found {pids}"
  return pids[0]


def _simulate(prepared, algorithm, workers):
  thresholds = clustering.SplitThresholds(eps1=10.0, eps2=0.0, warmup_rounds=1, seq_length=2)
  process = make_process(prepared, algorithm, seed=3, thresholds=thresholds)
  with runtime.execution_context(workers):
    result = program_logic.train_process(process, prepared.clients, seed=3, rounds=3 if algorithm != "gcfl" else 4)
  if algorithm == "gcfl":
    # A gate that fires at round 2: the split and the re-aggregation also run on the workers.
    assert result.clustering_report()["splits"], "the test needs a split"
  return result


@pytest.mark.parametrize("algorithm", ["fedstar", "gcfl", "local"])
def test_two_workers_give_the_single_process_results(mutag3, algorithm):
  one = _simulate(mutag3, algorithm, 1)
  two = _simulate(mutag3, algorithm, 2)
  # 3 clients over 2 workers: uneven blocks, outputs come back regrouped and are matched by client.
  for a, b in zip(tf.nest.flatten(one.state.to_structure()), tf.nest.flatten(two.state.to_structure())):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  for cid in one.final:
    for k in one.final[cid]:
      assert one.final[cid][k] == pytest.approx(two.final[cid][k], rel=1e-5, abs=1e-6)
  assert one.clustering_report() == two.clustering_report()
  # Clients are not interchangeable: matching by position only would have mixed their states up.
  states = [tf.nest.flatten(s)[-1] for s in two.state.client_states]
  assert not np.array_equal(states[0], states[1])
  assert not _child_workers(), "a worker outlived its context"


def test_bad_worker_specs():
  assert runtime.parse_workers(None) == 1
  assert runtime.parse_workers("local:3") == 3
  assert runtime.parse_workers("a:1, b:2") == ["a:1", "b:2"]
  for bad in ["local:x", "local:0", "hostonly", "h:99999", ",", "h:"]:
    with pytest.raises(ValueError, match="workers"):
      runtime.parse_workers(bad)


def test_unreachable_worker_is_a_clear_error():
  port = portpicker.pick_unused_port()
  start = time.monotonic()
  with pytest.raises(runtime.WorkerError, match=f"localhost:{port} not ready"):
    with runtime.execution_context([f"localhost:{port}"], startup_timeout=2.0):
      pass
  assert time.monotonic() - start < 30


def _env():
  return {**os.environ, "PYTHONPATH": str(REPO)}


def _launch(ports, log_dir):
  launcher = subprocess.Popen(
      [sys.executable, "-m", "programs.workers", f"--ports={','.join(map(str, ports))}", f"--worker_log_dir={log_dir}"],
      cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
  line = launcher.stdout.readline()
  assert line.startswith("ready "), (line, launcher.stderr.read() if launcher.poll() is not None else "")
  return launcher


def _train(data_dir, cache_dir, output, workers, *extra, **kwargs):
  cmd = [sys.executable, "-m", "programs.train", "--algorithm=fedstar", "--setting=MUTAG:3", "--rounds=8",
         "--seeds=1", "--checkpoint_every=2", f"--data_dir={data_dir}", f"--cache_dir={cache_dir}",
         f"--output_dir={output}"] + ([f"--workers={workers}"] if workers else []) + list(extra)
  return subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **kwargs)


def test_lost_worker_stops_the_run_with_a_clear_error_and_the_run_resumes(data_dir, cache_dir, tmp_path):
  reference = _train(data_dir, cache_dir, tmp_path / "single", None)
  out, err = reference.communicate(timeout=600)
  assert reference.returncode == 0, err[-2000:]

  ports = [portpicker.pick_unused_port(), portpicker.pick_unused_port()]
  launcher = _launch(ports, tmp_path / "logs")
  try:
    run = _train(data_dir, cache_dir, tmp_path / "run", ",".join(f"localhost:{p}" for p in ports))
    checkpoint = tmp_path / "run" / "seed_1" / "checkpoints" / "program_state_4.npz"
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and run.poll() is None and time.monotonic() < deadline:
      time.sleep(0.05)
    assert checkpoint.exists() and run.poll() is None, "run ended before a worker could be killed"
    os.kill(_worker_pid(ports[1]), signal.SIGKILL)
    killed = time.monotonic()
    out, err = run.communicate(timeout=120)
    assert time.monotonic() - killed < 60
    assert run.returncode == 1
    # The killed worker, or the other one if the launcher has already stopped it: both are lost.
    assert any(f"TFF worker at localhost:{p} stopped answering" in err for p in ports), err[-2000:]
    assert "Traceback" not in err
    assert not (tmp_path / "run" / "seed_1" / "final.json").exists()
    # The launcher notices its dead worker, stops the other one and says which died.
    assert launcher.wait(30) == 1
    assert f"worker on port {ports[1]} exited" in launcher.stderr.read()
  finally:
    os.killpg(launcher.pid, signal.SIGKILL) if launcher.poll() is None else None
  time.sleep(1)
  assert not _port_workers(ports), "a worker outlived its launcher"
  first_ports = ports

  # Workers back (on other ports): the same command resumes from the checkpoint and finishes.
  ports = [portpicker.pick_unused_port(), portpicker.pick_unused_port()]
  launcher = _launch(ports, tmp_path / "logs")
  try:
    resumed = _train(data_dir, cache_dir, tmp_path / "run", ",".join(f"localhost:{p}" for p in ports))
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-2000:]
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(30) == 0
  finally:
    os.killpg(launcher.pid, signal.SIGKILL) if launcher.poll() is None else None
  single = json.loads((tmp_path / "single" / "seed_1" / "final.json").read_text())
  distributed = json.loads((tmp_path / "run" / "seed_1" / "final.json").read_text())
  for cid, metrics in single["final"].items():
    for k, v in metrics.items():
      assert distributed["final"][cid][k] == pytest.approx(v, rel=1e-5, abs=1e-6)
  rounds = [line.split(",")[0] for line in
            (tmp_path / "run" / "seed_1" / "eval_metrics.csv").read_text().splitlines()[1:]]
  assert rounds == [str(r) for r in range(1, 9)]
  time.sleep(1)
  assert not _port_workers(ports + first_ports), "a worker outlived the launcher"


def test_a_call_left_unanswered_is_a_stall_that_stops_the_worker():
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

  @tff.tensorflow.computation(np.int64)
  def spin(n):  # Counts to n: for n = 10**15, hours.
    return tf.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0, tf.int64)])[0]

  with pytest.raises(runtime.WorkerStalled, match="no answer to .* for [0-9]+s .stall timeout 2s"):
    with runtime.execution_context(1, stall_timeout=2.0):
      assert spin(np.int64(1000)) == 1000  # A call that answers within the timeout is no stall.
      workers = _child_workers()
      assert len(workers) == 1
      start = time.monotonic()
      spin(np.int64(10**15))
  assert time.monotonic() - start < 30
  time.sleep(0.5)
  assert not _child_workers()  # The stuck worker was stopped.


def test_a_stalled_worker_is_restarted_and_the_run_resumes_exactly(data_dir, cache_dir, tmp_path):
  reference = _train(data_dir, cache_dir, tmp_path / "single", None)
  out, err = reference.communicate(timeout=600)
  assert reference.returncode == 0, err[-2000:]
  run = _train(data_dir, cache_dir, tmp_path / "run", None, "--stall_timeout=4")
  try:
    checkpoint = tmp_path / "run" / "seed_1" / "checkpoints" / "program_state_4.npz"
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and run.poll() is None and time.monotonic() < deadline:
      time.sleep(0.05)
    assert checkpoint.exists() and run.poll() is None, "run ended before its worker could be stopped"
    stuck = subprocess.run(["pgrep", "-P", str(run.pid), "-f", "worker_binary"], capture_output=True,
                           text=True).stdout.split()
    assert len(stuck) == 1
    os.kill(int(stuck[0]), signal.SIGSTOP)  # Alive but silent, as in TensorFlow's deadlock.
    out, err = run.communicate(timeout=600)
  finally:
    if run.poll() is None:
      run.kill()
  assert run.returncode == 0, err[-2000:]
  assert "stall timeout 4s" in err and "restarting the workers and resuming from the last checkpoint" in err
  assert not os.path.exists(f"/proc/{stuck[0]}") or "(Z)" in open(f"/proc/{stuck[0]}/stat").read()
  # Resumed from its checkpoint: the same results as the run that never stalled, to the bit.
  for name in ("final.json", "eval_metrics.csv"):
    assert (tmp_path / "run" / "seed_1" / name).read_bytes() == (tmp_path / "single" / "seed_1" / name).read_bytes()


def test_a_worker_that_refuses_a_computation_is_not_a_lost_worker():
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

  @tff.tensorflow.computation(np.int32)
  def check(x):
    with tf.control_dependencies([tf.debugging.assert_equal(x, 0, message="x must be 0")]):
      return tf.identity(x)

  with runtime.execution_context(1):
    assert check(np.int32(0)) == 0
    with pytest.raises(runtime.ComputationError, match="could not run the computation.*x must be 0"):
      check(np.int32(3))
    assert check(np.int32(0)) == 0  # The worker is still there.
  assert not _child_workers()


def test_workers_run_tensorflow_ops_on_one_intra_op_thread():
  # What makes a client's numbers independent of the machine's core count, and equal to the results
  # computed before the client loops left tf.data (see runtime.worker_environment).
  port = portpicker.pick_unused_port()
  worker = runtime.start_worker(port)
  try:
    environ = pathlib.Path(f"/proc/{worker.pid}/environ").read_bytes().split(b"\0")
    assert b"TF_NUM_INTRAOP_THREADS=1" in environ
    for name, value in runtime.CPU_KERNELS.items():
      assert f"{name}={value}".encode() in environ
  finally:
    runtime.stop_worker(worker)


def test_cpu_kernels_are_pinned_in_the_driver_and_workers_unless_the_user_chose(monkeypatch):
  # TensorFlow's oneDNN rewrites (on by default on AVX512_VNNI CPUs only) and oneDNN's instruction set
  # decide the bits; pinned, every AVX2 machine runs the same kernels. `import tff_graph` pinned this
  # process (conftest imports data_prep first, as the programs do); a user's own value is kept.
  assert {k: runtime.CPU_KERNELS[k] for k in ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA")} == {
      "TF_ENABLE_ONEDNN_OPTS": "0", "ONEDNN_MAX_CPU_ISA": runtime.CPU_ISA}
  if platform.machine() == "x86_64":
    assert runtime.CPU_KERNELS["OPENBLAS_CORETYPE"] == "Haswell"
  for name, value in runtime.CPU_KERNELS.items():
    assert os.environ[name] == value
    monkeypatch.delenv(name)  # Workers are pinned even if the driver's value went.
  assert {k: runtime.worker_environment()[k] for k in runtime.CPU_KERNELS} == runtime.CPU_KERNELS
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX")
  monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
  assert runtime.worker_environment()["ONEDNN_MAX_CPU_ISA"] == "AVX"
  assert runtime.worker_environment()["TF_ENABLE_ONEDNN_OPTS"] == "1"
  environ = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}
  expected = {**runtime.CPU_KERNELS, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}
  assert runtime.pin_cpu_kernels(environ) == expected and environ == expected


def test_other_programs_started_beside_ours_get_the_environment_without_our_pins(monkeypatch):
  # benchmarks.vs_reference starts the papers' PyTorch code with cpu_kernels.unpinned(): the kernels it
  # would get on its own (a fair comparison), while a value the user set stays.
  from data_prep import cpu_kernels  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(cpu_kernels, "_SET_HERE", set())
  for name in cpu_kernels.CPU_KERNELS:
    monkeypatch.delenv(name, raising=False)
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX")  # The user's own.
  with pytest.warns(RuntimeWarning, match="tensorflow was imported before"):
    cpu_kernels.pin()
  assert os.environ["TF_ENABLE_ONEDNN_OPTS"] == "0" and os.environ["ONEDNN_MAX_CPU_ISA"] == "AVX"
  other = cpu_kernels.unpinned({**os.environ, "PYTHONPATH": "x"})
  assert "TF_ENABLE_ONEDNN_OPTS" not in other and "OPENBLAS_CORETYPE" not in other
  assert other["ONEDNN_MAX_CPU_ISA"] == "AVX" and other["PYTHONPATH"] == "x"


_MATMUL_BITS = """
import hashlib, sys, warnings
warnings.simplefilter("error", RuntimeWarning)
if sys.argv[1] == "tff_graph_first":
  import tff_graph
import numpy as np
if sys.argv[1] == "numpy_first":  # NumPy's OpenBLAS chose its kernels before the pins.
  import data_prep
  from data_prep import cpu_kernels
  print(cpu_kernels.blas_core(), flush=True)
  cpu_kernels.check_blas("the RWSE")
  sys.exit(0)
import tensorflow as tf
if sys.argv[1] == "tensorflow_first":
  import tff_graph
a = tf.constant(np.random.default_rng(0).normal(size=(300, 777)).astype(np.float32))
f = tf.function(lambda a: tf.nn.relu(tf.matmul(a, a, transpose_b=True)) @ a)
m = np.random.default_rng(1).normal(size=(200, 9, 9))
print(hashlib.sha1(f(a).numpy().tobytes()).hexdigest(), hashlib.sha1(np.linalg.eigh(m + m.transpose(0, 2, 1))[1].tobytes()).hexdigest())
"""


def test_import_tff_graph_before_tensorflow_runs_the_pinned_kernels_and_after_it_warns():
  # On a CPU with AVX512_VNNI (where TensorFlow's default turns the oneDNN rewrites on) or AVX-512 (where
  # OpenBLAS picks other eigh kernels) the default bits differ from the pinned ones; on other CPUs they
  # agree. Either way `import tff_graph` first must give the bits (TensorFlow matmuls, NumPy's eigh) of
  # a process started with the pins, and importing TensorFlow first must say so.
  def run(mode, **env):
    environ = {k: v for k, v in os.environ.items() if k not in runtime.CPU_KERNELS}
    done = subprocess.run([sys.executable, "-c", _MATMUL_BITS, mode], env={**environ, **env},
                          capture_output=True, text=True, cwd=REPO, check=False)
    return done.returncode, done.stdout.strip(), done.stderr
  rc, pinned_first, _ = run("tff_graph_first")
  assert rc == 0
  rc, started_pinned, _ = run("plain", **runtime.CPU_KERNELS)
  assert rc == 0 and pinned_first == started_pinned
  rc, _, err = run("tensorflow_first")
  assert rc != 0 and "tensorflow was imported before tff_graph pinned its CPU kernels" in err
  # NumPy first: OpenBLAS runs the CPU's own kernels; where they compute otherwise than the pinned
  # (AVX-512 machines), computing an embedding with them warns.
  rc, core, err = run("numpy_first")
  assert core
  assert (rc != 0) == (core.lower() not in ("haswell", "zen")), (core, err)
  assert rc == 0 or "the RWSE: NumPy's OpenBLAS runs its" in err