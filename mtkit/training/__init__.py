"""Training: loss, schedule, batching, the loop, checkpoints."""
