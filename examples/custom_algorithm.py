"""A new algorithm defined outside the library: clustered FedAvg that splits on Euclidean distance.

`EuclideanRule` is a `SplitRule` (TensorFlow): a cluster is cut where the members' updates are far
apart (min-cut weights exp(-||u_i - u_j|| / mean distance)); GCFL's gate, min-cut and bookkeeping
come with `build_clustered`. `register_algorithm` makes it a name that `run_experiment` and the
programs know:

    python -m programs.train --plugins=examples.custom_algorithm --algorithm=gcfl_euclid ...
"""

import dataclasses

# tff_graph first: it pins TensorFlow's CPU kernels before TensorFlow loads (same bits on every machine).
import tff_graph  # isort: skip

import tensorflow as tf  # noqa: E402


@dataclasses.dataclass(frozen=True)
class EuclideanRule(tff_graph.SplitRule):
  thresholds: tff_graph.SplitThresholds = tff_graph.SplitThresholds()

  def cut_weights(self, state, updates, members):
    del state
    d = tf.norm(updates[:, None, :] - updates[None, :, :], axis=-1)
    pair = tf.cast(tf.logical_and(members[:, None], members[None, :]), d.dtype)
    scale = tf.reduce_sum(d * pair) / tf.maximum(tf.reduce_sum(pair), 1.0)
    return tf.exp(-d / tf.maximum(scale, 1e-12))


GCFL_EUCLID = tff_graph.register_algorithm(tff_graph.AlgorithmSpec(
    name="gcfl_euclid", shared_parts=("gnn",), options=frozenset({"clustering"}),
    build=lambda c: tff_graph.build_clustered(rule=EuclideanRule(c.thresholds), num_clients=c.num_clients,
                                              **c.common)), replace=True)


if __name__ == "__main__":
  from examples import _args  # pylint: disable=g-import-not-at-top
  args = _args.parse(__doc__, setting="MUTAG:4", rounds=4)
  prepared = tff_graph.prepare_setting(args.setting, data_dir=args.data_dir, cache_dir=args.cache_dir)
  # A gate that opens after round 2 (GCFL's default waits 20 rounds).
  config = tff_graph.ExperimentConfig(
      "gcfl_euclid", data=tff_graph.DataConfig(setting=args.setting),
      clustering=tff_graph.ClusteringConfig(eps1=10.0, eps2=0.0, warmup_rounds=2),
      run=tff_graph.RunConfig(rounds=args.rounds, seeds=(1,)))
  with tff_graph.execution_context():
    result = tff_graph.run_experiment(config, prepared, args.output_dir, overwrite=True)
  print(f"gcfl_euclid on {args.setting}: {100 * result.aggregate()[0]:.2f}, "
        f"clusters {result.seeds[0].gcfl['clusters']}")
