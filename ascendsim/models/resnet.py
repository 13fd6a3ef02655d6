"""ResNet-50 v1.5 (torchvision layout: the stride sits on the bottleneck's 3x3 conv).

Inference keeps every BatchNormalization node (unfused: folding BN into the conv is the
graph-fusion passes' job), then MaxPool, four stages of bottlenecks [3, 4, 6, 3],
GlobalAveragePool, Flatten and a Gemm classifier: 53 convolutions, ~4.1 GMACs per 224x224 image.

The training step adds the backward pass and an optimizer update (see
`resnet50_training_step` for what is exact and what is approximated).
"""

from __future__ import annotations

from ..errors import ConfigError
from ..ir.graph import Graph
from ..ir.tensor import Value
from .blocks import (
    ModelBuilder,
    Tape,
    add,
    apply_optimizer,
    batch_norm,
    check_choice,
    check_positive,
    conv2d,
    new_param,
    relu,
    softmax_cross_entropy,
)

#: bottleneck width and stride of the first block, per stage
STAGE_WIDTHS = ((64, 1), (128, 2), (256, 2), (512, 2))
#: bottleneck blocks per stage of ResNet-50
RESNET50_LAYERS = (3, 4, 6, 3)
EXPANSION = 4


def _conv_bn(mb: ModelBuilder, x: Value, name: str, cout: int, k: int, stride: int, pad: int,
             act: bool, tape: Tape | None, gamma: tuple[float, float] = (0.8, 1.2),
             input_grad: bool = True) -> Value:
    y = conv2d(mb, x, f"{name}.conv", cout, k, stride, pad, tape, input_grad)
    y = batch_norm(mb, y, f"{name}.bn", gamma=gamma, tape=tape)
    return relu(mb, y, tape) if act else y


def _bottleneck(mb: ModelBuilder, x: Value, name: str, width: int, stride: int,
                tape: Tape | None) -> Value:
    cin = int(x.shape[1])
    cout = width * EXPANSION
    y = _conv_bn(mb, x, f"{name}.1", width, 1, 1, 0, True, tape)
    y = _conv_bn(mb, y, f"{name}.2", width, 3, stride, 1, True, tape)
    # small gain on the last BN keeps 16 residual additions in fp16 range with random weights
    y = _conv_bn(mb, y, f"{name}.3", cout, 1, 1, 0, False, tape, gamma=(0.2, 0.4))
    short = x
    if stride != 1 or cin != cout:
        short = _conv_bn(mb, x, f"{name}.downsample", cout, 1, stride, 0, False, tape)
    return relu(mb, add(mb, y, short, tape), tape)


def _maxpool(mb: ModelBuilder, x: Value, tape: Tape | None) -> Value:
    """MaxPool 3x3/2 pad 1. Its gradient (training) is approximated on the vector unit: the
    output gradient is upsampled 2x (Reshape, broadcast Mul) and kept where x equals the
    upsampled max (Greater, Where), i.e. each input gets the gradient of the 2x2-aligned
    window that covers it instead of every overlapping 3x3 window."""
    g = mb.g
    y = g.max_pool(x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="maxpool")
    if tape is None:
        return y

    def back() -> None:
        dy = tape.grad(y)
        if dy is None:
            return
        n, c, h, w = (int(d) for d in x.shape)
        oh, ow = int(y.shape[2]), int(y.shape[3])
        ones = mb.fill("maxpool.grad_ones", (1, 1, 1, 2, 1, 2), 1.0)

        def up(v: Value) -> Value:
            v6 = g.mul(g.reshape(v, mb.ints([n, c, oh, 1, ow, 1])), ones)
            v4 = g.reshape(v6, mb.ints([n, c, 2 * oh, 2 * ow]))
            if 2 * oh != h or 2 * ow != w:
                v4 = g.slice(v4, mb.ints([0, 0]), mb.ints([h, w]), mb.ints([2, 3]))
            return v4
        dx = g.where(g.greater(up(y), x), mb.scalar(0.0), up(dy))
        tape.accumulate(x, dx)
    tape.on_backward(back)
    return y


def _forward(mb: ModelBuilder, x: Value, layers: tuple[int, ...], num_classes: int,
             tape: Tape | None) -> Value:
    g = mb.g
    y = _conv_bn(mb, x, "stem", 64, 7, 2, 3, True, tape, input_grad=False)
    y = _maxpool(mb, y, tape)
    for s, (blocks, (width, stride)) in enumerate(zip(layers, STAGE_WIDTHS), start=1):
        for b in range(blocks):
            y = _bottleneck(mb, y, f"layer{s}.{b}", width, stride if b == 0 else 1, tape)
    pooled = g.global_average_pool(y, name="avgpool")
    flat = g.flatten(pooled, axis=1, name="flatten")
    feat = int(flat.shape[1])
    w = new_param(mb, tape, "fc.weight",
                  lambda dt: mb.weight("fc.weight", (num_classes, feat), dtype=dt,
                                       scale=float(feat) ** -0.5))
    b = new_param(mb, tape, "fc.bias",
                  lambda dt: mb.weight("fc.bias", (num_classes,), scale=0.01, dtype=dt))
    logits = g.gemm(flat, w, b, transB=1, name="fc")
    if tape is not None:
        def back() -> None:
            dl = tape.grad(logits)
            if dl is None:
                return
            tape.param_grad(w, g.gemm(dl, flat, transA=1))
            tape.param_grad(b, g.reduce_sum(dl, [0], keepdims=0))
            dflat = g.matmul(dl, w)
            dpool = g.reshape(dflat, mb.ints([int(d) for d in pooled.shape]))
            h, wd = int(y.shape[2]), int(y.shape[3])
            avg = mb.fill("avgpool.grad_scale", (1, 1, h, wd), 1.0 / (h * wd))
            tape.accumulate(y, g.mul(dpool, avg))
        tape.on_backward(back)
    return logits


def _check(batch: int, image: int, num_classes: int, layers: tuple[int, ...]) -> None:
    check_positive(batch=batch, image=image, num_classes=num_classes)
    if len(layers) != len(STAGE_WIDTHS):
        raise ConfigError(f"layers={layers!r}: give {len(STAGE_WIDTHS)} block counts, "
                          "one per stage")
    check_positive(**{f"layers[{i}]": n for i, n in enumerate(layers)})
    if image < 32:
        raise ConfigError(f"image={image}: ResNet-50 needs at least 32x32 (five stride-2 stages)")


def resnet(batch: int = 32, image: int = 224, layers: tuple[int, ...] = RESNET50_LAYERS,
           dtype: str = "float16", num_classes: int = 1000, seed: int = 0) -> Graph:
    """A bottleneck ResNet v1.5 for inference, `layers` blocks per stage.

    (3, 4, 6, 3) is ResNet-50. Input "input" (batch, 3, image, image), output logits
    (batch, num_classes)."""
    layers = tuple(layers)
    _check(batch, image, num_classes, layers)
    mb = ModelBuilder("ResNet50" if layers == RESNET50_LAYERS else
                      f"ResNet{3 * sum(layers) + 2}", dtype, seed)
    x = mb.g.input("input", (batch, 3, image, image), mb.dtype)
    mb.g.output(_forward(mb, x, layers, num_classes, None))
    return mb.g


def resnet50(batch: int = 32, image: int = 224, dtype: str = "float16",
             num_classes: int = 1000, seed: int = 0) -> Graph:
    """ResNet-50 v1.5 inference: 53 convolutions, ~4.09 GMACs per 224x224 image."""
    return resnet(batch, image, RESNET50_LAYERS, dtype, num_classes, seed)


def resnet_training_step(batch: int = 256, image: int = 224,
                         layers: tuple[int, ...] = RESNET50_LAYERS, dtype: str = "float16",
                         num_classes: int = 1000, optimizer: str = "momentum",
                         lr: float = 0.1, weight_decay: float = 5e-5, seed: int = 0) -> Graph:
    """One training step of a bottleneck ResNet v1.5 (see `resnet50_training_step`)."""
    layers = tuple(layers)
    _check(batch, image, num_classes, layers)
    check_choice("optimizer", optimizer, ("sgd", "momentum"))
    name = "ResNet50" if layers == RESNET50_LAYERS else f"ResNet{3 * sum(layers) + 2}"
    mb = ModelBuilder(f"{name}TrainingStep", dtype, seed)
    g = mb.g
    tape = Tape(mb)
    x = g.input("input", (batch, 3, image, image), mb.dtype)
    labels = g.input("labels", (batch, num_classes), mb.dtype)
    logits = _forward(mb, x, layers, num_classes, tape)
    loss = softmax_cross_entropy(mb, logits, labels, tape)
    g.output(g.identity(loss, name="loss"))
    tape.backward({loss.name: mb.scalar(1.0)})
    g.output(*apply_optimizer(mb, tape, optimizer, lr=lr, weight_decay=weight_decay))
    return g


def resnet50_training_step(batch: int = 256, image: int = 224, dtype: str = "float16",
                           num_classes: int = 1000, optimizer: str = "momentum",
                           lr: float = 0.1, weight_decay: float = 5e-5, seed: int = 0) -> Graph:
    """One ResNet-50 v1.5 training step: forward, softmax cross-entropy, backward, update.

    Inputs "input" (batch, 3, image, image) and one-hot "labels" (batch, num_classes);
    outputs "loss" (a scalar), then every updated parameter and optimizer state.

    Exact: BatchNorm uses batch statistics (decomposed into ReduceMean/Sub/Mul/Sqrt/Div) with
    its exact gradient; conv data gradients are ConvTranspose; conv weight gradients are a
    Conv of the transposed activations by the transposed output gradient (dilation = stride,
    same MACs as the forward); ReLU gradients are Where(Greater(y, 0)); Gemm, average-pool and
    loss gradients are exact; SGD with momentum and weight decay as element-wise ops. Under
    float16 the parameters are float32 master copies Cast to float16 for compute and updated
    in float32 (mixed precision).
    Approximated: the MaxPool gradient (2x upsample masked by x == max, not argmax routing of
    overlapping windows); BN running-statistics updates are omitted; no loss scaling.
    """
    return resnet_training_step(batch, image, RESNET50_LAYERS, dtype, num_classes, optimizer,
                                lr, weight_decay, seed)


__all__ = ["resnet", "resnet50", "resnet_training_step", "resnet50_training_step",
           "RESNET50_LAYERS", "STAGE_WIDTHS"]
