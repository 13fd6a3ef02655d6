"""ResNet-50 v1.5 (torchvision layout: the stride sits on the bottleneck's 3x3 conv).

Inference keeps every BatchNormalization node (unfused: folding BN into the conv is the
graph-fusion passes' job), then MaxPool, four stages of bottlenecks [3, 4, 6, 3],
GlobalAveragePool, Flatten and a Gemm classifier: 53 convolutions, ~4.1 GMACs per 224x224 image.

The training step is the autodiff transform of the inference graph
(`ascendsim.autodiff.training_step`; see `resnet50_training_step`).
"""

from __future__ import annotations

from ..autodiff import OPTIMIZERS, training_step
from ..errors import ConfigError
from ..ir.graph import Graph
from ..ir.tensor import Value
from .blocks import (
    ModelBuilder,
    add,
    batch_norm,
    check_choice,
    check_positive,
    conv2d,
    relu,
)

#: bottleneck width and stride of the first block, per stage
STAGE_WIDTHS = ((64, 1), (128, 2), (256, 2), (512, 2))
#: bottleneck blocks per stage of ResNet-50
RESNET50_LAYERS = (3, 4, 6, 3)
EXPANSION = 4


def _conv_bn(mb: ModelBuilder, x: Value, name: str, cout: int, k: int, stride: int, pad: int,
             act: bool, gamma: tuple[float, float] = (0.8, 1.2)) -> Value:
    y = conv2d(mb, x, f"{name}.conv", cout, k, stride, pad)
    y = batch_norm(mb, y, f"{name}.bn", gamma=gamma)
    return relu(mb, y) if act else y


def _bottleneck(mb: ModelBuilder, x: Value, name: str, width: int, stride: int) -> Value:
    cin = int(x.shape[1])
    cout = width * EXPANSION
    y = _conv_bn(mb, x, f"{name}.1", width, 1, 1, 0, True)
    y = _conv_bn(mb, y, f"{name}.2", width, 3, stride, 1, True)
    # small gain on the last BN keeps 16 residual additions in fp16 range with random weights
    y = _conv_bn(mb, y, f"{name}.3", cout, 1, 1, 0, False, gamma=(0.2, 0.4))
    short = x
    if stride != 1 or cin != cout:
        short = _conv_bn(mb, x, f"{name}.downsample", cout, 1, stride, 0, False)
    return relu(mb, add(mb, y, short))


def _forward(mb: ModelBuilder, x: Value, layers: tuple[int, ...], num_classes: int,
             width: int) -> Value:
    g = mb.g
    y = _conv_bn(mb, x, "stem", width, 7, 2, 3, True)
    y = g.max_pool(y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="maxpool")
    for s, (blocks, (base, stride)) in enumerate(zip(layers, STAGE_WIDTHS), start=1):
        for b in range(blocks):
            y = _bottleneck(mb, y, f"layer{s}.{b}", base * width // 64,
                            stride if b == 0 else 1)
    pooled = g.global_average_pool(y, name="avgpool")
    flat = g.flatten(pooled, axis=1, name="flatten")
    feat = int(flat.shape[1])
    w = mb.weight("fc.weight", (num_classes, feat), scale=float(feat) ** -0.5)
    b = mb.weight("fc.bias", (num_classes,), scale=0.01)
    return g.gemm(flat, w, b, transB=1, name="fc")


def _check(batch: int, image: int, num_classes: int, layers: tuple[int, ...]) -> None:
    check_positive(batch=batch, image=image, num_classes=num_classes)
    if len(layers) != len(STAGE_WIDTHS):
        raise ConfigError(f"layers={layers!r}: give {len(STAGE_WIDTHS)} block counts, "
                          "one per stage")
    check_positive(**{f"layers[{i}]": n for i, n in enumerate(layers)})
    if image < 32:
        raise ConfigError(f"image={image}: ResNet-50 needs at least 32x32 (five stride-2 stages)")


def resnet(batch: int = 32, image: int = 224, layers: tuple[int, ...] = RESNET50_LAYERS,
           dtype: str = "float16", num_classes: int = 1000, seed: int = 0,
           width: int = 64) -> Graph:
    """A bottleneck ResNet v1.5 for inference, `layers` blocks per stage.

    (3, 4, 6, 3) is ResNet-50. Input "input" (batch, 3, image, image), output logits
    (batch, num_classes). `width` is the stem's channels (64; stage widths scale with it),
    smaller for quick tests."""
    layers = tuple(layers)
    _check(batch, image, num_classes, layers)
    check_positive(width=width)
    if width % 4:
        raise ConfigError(f"width={width}: must be a multiple of 4")
    mb = ModelBuilder("ResNet50" if layers == RESNET50_LAYERS else
                      f"ResNet{3 * sum(layers) + 2}", dtype, seed)
    x = mb.g.input("input", (batch, 3, image, image), mb.dtype)
    mb.g.output(_forward(mb, x, layers, num_classes, width))
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
    check_choice("optimizer", optimizer, OPTIMIZERS)
    g = resnet(batch, image, layers, dtype, num_classes, seed)
    return training_step(g, "softmax_cross_entropy", optimizer, lr, weight_decay=weight_decay,
                         mixed_precision=dtype == "float16", name=f"{g.name}TrainingStep")


def resnet50_training_step(batch: int = 256, image: int = 224, dtype: str = "float16",
                           num_classes: int = 1000, optimizer: str = "momentum",
                           lr: float = 0.1, weight_decay: float = 5e-5, seed: int = 0) -> Graph:
    """One ResNet-50 v1.5 training step: forward, softmax cross-entropy, backward, update.

    `training_step(resnet50(...), "softmax_cross_entropy", optimizer, ...)`: inputs "input"
    (batch, 3, image, image), one-hot float32 "labels" (batch, num_classes), every parameter
    (float32 masters under float16), its optimizer state and the BN running statistics, the
    loss-scale state under float16; outputs "loss", then `<param>_new` (and `_m_new`),
    the running statistics' `_new`, "loss_scale_new"/"good_steps_new". BatchNorm trains as
    BNTrainingReduce/BNTrainingUpdate with BNTrainingUpdateGrad/BNTrainingReduceGrad, MaxPool
    through its argmax, conv gradients as ConvTranspose and a Conv of the input by the output
    gradient (the forward's MACs), the update as ApplyMomentum with L2 weight decay.
    """
    return resnet_training_step(batch, image, RESNET50_LAYERS, dtype, num_classes, optimizer,
                                lr, weight_decay, seed)


__all__ = ["resnet", "resnet50", "resnet_training_step", "resnet50_training_step",
           "RESNET50_LAYERS", "STAGE_WIDTHS"]
