"""The loop-state checkpoints: exact round trip, refusal of other structures, damage, old format, atomicity."""

import collections

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_graph import checkpoints
from tff_graph import program_logic


def _state(seed: int, clients: int = 3):
  rng = np.random.default_rng(seed)
  client = lambda: collections.OrderedDict(
      private=[rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(3,)).astype(np.float32)],
      adam_m=[rng.normal(size=(4, 3)).astype(np.float32)], adam_step=np.int64(seed + 7),
      rng=[rng.integers(0, 2**31, size=(3,), dtype=np.int64)])
  return program_logic.LoopState(
      round=seed, server_state=collections.OrderedDict(round=np.int32(seed), shared=[rng.normal(size=(5,))],
                                                       clusters=()),
      client_states=[client() for _ in range(clients)],
      history=collections.OrderedDict(evaluated=np.array([True, False]), test_accuracy=rng.random((2, clients))))


def _flat_bytes(structure):
  import tree  # pylint: disable=g-import-not-at-top
  return [(np.asarray(v).dtype.str, np.asarray(v).shape, np.asarray(v).tobytes()) for v in tree.flatten(structure)]


def _save(manager, state, version):
  program_logic.run_sync(manager.save(state.to_structure(), version))


def _load(manager, version, template):
  return program_logic.run_sync(manager.load(version, template.to_structure()))


def test_round_trip_is_exact_and_only_the_newest_versions_are_kept(tmp_path):
  manager = checkpoints.NpzProgramStateManager(tmp_path, keep_total=2)
  for v in (1, 2, 3):
    _save(manager, _state(v), v)
  assert program_logic.run_sync(manager.get_versions()) == [2, 3]
  assert sorted(p.name for p in tmp_path.iterdir()) == ["program_state_2.npz", "program_state_3.npz"]
  loaded = program_logic.LoopState.from_structure(_load(manager, 3, _state(0)))
  assert _flat_bytes(loaded.to_structure()) == _flat_bytes(_state(3).to_structure())
  assert loaded.round == 3


def test_a_state_of_another_structure_is_refused_naming_the_array(tmp_path):
  manager = checkpoints.NpzProgramStateManager(tmp_path)
  _save(manager, _state(1), 1)
  with pytest.raises(checkpoints.CheckpointMismatch, match="holds .* arrays, the run's state has"):
    _load(manager, 1, _state(1, clients=4))
  other = _state(1)
  other.client_states[1]["private"][0] = np.zeros((4, 5), np.float32)  # Another model width.
  with pytest.raises(checkpoints.CheckpointMismatch, match=r"client_states/1/private/0 <f4\(4, 3\).*<f4\(4, 5\)"):
    _load(manager, 1, other)


def test_a_damaged_newest_checkpoint_falls_back_to_the_older_one_and_all_damaged_is_an_error(tmp_path):
  manager = checkpoints.NpzProgramStateManager(tmp_path, keep_total=2)
  _save(manager, _state(1), 1)
  _save(manager, _state(2), 2)
  path = manager.path(2)
  data = bytearray(path.read_bytes())
  data[len(data) // 2] ^= 0xFF  # One flipped byte inside an array: zip's CRC-32 catches it.
  path.write_bytes(bytes(data))
  loaded = program_logic._load_newest(manager, _state(0))  # pylint: disable=protected-access
  assert loaded.round == 1
  manager.path(1).write_bytes(b"not an archive")
  with pytest.raises(program_logic.CheckpointError, match="none can be loaded"):
    program_logic._load_newest(manager, _state(0))  # pylint: disable=protected-access


def test_checkpoints_of_the_earlier_savedmodel_format_still_load_and_are_pruned(tmp_path):
  old = tff.program.FileProgramStateManager(str(tmp_path), keep_total=5)
  _save(old, _state(4), 4)
  _save(old, _state(5), 5)
  manager = checkpoints.NpzProgramStateManager(tmp_path, keep_total=2)
  assert program_logic.run_sync(manager.get_versions()) == [4, 5]
  loaded = program_logic._load_newest(manager, _state(0))  # pylint: disable=protected-access
  assert _flat_bytes(loaded.to_structure()) == _flat_bytes(_state(5).to_structure())
  _save(manager, _state(6), 6)  # The next save is an archive; the oldest folder goes.
  assert sorted(p.name for p in tmp_path.iterdir()) == ["program_state_5", "program_state_6.npz"]


def test_an_interrupted_save_leaves_no_version_and_its_temp_file_is_removed(tmp_path, monkeypatch):
  manager = checkpoints.NpzProgramStateManager(tmp_path)
  _save(manager, _state(1), 1)

  def killed(*args, **kwargs):
    raise KeyboardInterrupt  # As a signal in the middle of writing.

  monkeypatch.setattr(checkpoints.np, "savez", killed)
  with pytest.raises(KeyboardInterrupt):
    _save(manager, _state(2), 2)
  assert program_logic.run_sync(manager.get_versions()) == [1]
  (tmp_path / "program_state_3.npz.tmp-999").write_bytes(b"partial")  # What a SIGKILL would leave.
  (tmp_path / "program_state_2_temp123").mkdir()  # ... and what TFF's manager left.
  assert {p.name for p in manager.remove_temporary_files()} == {"program_state_3.npz.tmp-999",
                                                                "program_state_2_temp123"}
  assert sorted(p.name for p in tmp_path.iterdir()) == ["program_state_1.npz"]
