"""The numpy reference runtime: plan-once execution of Core AI programs.

``Program.run`` uses the default runtime. The pieces:

- :class:`Runtime` holds a kernel table that overlays the frozen default table
  (``DEFAULT_TABLE``); register kernels for custom ops on an instance with
  ``Runtime.register_kernel`` (local to it); run with ``Runtime(...).run(program, inputs)``,
  and pass it on (``program.optimize(runtime=rt)`` folds constants with it).
  :func:`prepared_by` gives a kernel a ``prepare`` step run once per op when planning.
- :class:`Plan` is a graph compiled once (kernels, decoded attributes, value slots);
  ``Runtime.plan(program, entrypoint)`` returns the cached one.
- :func:`run_program`, :func:`run_graph_collect` (also returns every intermediate value) and
  :func:`evaluate_op` (one op on concrete arrays, used by constant folding);
  :func:`interpolation_plan` (the indices and weights ``coreai.interpolate`` resizes with, for
  exporters that must reproduce it).
- Runs take a ``seed`` for the random ops; :func:`current_generator` gives a kernel the
  run's numpy Generator, :func:`seeded` sets one for a ``with`` block.
"""

from coreai_core.runtime._inputs import input_type_problems, to_array
from coreai_core.runtime._rng import Seed, current_generator, seeded
from coreai_core.runtime._runtime import (
    Runtime,
    default_runtime,
    evaluate_op,
    run_graph_collect,
    run_program,
)
from coreai_core.runtime._table import DEFAULT_TABLE, KernelTable
from coreai_core.runtime.kernels._registry import prepared_by
from coreai_core.runtime.kernels.nn import interpolation_plan
from coreai_core.runtime.plan import KernelError, Plan, PlanError, Region

__all__ = [
    "DEFAULT_TABLE", "KernelError", "KernelTable", "Plan", "PlanError", "Region", "Runtime",
    "Seed", "current_generator", "default_runtime", "evaluate_op", "input_type_problems",
    "interpolation_plan", "prepared_by", "run_graph_collect", "run_program", "seeded", "to_array",
]
