"""Benchmarks that print their figures (see README.md here); CI runs none of them."""

# Before any benchmark imports NumPy or TensorFlow: `import data_prep` pins their CPU kernels, so a
# benchmark computes the bits the programs do (data_prep.cpu_kernels).
import data_prep  # noqa: F401  pylint: disable=unused-import
