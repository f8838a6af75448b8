"""The benchmarks, one package each (listed in burstbench.registry.BENCHMARKS).

Each package declares its Benchmark (``SPEC``) in its ``__init__`` and keeps its parts
apart: ``params`` (its keys, their defaults, checks and docs), ``tasks`` (probe the
machine, expand the parameters into tasks, estimate them), ``results`` (parse one task's
output into rows, spread repetitions, the values it is judged by) and ``report`` (its
figures and tables).  No benchmark imports another.
"""
