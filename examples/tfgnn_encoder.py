"""FedStar whose structure encoder is TF-GNN's own GCN layer (`tensorflow_gnn.models.gcn.GCNConv`).

Any TF-GNN convolution becomes a backbone with `tfgnn_convolution` + `register_convolution`; the
model is passed as a `model_fn`, and the run still gets CSVs, TensorBoard, checkpoints and
SavedModels. Only the structure encoder (now TF-GNN's GCN) is shared, as the model declares.
"""

# tff_graph first: it pins TensorFlow's CPU kernels before TensorFlow loads (same bits on every machine).
import tff_graph  # isort: skip

from tensorflow_gnn.models import gcn  # noqa: E402

from examples import _args  # noqa: E402

args = _args.parse(__doc__)
prepared = tff_graph.prepare_setting(args.setting, data_dir=args.data_dir, cache_dir=args.cache_dir)
tff_graph.register_convolution("tfgnn_gcn", tff_graph.tfgnn_convolution(
    lambda units: gcn.GCNConv(units, activation=None, add_self_loops=True)), replace=True)
spec = tff_graph.ModelSpec(kind="decoupled", structure_backbone="tfgnn_gcn",
                           feature_dim=max(c.feature_dim for c in prepared.clients),
                           num_classes=max(c.num_classes for c in prepared.clients))
config = tff_graph.ExperimentConfig("fedstar", data=tff_graph.DataConfig(setting=args.setting),
                                    run=tff_graph.RunConfig(rounds=args.rounds, seeds=(1,)))
with tff_graph.execution_context():
  result = tff_graph.run_experiment(config, prepared, args.output_dir, overwrite=True,
                                    components=tff_graph.Components(model_fn=tff_graph.model_fn_for(spec)))
print(f"FedStar with TF-GNN's GCNConv on {args.setting}: {100 * result.aggregate()[0]:.2f}")
