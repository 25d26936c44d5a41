"""TL5xx, PyTorch's performance tuning guide beyond the five levers: what a training loop does that costs
time for nothing.

- `rules.py`: TL501 (the loss read on the host every step), TL508 (anomaly detection left on).
- `syncs.py`: which reads of the loss on the host run every training step on CUDA.
- `debugging.py`: where autograd's anomaly mode is switched on for good.
- `describe.py`: those places in `debug facts`.
"""
