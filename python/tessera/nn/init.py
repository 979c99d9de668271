"""tessera.nn.init: torch.nn.init's fills (uniform_, normal_, trunc_normal_, constant_, ones_, zeros_,
xavier_*, kaiming_*) and calculate_gain, over tessera::nn::init. Each fills the tensor in place under
no_grad and returns it, so parameters that require grad can be initialized."""
from tessera._C import _nn_init as _i

calculate_gain = _i.calculate_gain
_calculate_fan_in_and_fan_out = _i._calculate_fan_in_and_fan_out
uniform_ = _i.uniform_
normal_ = _i.normal_
trunc_normal_ = _i.trunc_normal_
constant_ = _i.constant_
ones_ = _i.ones_
zeros_ = _i.zeros_
xavier_uniform_ = _i.xavier_uniform_
xavier_normal_ = _i.xavier_normal_
kaiming_uniform_ = _i.kaiming_uniform_
kaiming_normal_ = _i.kaiming_normal_
