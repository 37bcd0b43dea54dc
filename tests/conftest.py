"""Shared fixtures: the real TU data folder and hand-written TU-format datasets."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import pathlib

# Before any test module imports TensorFlow: pins its CPU kernels, as the programs do (data_prep.cpu_kernels).
import data_prep  # noqa: F401  pylint: disable=unused-import

import dataclasses
import functools

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_SHARED = REPO.parent / "shared" / "data" / "TUDataset"


def real_data_dir() -> pathlib.Path | None:
  path = pathlib.Path(os.environ.get("TFF_GRAPH_DATA", DEFAULT_SHARED))
  return path if (path / "MUTAG.zip").is_file() or (path / "MUTAG").is_dir() else None


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
  """The real TU datasets; required on CI, skipped elsewhere when absent."""
  path = real_data_dir()
  if path is None:
    if os.environ.get("CI"):
      pytest.fail(f"CI needs the TU datasets at $TFF_GRAPH_DATA or {DEFAULT_SHARED}")
    pytest.skip("real TU datasets not found (set TFF_GRAPH_DATA)")
  return path


@functools.lru_cache(maxsize=None)
def read_real(data_dir: pathlib.Path, name: str):
  """A real TU dataset, parsed once per test session (COLLAB takes ~30 s): read-only for tests."""
  from data_prep import tu  # pylint: disable=g-import-not-at-top
  return tu.read_tu_dataset(name, data_dir)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> pathlib.Path:
  """One cache per test session, so tests never touch the user's cache."""
  return tmp_path_factory.mktemp("tff_graph_cache")


def write_tu(folder: pathlib.Path, name: str, files: dict[str, str]) -> pathlib.Path:
  """Writes `<folder>/<name>/<name>_<suffix>.txt` for every suffix; returns `folder`."""
  d = folder / name
  d.mkdir(parents=True, exist_ok=True)
  for suffix, text in files.items():
    (d / f"{name}_{suffix}.txt").write_text(text)
  return folder


# Two graphs: a triangle (nodes 1-3) with a self-loop on 1 and a duplicated edge, and a path 4-5-6
# plus an isolated node 7. Raw graph labels -1 / 1.
SMALL = {
    "A": "1, 2\n2, 1\n1, 2\n2, 3\n3, 2\n1, 3\n3, 1\n1, 1\n4, 5\n5, 4\n5, 6\n6, 5\n",
    "graph_indicator": "1\n1\n1\n2\n2\n2\n2\n",
    "graph_labels": "-1\n1\n",
    "node_labels": "2\n4\n2\n3\n3\n2\n2\n",
    "node_attributes": "0.5, 1\n1, 2\n2, 3\n3, 4\n4, 5\n5, 6\n6, 7\n",
}


# Federated fixtures: small real settings and one TFF context per test module.


@pytest.fixture(scope="module")
def tff_context():
  from tff_graph import runtime  # pylint: disable=g-import-not-at-top
  with runtime.local_execution_context() as context:
    yield context


@pytest.fixture(scope="session")
def mutag3(data_dir, cache_dir):
  """MUTAG split over 3 clients (real data, ~60 graphs each)."""
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  return cache.prepare_setting("MUTAG:3", data_dir=data_dir, cache_dir=cache_dir)


@pytest.fixture(scope="session")
def mutag1(data_dir, cache_dir):
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  return cache.prepare_setting("MUTAG:1", data_dir=data_dir, cache_dir=cache_dir)


@pytest.fixture(scope="session")
def chem_tiny(data_dir, cache_dir):
  """The 7 CHEM datasets, 150 graphs each: heterogeneous feature widths."""
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  return cache.prepare_setting("chem_tiny", data_dir=data_dir, cache_dir=cache_dir)


def twin_clients(prepared):
  """Two clients holding exactly the first client's data."""
  first = prepared.clients[0]
  twin = dataclasses.replace(first, client_id="twin-" + first.client_id)
  return dataclasses.replace(prepared, clients=(first, twin))


def experiment_config(algorithm: str, *, rounds: int = 3, seed: int = 1, **sections):
  """An ExperimentConfig with section overrides, e.g. training=dict(batch_size=16)."""
  from tff_graph import config as config_lib  # pylint: disable=g-import-not-at-top
  from tff_graph.federated import client_work as cw  # pylint: disable=g-import-not-at-top
  kinds = {"data": config_lib.DataConfig, "model": config_lib.ModelConfig, "training": cw.TrainingConfig,
           "clustering": config_lib.ClusteringConfig, "privacy": config_lib.PrivacyConfig}
  run = dict(rounds=rounds, seeds=(seed,), checkpoint_every=1)
  run.update(sections.pop("run", {}))
  proximal_mu = sections.pop("proximal_mu", None)
  built = {k: kinds[k](**v) for k, v in sections.items()}
  return config_lib.ExperimentConfig(algorithm=algorithm, run=config_lib.RunConfig(**run), proximal_mu=proximal_mu,
                                     **built)


def make_process(prepared, algorithm: str, *, seed: int = 1, thresholds=None, model_aggregator=None, **sections):
  """The process of `algorithm` on `prepared`, built as an experiment builds it (`thresholds`: GCFL's)."""
  from tff_graph import experiment  # pylint: disable=g-import-not-at-top
  if thresholds is not None:
    sections["clustering"] = dict(eps1=thresholds.eps1, eps2=thresholds.eps2, seq_length=thresholds.seq_length,
                                  warmup_rounds=thresholds.warmup_rounds, standardize=thresholds.standardize)
  config = experiment_config(algorithm, seed=seed, **sections)
  return experiment.build_process(config, prepared, seed, experiment.Components(model_aggregator=model_aggregator))
