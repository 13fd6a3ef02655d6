"""Training from any graph: reverse-mode autodiff (`grad`) and one training step
(`training_step`) as graph transforms over the op registry's gradient rules."""

from .grad import GRAD_SUFFIX, backward, fold_initializers, grad, parameters

__all__ = ["grad", "backward", "parameters", "fold_initializers", "GRAD_SUFFIX"]
