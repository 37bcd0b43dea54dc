"""Federated machinery shared by every algorithm: client work, the TFF process, the round driver."""
