"""Apple's ``coreai_torch._compression`` module names, as a thin face over
:mod:`coreai_torch.compression` (what Apple's ``coreai-opt`` imports in ``finalize()``)."""
