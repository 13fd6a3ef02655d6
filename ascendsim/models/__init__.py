"""Built-in workloads: graph builders for the models users ask about.

Every builder returns an `ascendsim.Graph` whose weights are lazy seeded constants (the seed
derives from the weight's name), so a full-size model (ResNet-50 at batch 256, BERT-large at
seq 512) costs no weight memory in shape-only simulation, and the same call always gives the
same weights; small sizes run with `ascendsim.execute` to real values.

    >>> import ascendsim as asim
    >>> asim.models.names()[:2]
    ['net_basic_fuse', 'net_composite_fuse']
    >>> g = asim.models.get("resnet50", batch=1)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from ..ir.graph import Graph
from . import hf_config
from .bert import (
    bert,
    bert_base,
    bert_encoder_layer,
    bert_large,
    bert_large_training_step,
    bert_pretraining,
    bert_training_step,
)
from .decoder import decoder, decoder_presets
from .resnet import resnet, resnet50, resnet50_training_step, resnet_training_step
from .seeds import (
    conv_bn_relu,
    elementwise_chain,
    matmul_bias_relu,
    net_basic_fuse,
    net_composite_fuse,
)

#: name -> builder, in the order `names()` lists them (seeds first, then the big models)
BUILDERS: dict[str, Callable[..., Graph]] = {
    "net_basic_fuse": net_basic_fuse,
    "net_composite_fuse": net_composite_fuse,
    "matmul_bias_relu": matmul_bias_relu,
    "conv_bn_relu": conv_bn_relu,
    "elementwise_chain": elementwise_chain,
    "resnet": resnet,
    "resnet50": resnet50,
    "resnet_training_step": resnet_training_step,
    "resnet50_training_step": resnet50_training_step,
    "bert": bert,
    "bert_base": bert_base,
    "bert_large": bert_large,
    "bert_encoder_layer": bert_encoder_layer,
    "bert_pretraining": bert_pretraining,
    "bert_training_step": bert_training_step,
    "bert_large_training_step": bert_large_training_step,
    "decoder": decoder,
}


def names() -> list[str]:
    """Names of the built-in models, for `get` and the `ascendsim models` command."""
    return list(BUILDERS)


def get(name: str, **kwargs: Any) -> Graph:
    """Build a model by name; ConfigError for an unknown name or argument."""
    try:
        builder = BUILDERS[name]
    except KeyError:
        raise ConfigError(f"unknown model {name!r}; valid: {', '.join(BUILDERS)}") from None
    valid = inspect.signature(builder).parameters
    if any(p.kind == p.VAR_KEYWORD for p in valid.values()):
        return builder(**kwargs)         # the builder checks its own **overrides (decoder)
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        raise ConfigError(f"model {name!r}: unknown argument(s) {', '.join(unknown)}; "
                          f"valid: {', '.join(valid)}")
    return builder(**kwargs)


__all__ = ["names", "get", "BUILDERS", "decoder_presets", "hf_config", *BUILDERS]
