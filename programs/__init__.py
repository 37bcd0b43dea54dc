"""Runnable entry points. Flags live here only; the library takes explicit arguments."""
