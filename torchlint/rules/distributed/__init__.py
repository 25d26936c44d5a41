"""TL6xx, distributed training: data parallelism that leaves GPUs waiting.

- `rules.py`: TL602 (`nn.DataParallel` in training).
- `wrappers.py`: which trained models are wrapped in `nn.DataParallel`.
- `describe.py`: the data-parallel wrappers of the trained models in `debug facts`.
"""
