"""tff-graph: federated graph classification on non-IID graphs with TFF and TF-GNN.

The public API (see README.md, "Python API"):

* algorithms, each a builder returning a `tff.templates.IterativeProcess` (`GraphProcess`):
  `build_fedavg`, `build_fedprox`, `build_fedper`, `build_local`, `build_fedstar`, `build_gcfl`,
  `build_gcfl_plus`, `build_gcfl_plus_dws`, `build_clustered` (any `SplitRule`), `build_process`
  (the composer they all use); the registry `AlgorithmSpec`, `BuildContext`, `register_algorithm`,
  `get_algorithm`, `algorithm_names`;
* components: `ClusterwiseFactory` (per-cluster aggregation around any `tff.aggregators` factory),
  `CosineRule` / `SequenceDTWRule` / `SplitRule` (GCFL's clustering), `ClientWork`,
  `TrainingConfig`, `InputSpec`, `ClientSpec`;
* models: `ModelSpec`, `build_model`, `model_fn_for`, `PartitionedModel`, `GINClassifier`,
  `DecoupledClassifier`, `register_convolution`, `tfgnn_convolution`;
* running: `train_process` (the one round loop), `Releases`, `LoopState`, `TrainingResult`,
  `run_experiment` (run folders: CSV, TensorBoard, checkpoints, SavedModels, tables),
  `ExperimentConfig` and its sections, `Components`, `prepare_setting`, `prepare_data`, `execution_context`;
* data: `parse_setting` (the setting grammar), `graphs` (datasets from NumPy arrays, networkx graphs or
  GraphTensors: `graphs.from_numpy`, `graphs.from_networkx`, `graphs.from_graph_tensors`).
"""

# First: importing data_prep pins TensorFlow's and NumPy's CPU kernels before either loads (the same
# bits on every AVX2 machine, the driver's own work included; data_prep.cpu_kernels).
from data_prep import graphs
from data_prep.cache import prepare_setting  # noqa: E402
from data_prep.partition import parse_setting
from tff_graph.aggregators import ClusterwiseFactory
from tff_graph.algorithms import AlgorithmSpec
from tff_graph.algorithms import BuildContext
from tff_graph.algorithms import build_clustered
from tff_graph.algorithms import build_fedavg
from tff_graph.algorithms import build_fedper
from tff_graph.algorithms import build_fedprox
from tff_graph.algorithms import build_fedstar
from tff_graph.algorithms import build_gcfl
from tff_graph.algorithms import build_gcfl_plus
from tff_graph.algorithms import build_gcfl_plus_dws
from tff_graph.algorithms import build_local
from tff_graph.algorithms import get as get_algorithm
from tff_graph.algorithms import names as algorithm_names
from tff_graph.algorithms import register as register_algorithm
from tff_graph.clustering import SplitThresholds
from tff_graph.config import ClusteringConfig
from tff_graph.config import DataConfig
from tff_graph.config import ExperimentConfig
from tff_graph.config import ModelConfig
from tff_graph.config import RunConfig
from tff_graph.experiment import Components
from tff_graph.experiment import prepare_data
from tff_graph.experiment import run_experiment
from tff_graph.federated.client_work import ClientSpec
from tff_graph.federated.client_work import ClientWork
from tff_graph.federated.client_work import InputSpec
from tff_graph.federated.client_work import TrainingConfig
from tff_graph.federated.cluster_rules import CosineRule
from tff_graph.federated.cluster_rules import SequenceDTWRule
from tff_graph.federated.cluster_rules import SplitRule
from tff_graph.federated.process import GraphProcess
from tff_graph.federated.process import build_process
from tff_graph.models import DecoupledClassifier
from tff_graph.models import GINClassifier
from tff_graph.models import ModelSpec
from tff_graph.models import PartitionedModel
from tff_graph.models import build_model
from tff_graph.models import model_fn_for
from tff_graph.models import register_convolution
from tff_graph.models import tfgnn_convolution
from tff_graph.program_logic import LoopState
from tff_graph.program_logic import Releases
from tff_graph.program_logic import TrainingResult
from tff_graph.program_logic import train_process
from tff_graph.runtime import execution_context
from tff_graph.version import VERSION

__version__ = VERSION
