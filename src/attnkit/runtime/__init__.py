"""Layer 5: running models -- the Trainer, distributed training, device and precision
choice, run directories, and the plots a run writes (learning curves, heatmaps)."""
