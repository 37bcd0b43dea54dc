"""tff-graph: federated graph classification on non-IID graphs with TFF and TF-GNN.

Packages: `models` (Keras GNNs with a declared shared/private partition), and the federated
algorithms built on them.
"""
