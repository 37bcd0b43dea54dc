"""Client states kept where the clients run (`WorkerStates`): same results, only references travel."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.core.impl.computation import computation_impl

from tff_graph import checkpoints
from tff_graph import program_logic
from tff_graph import runtime
from tff_graph.federated import process as process_lib
from tests.conftest import make_process


def _flat(structure):
  return [np.asarray(v) for v in tf.nest.flatten(structure)]


def _assert_equal(a, b):
  fa, fb = _flat(a), _flat(b)
  assert len(fa) == len(fb)
  for x, y in zip(fa, fb):
    np.testing.assert_array_equal(x, y)


def _nbytes(structure) -> int:
  return sum(a.nbytes for a in _flat(structure))


def _run(process, prepared, rounds, **kwargs):
  return program_logic.train_process(process, prepared.clients, seed=3, rounds=rounds, eval_every=rounds, **kwargs)


def test_states_on_the_worker_give_the_same_results_bit_for_bit_and_resume_exactly(tff_context, mutag3, tmp_path):
  process = make_process(mutag3, "fedstar", seed=3)
  on_worker = process_lib.with_worker_states(process, str(tmp_path / "states"))
  (tmp_path / "states").mkdir()
  # Only references are CLIENTS-placed state: nothing of the private weights is in next's signature.
  ref_type = tff.StructType([(n, tff.TensorType(np.int32)) for n in ("client", "slot", "version", "keep")])
  assert on_worker.next.type_signature.parameter[1].member.is_equivalent_to(ref_type)
  assert on_worker.next.type_signature.result.client_states.member.is_equivalent_to(ref_type)
  assert on_worker.evaluate.type_signature.parameter[1].member.is_equivalent_to(ref_type)

  straight = _run(process, mutag3, 4)
  manager = checkpoints.NpzProgramStateManager(tmp_path / "ckpt", keep_total=2)
  first = _run(on_worker, mutag3, 4, checkpoint_every=2, state_manager=manager)
  assert program_logic.run_sync(manager.get_versions()) == [2]
  # The slot the checkpoint refers to was protected while rounds 3-4 wrote theirs: a new loop on the
  # same checkpoints (as after a kill -9 at round 4) reads it and ends identically.
  resumed = _run(on_worker, mutag3, 4, checkpoint_every=2,
                 state_manager=checkpoints.NpzProgramStateManager(tmp_path / "ckpt", keep_total=2))
  for run in (first, resumed):
    _assert_equal(run.state.server_state, straight.state.server_state)
    _assert_equal(on_worker.fetch_client_states(run.state.client_states), straight.state.client_states)
    assert run.final == straight.final
  assert all(int(r["version"]) == 4 for r in first.state.client_states)


def test_a_state_file_that_does_not_match_its_reference_is_a_clear_error(tff_context, mutag3, tmp_path):
  on_worker = process_lib.with_worker_states(make_process(mutag3, "local", seed=3), str(tmp_path))
  result = _run(on_worker, mutag3, 1)
  refs = result.state.client_states
  path = lambda r: tmp_path / f"client_{int(r['client'])}_slot{int(r['slot'])}.state"
  # Client 1's file holds client 0's state: refused, naming the file, never trained on.
  path(refs[1]).write_bytes(path(refs[0]).read_bytes())
  with pytest.raises(runtime.ComputationError, match="client state file"):
    program_logic.evaluate(on_worker, mutag3.clients, result.state, seed=3)
  path(refs[1]).unlink()
  with pytest.raises(runtime.ComputationError):
    program_logic.evaluate(on_worker, mutag3.clients, result.state, seed=3)


def _compiled_bytes(computation) -> int:
  """Bytes of the computation as the driver sends it to a worker (with every call)."""
  return computation_impl.ConcreteComputation.get_proto(runtime.compile_computation(computation)).ByteSize()


def _traffic_per_round(prepared, algorithm, hidden, directory=None):
  """Bytes sent and received by the driver per round (rounds 2-3; `computation`: the bytes of the
  compiled `next` itself, sent with each call) and the clients' state bytes."""
  counter = runtime.TrafficCounter()
  with runtime.execution_context(1, traffic=counter):
    process = make_process(prepared, algorithm, seed=3, model=dict(hidden=hidden))
    if directory is not None:
      process = process_lib.with_worker_states(process, str(directory))
    seen = []
    result = program_logic.train_process(process, prepared.clients, seed=3, rounds=3, eval_every=100,
                                         on_round=lambda *_: seen.append(counter.snapshot()))
    states = process.fetch_client_states(result.state.client_states)
  per_round = {k: (seen[2][k] - seen[0][k]) / 2 for k in ("sent", "received")}
  per_round["computation"] = _compiled_bytes(process.next)
  return per_round, _nbytes(states)


def test_bytes_between_driver_and_worker_do_not_grow_with_the_private_state(mutag3, tmp_path):
  # Local: everything is private, so the state grows ~16x from hidden 16 to 64 and nothing shared does.
  small, small_state = _traffic_per_round(mutag3, "local", 16, tmp_path / "a")
  large, large_state = _traffic_per_round(mutag3, "local", 64, tmp_path / "b")
  driver, driver_state = _traffic_per_round(mutag3, "local", 64)
  assert large_state == driver_state and large_state > 8 * small_state
  # States travelling: every round the driver sends each state and gets it back (the counter sees them).
  assert driver["sent"] > large_state and driver["received"] > large_state
  # States on the worker: the reply carries references and metrics only, whatever the state's size; the
  # request is the computation (TFF sends it with every call; it grows with the model because TFF's
  # compiler folds the variables' initial values into constants) plus client data and references.
  assert large["received"] < 0.01 * large_state
  assert abs(large["received"] - small["received"]) < 0.001 * (large_state - small_state)
  besides = [run["sent"] - run["computation"] for run in (small, large)]  # Client data and references.
  assert 0 < besides[1] < 0.01 * large_state
  assert abs(besides[1] - besides[0]) < 0.001 * (large_state - small_state)
  assert driver["sent"] - driver["computation"] > 0.9 * large_state


def test_two_workers_with_states_on_the_workers_equal_one_process(mutag3, tmp_path):
  with runtime.execution_context(1):
    one = _run(make_process(mutag3, "fedstar", seed=3), mutag3, 3)
  with runtime.execution_context(2):
    on_workers = process_lib.with_worker_states(make_process(mutag3, "fedstar", seed=3), str(tmp_path))
    two = _run(on_workers, mutag3, 3)
    states = on_workers.fetch_client_states(two.state.client_states)
  # Two workers sum the aggregate in two parts: equal up to float rounding, as without worker states.
  for a, b in zip(_flat(one.state.server_state), _flat(two.state.server_state)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  for a, b in zip(_flat(one.state.client_states), _flat(states)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  assert sorted(int(r["client"]) for r in two.state.client_states) == [0, 1, 2]


def test_a_process_not_built_by_build_process_cannot_move_its_states(mutag3):
  process = make_process(mutag3, "local", seed=3)
  with pytest.raises(process_lib.ProcessError, match="already keeps"):
    process_lib.with_worker_states(process_lib.with_worker_states(process, "/tmp/x"), "/tmp/y")
  process.build_arguments = None
  with pytest.raises(process_lib.ProcessError, match="not composed by build_process"):
    process_lib.with_worker_states(process, "/tmp/x")
