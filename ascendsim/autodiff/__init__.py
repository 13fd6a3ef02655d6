"""Training from any graph: reverse-mode autodiff (`grad`) and one training step
(`training_step`) as graph transforms over the op registry's gradient rules."""

from .grad import GRAD_SUFFIX, backward, fold_initializers, grad, parameters
from .training import LOSSES, OPTIMIZERS, initial_state, training_step

__all__ = ["grad", "backward", "parameters", "fold_initializers", "GRAD_SUFFIX", "training_step",
           "initial_state", "LOSSES", "OPTIMIZERS"]
