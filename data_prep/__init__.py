"""Turns the TU benchmark datasets into TF-GNN GraphTensors split across federated clients.

Modules:
  tu: reads the official TU raw format (zip or extracted folder) into a `TUDataset`.
  features: node features as the papers use them (one-hot labels, attributes, one-hot degree).
  structure: FedStar's structure embeddings (RWSE, DSE).
  partition: the papers' client partitions (one dataset over N clients, multi-dataset groups).
  graph_tensor: the GraphSchema, GraphTensor <-> tf.train.Example conversion and tf.data readers.
  cache: writes each client's train/val/test TFRecords once and skips when current.
"""

from data_prep import cpu_kernels as _cpu_kernels

# Before any module of this project imports TensorFlow: the same CPU kernels on every AVX2 machine.
_cpu_kernels.pin()
