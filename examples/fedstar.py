"""FedStar (Tan et al., AAAI 2023) through the Python API: the run folder of `programs.train`."""

import tff_graph
from examples import _args

args = _args.parse(__doc__)
prepared = tff_graph.prepare_setting(args.setting, data_dir=args.data_dir, cache_dir=args.cache_dir)
config = tff_graph.ExperimentConfig("fedstar", data=tff_graph.DataConfig(setting=args.setting),
                                    run=tff_graph.RunConfig(rounds=args.rounds, seeds=(1,)))
with tff_graph.execution_context():
  result = tff_graph.run_experiment(config, prepared, args.output_dir, overwrite=True)
mean, std = result.aggregate()
print(f"FedStar on {args.setting}: {100 * mean:.2f} ± {100 * std:.2f}  ({args.output_dir})")
