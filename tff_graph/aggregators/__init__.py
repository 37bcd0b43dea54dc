"""TFF aggregation factories of tff-graph."""

from tff_graph.aggregators.clusterwise_mean import ClusterwiseFactory
from tff_graph.aggregators.gaussian_mean import GaussianMeanFactory
