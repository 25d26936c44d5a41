"""TL5xx, PyTorch's performance tuning guide beyond the five levers: what a training loop does that costs
time for nothing.

- `rules.py`: TL501 (the loss read on the host every step), TL502 (evaluation with gradients on), TL503 (a
  compiled wrapper's checkpoint), TL504 (float32 matmuls with TF32 off), TL505 (an optimizer not fused),
  TL506 (a GradScaler stepped, never updated), TL507 (a tensor made on the host and copied every step),
  TL508 (anomaly detection left on).
- `syncs.py`: which reads of the loss on the host run every training step on CUDA.
- `host_tensors.py`: factories without `device=` copied to the GPU in a CUDA training loop.
- `matmul_precision.py`: training loops on the GPU where nothing decides about precision.
- `optimizers.py`: Adam, AdamW and SGD built without `fused=` for a loop on the GPU.
- `graphs.py`: evaluation loops (`model.eval()`, no backward) that run with gradients on.
- `checkpoints.py`: state dicts of a name bound to `torch.compile(...)` that reach a file.
- `scalers.py`: GradScalers stepped without an update every iteration.
- `debugging.py`: where autograd's anomaly mode is switched on for good.
- `describe.py`: those places in `debug facts`.
"""
