"""Client-level differential privacy and secure aggregation of the shared part, from the configuration.

**DP** (`dp_noise_multiplier` z, `dp_clip` C): each client's update of the *shared* variables is clipped
to L2 norm C, summed, Gaussian noise of stddev z * C is added, and the result divided by the number of
clients aggregated (`tff_graph.aggregators.GaussianMeanFactory`: an unweighted mean, since a
train-size weight would let one client's contribution exceed C; noise seeded by the run seed, so a
resumed run is bit for bit the uninterrupted one). For GCFL the same factory runs per cluster
(`ClusterwiseFactory(inner=...)`), so each cluster's average is private too; the clustering itself,
however, reads every client's raw update (cosine similarities, norms) on the server and is *not*
covered by this guarantee. Private parts (FedStar's feature encoder, FedPer's head, ...) never leave
the client.

**Accounting** (`epsilon`): replace-one adjacency (the number of clients per round is fixed, so the
division by it reveals nothing); replacing one client moves the clipped sum by at most 2C, so a round is
a Gaussian mechanism with noise multiplier z / 2. The loop samples m = floor(q N) of N clients without
replacement (`program_logic.sample_clients`): `SampledWithoutReplacementDpEvent(N, m,
GaussianDpEvent(z / 2))` (all clients every round: `GaussianDpEvent(z / 2)`), composed over the rounds
by `dp_accounting`'s RDP accountant, and epsilon read at `delta`. z = 0 means no noise: epsilon is
infinite.

**Secure aggregation** (`secure_aggregation`): the sum is TFF's `SecureSumFactory` (values clipped to
+-`secure_bound` and, for floats, quantised by TFF to 32-bit integers before the modular sum). In this
simulation TFF's test-backend pass replaces the secure intrinsics by plain sums (`tff_graph.runtime`):
the numbers are those of a secure sum (clipping and quantisation included), but nothing is hidden from
the simulating process. A deployment needs a TFF backend that implements the secure-sum intrinsics (a
real SecAgg protocol between the clients and the server).
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow_federated as tff

DEFAULT_DELTA = 1e-5


@dataclasses.dataclass(frozen=True)
class PrivacySpec:
  """What the aggregation of the shared update does (derived from `config.PrivacyConfig`)."""

  noise_multiplier: float | None = None  # None: no DP.
  clip: float = 1.0
  delta: float = DEFAULT_DELTA
  secure: bool = False
  secure_bound: float = 1000.0

  @property
  def dp(self) -> bool:
    return self.noise_multiplier is not None


def aggregator(spec: PrivacySpec, *, seed: int = 0):
  """The `tff.aggregators` factory for the shared update, or None for the default weighted mean."""
  from tff_graph.aggregators import gaussian_mean  # pylint: disable=g-import-not-at-top
  if spec.dp:
    return gaussian_mean.GaussianMeanFactory(spec.clip, spec.noise_multiplier, seed=seed,
                                             secure_bound=spec.secure_bound if spec.secure else None)
  if spec.secure:  # Clients send value * train size: the bound applies to weighted values.
    return tff.aggregators.MeanFactory(value_sum_factory=tff.aggregators.SecureSumFactory(spec.secure_bound))
  return None


def epsilon(spec: PrivacySpec, *, num_clients: int, clients_per_round: int, rounds: int) -> float:
  """The (epsilon, delta)-DP epsilon after `rounds` rounds (see module docstring); inf without noise."""
  import dp_accounting  # pylint: disable=g-import-not-at-top
  from dp_accounting.rdp import rdp_privacy_accountant as rdp  # pylint: disable=g-import-not-at-top
  if not spec.dp:
    raise ValueError("epsilon is defined only with a noise multiplier")
  if spec.noise_multiplier == 0.0:
    return math.inf
  if rounds == 0:
    return 0.0
  gaussian = dp_accounting.GaussianDpEvent(spec.noise_multiplier / 2)  # Replace-one sensitivity 2C.
  if clients_per_round >= num_clients:
    event = dp_accounting.SelfComposedDpEvent(gaussian, rounds)
  else:
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(num_clients, clients_per_round, gaussian), rounds)
  accountant = rdp.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
  accountant.compose(event)
  return float(accountant.get_epsilon(spec.delta))
