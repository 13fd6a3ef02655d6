"""Every gradient rule against central finite differences in float64 (see gradcheck.py).

Each case is a tiny graph of float64 inputs around the op under test; the check perturbs
every float input along one seeded random direction. Inputs stay away from kinks and
singularities: positive arguments for Log/Sqrt/Pow, denominators >= 1, continuous draws (no
ties at MaxPool/ReLU/ReduceMax), BN variances positive.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import directional_check
from hypothesis import given, settings
from hypothesis import strategies as st

import ascendsim as asim


def _check(build, shapes, shift=0.0, positive=(), wrt=None, seed=0):
    rng = np.random.default_rng(seed)
    g = asim.Graph("rule")
    xs = [g.input(f"x{i}", s, "float64") for i, s in enumerate(shapes)]
    g.output(build(g, *xs))
    feeds = {}
    for i, s in enumerate(shapes):
        v = rng.standard_normal(s) + shift
        feeds[f"x{i}"] = np.abs(v) + 0.5 if i in positive else v
    directional_check(g, feeds, wrt=wrt, seed=seed)


def _bn(g, x, s, b, m, v):
    return g.batch_normalization(x, s, b, m, v)


def _bn_training(g, x, s, b):
    mean, var = g.const(np.zeros(3)), g.const(np.ones(3))
    total, square = g.bn_training_reduce(x)
    return g.bn_training_update(x, total, square, s, b, mean, var, epsilon=1e-5)[0]


def _bn_computed_statistics(g, x, s, b):
    """Inference BatchNormalization fed the batch's own statistics (a training-mode BN as a
    graph computes it): the gradient flows through the computed mean and variance."""
    m = g.reduce_mean(x, [0, 2, 3], keepdims=0)
    d = g.sub(x, g.reshape(m, [1, 3, 1, 1]))
    return g.batch_normalization(x, s, b, m, g.reduce_mean(g.mul(d, d), [0, 2, 3], keepdims=0))


def _scalar(g, v):
    return g.reshape(v, g.const(np.array([], np.int64)))


def _xent(g, x):
    labels = g.const(np.eye(5)[[0, 3, 1]])
    return g.softmax_cross_entropy_with_logits(x, labels)[0]


def _dropout(g, x):
    mask = g.drop_out_gen_mask(shape=[3, 4], keep_prob=0.7, seed=1, seed2=0)
    return g.drop_out_do_mask(x, mask, g.const(np.asarray(0.7)))


CASES = {
    # element-wise and broadcasting
    "add_sub_mul": (lambda g, a, b: g.mul(g.add(a, b), g.sub(a, b)), [(3, 4), (4,)]),
    "div": (lambda g, a, b: g.div(a, g.add(g.mul(b, b), 1.0)), [(3, 4), (3, 1)]),
    "sum": (lambda g, a, b, c: g.sum(a, b, c), [(2, 3), (3,), (2, 1)]),
    "where": (lambda g, a, b: g.where(g.greater(a, 0.0), a, b), [(2, 3), (3,)]),
    "pow2": (lambda g, a: g.pow(a, 2.0), [(2, 3)]),
    "pow": (lambda g, a, p: g.pow(a, g.add(p, 0.0)), [(2, 3), (3,)], {"positive": (0,)}),
    "sqrt_log": (lambda g, a: g.add(g.sqrt(a), g.log(a)), [(2, 3)], {"positive": (0,)}),
    "rsqrt_reciprocal": (lambda g, a: g.add(g.rsqrt(a), g.reciprocal(a)), [(2, 3)],
                         {"positive": (0,)}),
    "exp_neg_abs": (lambda g, a: g.exp(g.neg(g.abs(a))), [(2, 3)]),
    "relu_leaky": (lambda g, a: g.add(g.relu(a), g.leaky_relu(a, alpha=0.1)), [(3, 4)]),
    "tanh_sigmoid_softplus": (lambda g, a: g.mul(g.tanh(a), g.add(g.sigmoid(a),
                                                                   g.softplus(a))), [(3, 4)]),
    "erf": (lambda g, a: g.erf(a), [(2, 3)]),
    "clip": (lambda g, a: g.clip(a, g.const(np.asarray(-0.5)), g.const(np.asarray(0.7))),
             [(3, 4)]),
    "clip_bounds": (lambda g, a, lo, hi: g.clip(a, _scalar(g, g.mul(lo, 0.3)),
                                                _scalar(g, g.add(g.abs(hi), 0.2))),
                    [(3, 4), (1,), (1,)]),
    "max_min_nary": (lambda g, a, b, c: g.add(g.max(a, b, c), g.min(a, b)),
                     [(2, 3), (3,), (2, 1)]),
    "max_min_tied": (lambda g, a, b: g.add(g.max(a, a), g.min(g.add(a, b), g.add(b, a))),
                     [(2, 3), (3,)]),
    "hard_sigmoid_swish": (lambda g, a: g.add(g.hard_sigmoid(a), g.hard_swish(g.mul(a, 4.0))),
                           [(3, 4)]),
    "elu_selu": (lambda g, a: g.add(g.elu(a, alpha=0.7), g.selu(a)), [(3, 4)]),
    "gelu": (lambda g, a: g.gelu(a), [(2, 3)]),
    "gelu_tanh": (lambda g, a: g.gelu(a, approximate="tanh"), [(2, 3)]),
    "cast_identity": (lambda g, a: g.identity(g.cast(a, to="float64")), [(2, 3)]),
    "dropout_inference": (lambda g, a: g.dropout(a), [(2, 3)]),
    "drop_out_do_mask": (_dropout, [(3, 4)]),
    # shapes and data movement
    "reshape_transpose": (lambda g, a: g.transpose(g.reshape(a, [4, 6]), perm=[1, 0]),
                          [(2, 3, 4)]),
    "flatten_unsqueeze_squeeze": (lambda g, a: g.squeeze(g.flatten(g.unsqueeze(a, [1]), axis=1),
                                                         [0]), [(1, 3, 4)]),
    "concat": (lambda g, a, b: g.concat(a, b, axis=1), [(2, 3), (2, 2)]),
    "split": (lambda g, a: g.mul(*g.split(a, axis=1, num_outputs=2)), [(2, 4)]),
    "slice": (lambda g, a: g.slice(a, [1, 0], [3, -1], [1, 0]), [(2, 4)]),
    "gather_rows": (lambda g, a: g.gather(a, g.const(np.array([[0, 2], [2, -1]])), axis=0),
                    [(3, 4)]),
    "gather_axis1": (lambda g, a: g.gather(a, g.const(np.array([0, 2, 2])), axis=1),
                     [(3, 4, 2)]),
    "expand": (lambda g, a: g.expand(a, [2, 3, 4]), [(3, 1)]),
    "pad_and_crop": (lambda g, a: g.pad(a, g.const(np.array([1, -1, 0, 2]))), [(3, 4)]),
    "pad_constant_value": (lambda g, a, c: g.pad(a, g.const(np.array([1, -1, 0, 2])),
                                                 _scalar(g, c)), [(3, 4), (1,)]),
    # reductions
    "reduce_mean_sum": (lambda g, a: g.add(g.reduce_mean(a, [1], keepdims=0),
                                           g.reduce_sum(a, [1], keepdims=0)), [(3, 5)]),
    "reduce_sum_square": (lambda g, a: g.reduce_sum_square(a, [0], keepdims=1), [(3, 5)]),
    "reduce_max_min": (lambda g, a: g.add(g.reduce_max(a, [1], keepdims=1),
                                          g.reduce_min(a, [1], keepdims=1)), [(3, 5)]),
    # cube
    "matmul_shared_weight": (lambda g, a, b: g.matmul(a, b), [(2, 3, 4), (4, 5)]),
    "matmul_batched_broadcast": (lambda g, a, b: g.matmul(a, b), [(2, 2, 3, 4), (2, 1, 4, 5)]),
    "gemm_trans_ab": (lambda g, a, b, c: g.gemm(a, b, c, transA=1, transB=1, alpha=0.5,
                                                 beta=2.0), [(4, 3), (5, 4), (5,)]),
    "gemm_trans_b": (lambda g, a, b, c: g.gemm(a, b, c, transB=1), [(3, 4), (5, 4), (1, 5)]),
    "gemm_trans_a": (lambda g, a, b: g.gemm(a, b, transA=1), [(4, 3), (4, 5)]),
    "bias_add": (lambda g, a, b: g.bias_add(a, b), [(2, 3, 2, 2), (3,)]),
    "conv_strided_bias": (lambda g, x, w, b: g.conv(x, w, b, kernel_shape=[3, 3],
                                                    strides=[2, 2], pads=[1, 1, 1, 1]),
                          [(2, 3, 7, 7), (4, 3, 3, 3), (4,)]),
    "conv_stem_7x7": (lambda g, x, w: g.conv(x, w, kernel_shape=[7, 7], strides=[2, 2],
                                             pads=[3, 3, 3, 3]), [(1, 3, 9, 9), (2, 3, 7, 7)]),
    "conv_grouped": (lambda g, x, w: g.conv(x, w, kernel_shape=[3, 3], strides=[2, 2],
                                            pads=[1, 1, 1, 1], group=2),
                     [(2, 4, 8, 8), (6, 2, 3, 3)]),
    "conv_depthwise": (lambda g, x, w: g.conv(x, w, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                              group=3), [(1, 3, 5, 5), (3, 1, 3, 3)]),
    "conv_dilated": (lambda g, x, w: g.conv(x, w, kernel_shape=[3, 3], pads=[2, 2, 2, 2],
                                            dilations=[2, 2]), [(1, 2, 6, 6), (3, 2, 3, 3)]),
    "conv_1x1_strided_cropped": (lambda g, x, w: g.conv(x, w, kernel_shape=[1, 1],
                                                        strides=[2, 2]),
                                 [(2, 4, 6, 6), (3, 4, 1, 1)]),
    "conv_1d": (lambda g, x, w: g.conv(x, w, kernel_shape=[3], strides=[2], pads=[1, 1]),
                [(2, 3, 9), (4, 3, 3)]),
    # pooling
    "max_pool": (lambda g, x: g.max_pool(x, kernel_shape=[3, 3], strides=[2, 2],
                                         pads=[1, 1, 1, 1]), [(2, 3, 7, 7)]),
    "max_pool_with_argmax": (lambda g, x: g.max_pool_with_argmax(
        x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])[0], [(2, 3, 8, 8)]),
    "avg_pool_excluding_pads": (lambda g, x: g.average_pool(x, kernel_shape=[3, 3],
                                                            strides=[2, 2], pads=[1, 1, 1, 1]),
                                [(2, 3, 7, 7)]),
    "avg_pool_including_pads": (lambda g, x: g.average_pool(
        x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
        [(2, 3, 8, 8)]),
    "avg_pool_ceil_mode": (lambda g, x: g.average_pool(x, kernel_shape=[3, 3], strides=[2, 2],
                                                       ceil_mode=1), [(1, 2, 8, 8)]),
    "global_avg_max_pool": (lambda g, x: g.add(g.global_average_pool(x),
                                               g.global_max_pool(x)), [(2, 3, 4, 4)]),
    # normalisations
    "softmax": (lambda g, a: g.softmax(g.tanh(a), axis=1), [(3, 5)]),
    "log_softmax": (lambda g, a: g.log_softmax(a, axis=0), [(3, 5)]),
    "layer_norm": (lambda g, x, s, b: g.layer_normalization(x, s, b, axis=-1, epsilon=1e-5),
                   [(2, 3, 8), (8,), (8,)]),
    "layer_norm_two_axes_stats": (lambda g, x, s, b: g.layer_normalization(
        x, s, b, axis=1, epsilon=1e-5, num_outputs=3)[0], [(2, 3, 4), (3, 4), (3, 4)]),
    "layer_norm_statistics_read": (lambda g, x, s, b: g.add(*g.layer_normalization(
        x, s, b, axis=1, epsilon=1e-5, num_outputs=3, stash_type=11)[1:]),
        [(2, 3, 4), (3, 4), (3, 4)]),
    "batch_norm_inference": (_bn, [(2, 3, 4, 4), (3,), (3,), (3,), (3,)],
                             {"positive": (4,), "wrt": ["x0", "x1", "x2"]}),
    "batch_norm_running_statistics": (_bn, [(2, 3, 4, 4), (3,), (3,), (3,), (3,)],
                                      {"positive": (4,)}),
    "batch_norm_computed_statistics": (_bn_computed_statistics, [(2, 3, 4, 4), (3,), (3,)]),
    "bn_training": (_bn_training, [(2, 3, 4, 4), (3,), (3,)]),
    "lrn_odd": (lambda g, x: g.lrn(x, size=5, alpha=1e-2, beta=0.75, bias=1.0), [(2, 7, 3, 3)]),
    "lrn_even": (lambda g, x: g.lrn(x, size=4, alpha=1e-1, beta=0.75, bias=2.0), [(2, 5, 3, 3)]),
    "softmax_cross_entropy_with_logits": (_xent, [(3, 5)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_matches_finite_differences(case):
    build, shapes, *opts = CASES[case]
    _check(build, shapes, **(opts[0] if opts else {}))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_broadcasting_binary_ops_unbroadcast(shape, data):
    """a op b for b's shape any broadcastable sub-shape of a's: the cotangent of b is summed
    back to b's shape (ReduceSum + Reshape)."""
    keep = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    drop = data.draw(st.integers(0, len(shape)))
    b_shape = [d if k else 1 for d, k in zip(shape, keep)][drop:]
    op = data.draw(st.sampled_from(["add", "sub", "mul", "div"]))

    def build(g, a, b):
        if op == "div":
            b = g.add(g.mul(b, b), 1.0)
        return getattr(g, op)(a, b)
    _check(build, [tuple(shape), tuple(b_shape)], seed=len(shape))


def test_multi_use_values_sum_their_cotangents():
    """x feeds four ops; the gradient sums the four paths."""
    _check(lambda g, x: g.mul(g.add(g.exp(x), x), g.tanh(x)), [(3, 4)])
