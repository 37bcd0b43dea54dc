"""Keras GNNs on TF-GNN with a declared partition into named parts.

Re-exports: `ModelSpec`, `build_model`, `model_fn_for`, `GINClassifier`, `DecoupledClassifier`,
`PartitionedModel` and the part helpers (`model_parts`, `part_variables`, `check_partition`,
`parameter_counts`), `PartitionError`, `export_saved_model`, the convolutions `GINConv`, `GCNConv`,
`SAGEConv`, and `register_convolution` / `tfgnn_convolution` (TF-GNN layers as backbones).
"""

from tff_graph.models.classifiers import DECOUPLED_MODEL
from tff_graph.models.classifiers import DecoupledClassifier
from tff_graph.models.classifiers import GIN_MODEL
from tff_graph.models.classifiers import GINClassifier
from tff_graph.models.classifiers import ModelSpec
from tff_graph.models.classifiers import PartitionError
from tff_graph.models.classifiers import PartitionedModel
from tff_graph.models.classifiers import build_model
from tff_graph.models.classifiers import check_partition
from tff_graph.models.classifiers import model_fn_for
from tff_graph.models.classifiers import model_parts
from tff_graph.models.classifiers import parameter_counts
from tff_graph.models.classifiers import part_variables
from tff_graph.models.export import export_saved_model
from tff_graph.models.export import predict_saved_model
from tff_graph.models.layers import GCNConv
from tff_graph.models.layers import GINConv
from tff_graph.models.layers import SAGEConv
from tff_graph.models.layers import register_convolution
from tff_graph.models.layers import tfgnn_convolution
from tff_graph.models.layers import TFGNNConvolution
