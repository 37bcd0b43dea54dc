"""FedStar with client-level differential privacy on the shared structure encoder.

The shared update goes through TFF's own aggregators: updates whose norm exceeds 100 are zeroed
(`zeroing_factory`), the others clipped to norm 1 and averaged with Gaussian noise
(`DifferentiallyPrivateFactory.gaussian_fixed`). The private parts never reach the aggregator. The
aggregator's measurements (e.g. `zeroed_count`) are released per round in the run folder's
`train_metrics.csv` and TensorBoard (`server/aggregator/...`). With `--secure`, the sum of the
weighted mean is a `SecureSumFactory` (secure aggregation, simulated) instead.
"""

import sys

# tff_graph first: it pins TensorFlow's CPU kernels before TensorFlow loads (same bits on every machine).
import tff_graph  # isort: skip

import tensorflow_federated as tff  # noqa: E402

from examples import _args  # noqa: E402

secure = "--secure" in sys.argv
if secure:
  sys.argv.remove("--secure")
args = _args.parse(__doc__)
prepared = tff_graph.prepare_setting(args.setting, data_dir=args.data_dir, cache_dir=args.cache_dir)
if secure:  # Clients send value * train size: the bound holds for weighted values.
  aggregator = tff.aggregators.MeanFactory(value_sum_factory=tff.aggregators.SecureSumFactory(1000.0))
else:
  dp = tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(
      noise_multiplier=0.5, clients_per_round=len(prepared.clients), clip=1.0)
  aggregator = tff.aggregators.zeroing_factory(zeroing_norm=100.0, inner_agg_factory=dp)
config = tff_graph.ExperimentConfig("fedstar", data=tff_graph.DataConfig(setting=args.setting),
                                    run=tff_graph.RunConfig(rounds=args.rounds, seeds=(1,)))
with tff_graph.execution_context():
  result = tff_graph.run_experiment(config, prepared, args.output_dir, overwrite=True,
                                    components=tff_graph.Components(model_aggregator=aggregator))
print(f"{'SecAgg' if secure else 'DP'}-FedStar on {args.setting}: {100 * result.aggregate()[0]:.2f}")
