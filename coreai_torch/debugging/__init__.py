"""Apple's ``coreai_torch.debugging`` tools, working on this project's objects.

Module for module Apple's names (coreai-torch 0.4.3, ``docs/api/debugging.md``): find the
first NaN/inf node (:mod:`.validator`), compare torch with Core AI node by node
(:mod:`.comparator`, :mod:`.intermediates`), read intermediates (:mod:`.inspector`,
:mod:`.torch_utils`), diff and align graphs (:mod:`.graph_diff`, :mod:`.graph_match`), time
programs per op (:mod:`.benchmarker`, :mod:`.timing_diff`), and read debug info and source
locations (:mod:`.debug_info`, :mod:`.source_annotator`, :mod:`.histogram`).

A "Core AI program" here is this project's :class:`coreai_core.Program` (what
``TorchConverter.to_coreai()`` returns), run on the numpy reference runtime; a deployed model
is an ``.aimodel`` run on Apple's interpreter. What needs Apple's device runtime (compute
plans, device placement) raises :class:`~coreai_torch.debugging.utils.DeviceRuntimeError`.
See docs/debugging.md, "Apple's debugging package".
"""
