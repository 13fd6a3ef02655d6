"""Element-wise ops (unary and broadcasting binary), all on the vector unit."""

from __future__ import annotations

from ...kernels import elementwise as ew
from ..registry import Category, OpDef, VecClass, broadcast_shapes, register


def _same(ins, attrs, consts):
    return [(ins[0].shape, ins[0].dtype)]


def _bcast(ins, attrs, consts):
    from ...errors import GraphError

    dtypes = {v.dtype for v in ins}
    if len(dtypes) > 1:
        raise GraphError(f"inputs have different dtypes {sorted(dtypes)}")
    return [(broadcast_shapes(*(v.shape for v in ins)), ins[0].dtype)]


def _binary(op_type: str, ufunc, scalar, vec_class=VecClass.BINARY, commutative=False):
    register(OpDef(op_type, _bcast, ew.binary(ufunc), Category.BROADCAST, inputs=("a", "b"),
                   vec_class=vec_class, scalar=scalar, commutative=commutative))


def _unary(op_type: str, ufunc, scalar, vec_class=VecClass.UNARY, **kw):
    register(OpDef(op_type, _same, ew.unary(ufunc), Category.ELEMWISE, vec_class=vec_class,
                   scalar=scalar, **kw))


_binary("Add", ew.add_ufunc, ew._add, commutative=True)
_binary("Mul", ew.mul_ufunc, ew._mul, commutative=True)
_unary("Relu", ew.relu_ufunc, ew._relu)
