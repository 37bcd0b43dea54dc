"""Forward+backward throughput (graphs/second) on one batch of 128 real graphs, both models.

  .venv/bin/python -m benchmarks.models --data_dir=../shared/data/TUDataset [--datasets NCI1 COLLAB]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_gnn as tfgnn  # noqa: E402

from benchmarks import common  # noqa: E402
from data_prep import cache  # noqa: E402
from data_prep import graph_tensor as gt  # noqa: E402
from tff_graph import models  # noqa: E402


def throughput(model: models.PartitionedModel, graph: tfgnn.GraphTensor, repeats: int) -> float:
  optimizer = tf.keras.optimizers.Adam(1e-3)
  loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  @tf.function
  def step(g):
    with tf.GradientTape() as tape:
      loss = loss_fn(g.context[gt.LABEL], model(g, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss

  step(graph).numpy()  # Trace and warm up.
  times = []
  for _ in range(repeats):
    t = time.perf_counter()
    step(graph).numpy()
    times.append(time.perf_counter() - t)
  return 128 / float(np.median(times))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", "../shared/data/TUDataset"))
  parser.add_argument("--cache_dir", default=None)
  parser.add_argument("--datasets", nargs="+", default=["NCI1", "COLLAB"])
  parser.add_argument("--repeats", type=int, default=20)
  args = parser.parse_args()
  print(common.machine())
  print(f"{'dataset':10s} {'model':10s} {'nodes':>7s} {'edges':>9s} {'graphs/s':>9s} {'ms/batch':>9s}")
  for name in args.datasets:
    ds = cache.load_dataset(name, data_dir=args.data_dir, cache_dir=args.cache_dir)
    examples = [ds.encode(g) for g in range(128)]
    spec = gt.graph_spec(gt.graph_schema(ds.features.shape[1], ds.rwse.shape[1], ds.dse.shape[1]))
    graph = tfgnn.parse_example(spec, tf.constant(examples)).merge_batch_to_components()
    nodes = int(tf.reduce_sum(graph.node_sets[gt.NODES].sizes))
    edges = int(tf.reduce_sum(graph.edge_sets[gt.EDGES].sizes))
    for kind in (models.GIN_MODEL, models.DECOUPLED_MODEL):
      model = models.build_model(models.ModelSpec(kind=kind, feature_dim=ds.features.shape[1],
                                                  num_classes=ds.data.num_classes))
      gps = throughput(model, graph, args.repeats)
      print(f"{name:10s} {kind:10s} {nodes:7d} {edges:9d} {gps:9.0f} {128 / gps * 1000:9.1f}", flush=True)


if __name__ == "__main__":
  main()
