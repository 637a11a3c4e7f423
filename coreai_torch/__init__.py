"""coreai_torch: convert torch.export programs to the Core AI dialect."""
