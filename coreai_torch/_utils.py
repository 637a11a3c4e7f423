"""The former name of :mod:`coreai_torch.utils`, kept so that existing imports keep working.

``from coreai_torch._utils import get_operand`` (the form the custom-op guide shows) gives the
same objects as ``from coreai_torch.utils import get_operand``: this module *is* that module.
"""

import sys

from coreai_torch import utils

sys.modules[__name__] = utils
