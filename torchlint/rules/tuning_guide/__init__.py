"""TL5xx, PyTorch's performance tuning guide beyond the five levers: what a training loop does that costs
time for nothing.

- `rules.py`: TL508 (anomaly detection left on).
- `debugging.py`: where autograd's anomaly mode is switched on for good.
- `describe.py`: those places in `debug facts`.
"""
