"""Fixtures for the federated tests: small real settings and one TFF context per module."""

from __future__ import annotations

import dataclasses

import pytest

from data_prep import cache
from tff_graph import runtime


@pytest.fixture(scope="module")
def tff_context():
  with runtime.local_execution_context() as context:
    yield context


@pytest.fixture(scope="session")
def mutag3(data_dir, cache_dir) -> cache.PreparedSetting:
  """MUTAG split over 3 clients (real data, ~60 graphs each)."""
  return cache.prepare_setting("MUTAG:3", data_dir=data_dir, cache_dir=cache_dir)


@pytest.fixture(scope="session")
def mutag1(data_dir, cache_dir) -> cache.PreparedSetting:
  return cache.prepare_setting("MUTAG:1", data_dir=data_dir, cache_dir=cache_dir)


@pytest.fixture(scope="session")
def chem_tiny(data_dir, cache_dir) -> cache.PreparedSetting:
  """The 7 CHEM datasets, 150 graphs each: heterogeneous feature widths."""
  return cache.prepare_setting("chem_tiny", data_dir=data_dir, cache_dir=cache_dir)


def twin_clients(prepared: cache.PreparedSetting) -> cache.PreparedSetting:
  """Two clients holding exactly the first client's data."""
  first = prepared.clients[0]
  twin = dataclasses.replace(first, client_id="twin-" + first.client_id)
  return dataclasses.replace(prepared, clients=(first, twin))
