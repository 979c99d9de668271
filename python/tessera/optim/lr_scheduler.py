"""tessera.optim.lr_scheduler: the C++ schedulers over a Python optimizer's C++ optimizer. state_dict()
is the scheduler's mutable state (last_epoch, _step_count, base_lrs, _last_lr, nested schedulers') as
PyTorch's keys; the hyperparameters come from the constructor."""
import json

from tessera._C import _optim


class LRScheduler:
    def __init__(self, optimizer, cxx):
        self.optimizer = optimizer
        self._cxx = cxx

    def step(self):
        self._cxx.step()

    def get_last_lr(self):
        return list(self._cxx.get_last_lr())

    @property
    def last_epoch(self):
        return self._cxx.last_epoch

    def state_dict(self):
        return json.loads(self._cxx.state_dict())

    def load_state_dict(self, state_dict):
        self._cxx.load_state_dict(json.dumps(state_dict))


class StepLR(LRScheduler):
    def __init__(self, optimizer, step_size, gamma=0.1):
        super().__init__(optimizer, _optim.StepLR(optimizer._cxx, step_size, gamma))


class MultiStepLR(LRScheduler):
    def __init__(self, optimizer, milestones, gamma=0.1):
        super().__init__(optimizer, _optim.MultiStepLR(optimizer._cxx, list(milestones), gamma))


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer, gamma):
        super().__init__(optimizer, _optim.ExponentialLR(optimizer._cxx, gamma))


class CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0):
        super().__init__(optimizer, _optim.CosineAnnealingLR(optimizer._cxx, T_max, eta_min))


class LinearLR(LRScheduler):
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5):
        super().__init__(optimizer, _optim.LinearLR(optimizer._cxx, start_factor, end_factor, total_iters))


class OneCycleLR(LRScheduler):
    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
            total_steps = epochs * steps_per_epoch
        max_lr = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr]
        super().__init__(optimizer, _optim.OneCycleLR(optimizer._cxx, max_lr, total_steps, pct_start, anneal_strategy,
                                                      cycle_momentum, base_momentum, max_momentum, div_factor,
                                                      final_div_factor, three_phase))


class SequentialLR(LRScheduler):
    def __init__(self, optimizer, schedulers, milestones):
        self._schedulers = list(schedulers)  # the C++ composite points at them
        super().__init__(optimizer, _optim.SequentialLR(optimizer._cxx, [s._cxx for s in self._schedulers],
                                                        list(milestones)))


class ChainedScheduler(LRScheduler):
    def __init__(self, schedulers, optimizer=None):
        self._schedulers = list(schedulers)
        if not self._schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler")
        super().__init__(optimizer or self._schedulers[0].optimizer,
                         _optim.ChainedScheduler([s._cxx for s in self._schedulers]))
