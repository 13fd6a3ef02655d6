"""The graph IR: Graph, Node, Value, and the op registry.

Importing the package registers every op family (`ops`), so the registry is complete before
any graph is built: the families import the graph and the registry, never the other way.
"""

from . import ops  # noqa: F401  (registers every op family)
from .graph import Graph, Node, static_shape
from .registry import (
                       Category,
                       OpDef,
                       Unit,
                       VecClass,
                       broadcast_shapes,
                       get_op,
                       has_op,
                       ops_in,
                       register,
                       registered_ops,
)
from .tensor import DTYPES, LazyTensor, Value, dtype_name, itemsize, numel

__all__ = ["Graph", "Node", "Value", "LazyTensor", "OpDef", "Category", "Unit", "VecClass",
           "DTYPES", "broadcast_shapes", "dtype_name", "get_op", "has_op", "itemsize", "numel",
           "ops_in", "register", "registered_ops", "static_shape"]
