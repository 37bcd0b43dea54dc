"""Keras GNNs on TF-GNN with a declared partition into named parts.

Re-exports: `ModelSpec`, `build_model`, `GINClassifier`, `DecoupledClassifier`, `PartitionError`,
`export_saved_model`, and the convolutions `GINConv`, `GCNConv`, `SAGEConv`.
"""

from tff_graph.models.classifiers import DECOUPLED_MODEL
from tff_graph.models.classifiers import DecoupledClassifier
from tff_graph.models.classifiers import GIN_MODEL
from tff_graph.models.classifiers import GINClassifier
from tff_graph.models.classifiers import ModelSpec
from tff_graph.models.classifiers import PartitionError
from tff_graph.models.classifiers import PartitionedModel
from tff_graph.models.classifiers import build_model
from tff_graph.models.export import export_saved_model
from tff_graph.models.export import predict_saved_model
from tff_graph.models.layers import GCNConv
from tff_graph.models.layers import GINConv
from tff_graph.models.layers import SAGEConv
