"""Federated algorithms: builders returning `tff.templates.IterativeProcess`es, and their registry."""

from tff_graph.algorithms.fed_avg import build_fedavg
from tff_graph.algorithms.fed_avg import build_fedper
from tff_graph.algorithms.fed_avg import build_fedprox
from tff_graph.algorithms.fed_avg import build_local
from tff_graph.algorithms.fed_avg import FEDPROX_MU
from tff_graph.algorithms.fed_star import build_fedstar
from tff_graph.algorithms.gcfl import build_clustered
from tff_graph.algorithms.gcfl import build_gcfl
from tff_graph.algorithms.gcfl import build_gcfl_plus
from tff_graph.algorithms.gcfl import build_gcfl_plus_dws
from tff_graph.algorithms.registry import AlgorithmSpec
from tff_graph.algorithms.registry import BuildContext
from tff_graph.algorithms.registry import get
from tff_graph.algorithms.registry import names
from tff_graph.algorithms.registry import register
from tff_graph.algorithms.registry import UnknownAlgorithmError
