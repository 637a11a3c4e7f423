"""The Core AI dialect: every op's builder, grouped by family.

Each builder *is* its op's definition (see ``coreai_core._opdef``): calling it inside an
insertion context appends the op to the current graph and returns its result Value(s).
``coreai.OPS`` maps op names to their definitions.
"""

from coreai_core._opdef import OPS
from coreai_core.dialects._complex import *  # noqa: F403
from coreai_core.dialects._complex import __all__ as _complex_all
from coreai_core.dialects._control import if_, invoke, output, while_, yield_
from coreai_core.dialects._elementwise import *  # noqa: F403
from coreai_core.dialects._elementwise import __all__ as _elementwise_all
from coreai_core.dialects._fft import *  # noqa: F403
from coreai_core.dialects._fft import __all__ as _fft_all
from coreai_core.dialects._linalg import *  # noqa: F403
from coreai_core.dialects._linalg import __all__ as _linalg_all
from coreai_core.dialects._nn import *  # noqa: F403
from coreai_core.dialects._nn import __all__ as _nn_all
from coreai_core.dialects._tensor import *  # noqa: F403
from coreai_core.dialects._tensor import __all__ as _tensor_all

__all__ = [
    "OPS", "if_", "invoke", "output", "while_", "yield_",
    *_elementwise_all, *_nn_all, *_tensor_all, *_complex_all, *_fft_all, *_linalg_all,
]
