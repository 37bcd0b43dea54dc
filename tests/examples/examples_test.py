"""Every script in examples/ runs as a user runs it, on a tiny setting, and leaves a full run folder."""

from __future__ import annotations

import asyncio
import csv
import os
import pathlib
import subprocess
import sys

import pytest
import tensorflow as tf

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.stem for p in (REPO / "examples").glob("*.py") if not p.stem.startswith("_"))


def _tags(folder) -> set[str]:
  tags = set()
  for path in pathlib.Path(folder).glob("events.out.tfevents.*"):
    for event in tf.compat.v1.train.summary_iterator(str(path)):
      tags.update(v.tag for v in event.summary.value)
  return tags


def _example(name, data_dir, cache_dir, out, *extra):
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  cmd = [sys.executable, "-m", f"examples.{name}", f"--data_dir={data_dir}", f"--cache_dir={cache_dir}",
         f"--output_dir={out}", *extra]
  if name == "own_graphs":  # An in-memory dataset federated with a TU dataset.
    cmd += ["--setting=synthetic:2,MUTAG", "--rounds=2"]
  elif name != "custom_algorithm":  # The smallest real setting keeps the suite short.
    cmd += ["--setting=MUTAG:2", "--rounds=2"]
  return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def test_the_examples_are_all_tested():
  assert EXAMPLES == ["custom_algorithm", "dp_fedstar", "fedstar", "own_graphs", "tfgnn_encoder"]


@pytest.mark.parametrize("name,extra", [("fedstar", ()), ("dp_fedstar", ()), ("dp_fedstar", ("--secure",)),
                                        ("tfgnn_encoder", ()), ("custom_algorithm", ()), ("own_graphs", ())])
def test_example_runs_and_fills_its_run_folder(data_dir, cache_dir, tmp_path, name, extra):
  out = tmp_path / "run"
  proc = _example(name, data_dir, cache_dir, out, *extra)
  assert proc.returncode == 0, proc.stderr[-3000:]
  for f in ("config.json", "per_client.csv", "DONE", "seed_1/final.json", "seed_1/train_metrics.csv"):
    assert (out / f).is_file(), f
  assert any((out / "seed_1" / "models").iterdir())
  with open(out / "seed_1" / "train_metrics.csv") as f:
    header = next(csv.reader(f))
  if name == "dp_fedstar":
    # The aggregator's measurements are released with the round's metrics.
    wanted = ("server/aggregator/mean_value/secure_upper_threshold" if extra else "server/aggregator/zeroed_count")
    assert wanted in header
    assert f"server/{wanted}" in _tags(out / "seed_1" / "tensorboard")
  if name == "own_graphs":
    assert "(3 clients)" in proc.stdout
    assert (out / "seed_1" / "models" / "0-synthetic").is_dir() and (out / "seed_1" / "models" / "2-MUTAG").is_dir()
  if name == "custom_algorithm":
    assert "gcfl/clusters" in _tags(out / "seed_1" / "tensorboard")
    assert "Euclidean" not in proc.stderr


def test_a_plugin_algorithm_runs_through_the_program(data_dir, cache_dir, tmp_path):
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  cmd = [sys.executable, "-m", "programs.train", "--plugins=examples.custom_algorithm", "--algorithm=gcfl_euclid",
         "--setting=MUTAG:4", "--rounds=3", "--warmup_rounds=1", "--eps1=10", "--eps2=0",
         f"--data_dir={data_dir}", f"--cache_dir={cache_dir}", f"--output_dir={tmp_path / 'run'}"]
  proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "gcfl_euclid on MUTAG:4" in proc.stdout
  without = subprocess.run(cmd[:3] + cmd[4:], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert without.returncode == 2 and "unknown algorithm 'gcfl_euclid'" in without.stderr


def test_the_experiment_api_runs_inside_a_running_event_loop(data_dir, cache_dir, tmp_path):
  # As in a Jupyter notebook: the caller's thread already runs an asyncio loop.
  import tff_graph  # pylint: disable=g-import-not-at-top
  prepared = tff_graph.prepare_setting("MUTAG:2", data_dir=data_dir, cache_dir=cache_dir)
  config = tff_graph.ExperimentConfig("fedavg", data=tff_graph.DataConfig(setting="MUTAG:2"),
                                      run=tff_graph.RunConfig(rounds=2, seeds=(1,), checkpoint_every=1))

  async def notebook_cell():
    asyncio.get_running_loop()  # A loop is running here.
    with tff_graph.execution_context():
      return tff_graph.run_experiment(config, prepared, tmp_path / "run")

  result = asyncio.run(notebook_cell())
  assert (tmp_path / "run" / "DONE").is_file()
  assert (tmp_path / "run" / "seed_1" / "checkpoints").is_dir()
  assert len(result.seeds[0].curve) == 2


def test_the_readme_python_api_snippet_runs(data_dir, cache_dir, tmp_path):
  readme = (REPO / "README.md").read_text()
  code = readme.split("## Python API", 1)[1].split("```python", 1)[1].split("```", 1)[0]
  code = (code.replace('"chem"', '"MUTAG:2"').replace("rounds=20", "rounds=1")
          .replace('data_dir="../shared/data/TUDataset"', f'data_dir="{data_dir}", cache_dir="{cache_dir}"'))
  assert '"MUTAG:2"' in code and "rounds=1" in code and str(cache_dir) in code
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "test_accuracy" in proc.stdout
