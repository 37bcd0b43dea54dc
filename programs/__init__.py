"""Runnable entry points. Flags live here only; the library takes explicit arguments."""

# Before any program imports TensorFlow: `import data_prep` pins its CPU kernels (data_prep.cpu_kernels).
import data_prep  # noqa: E402,F401  pylint: disable=unused-import
