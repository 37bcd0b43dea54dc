"""TFF aggregation factories of tff-graph."""

from tff_graph.aggregators.clusterwise_mean import ClusterwiseFactory
