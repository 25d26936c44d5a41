"""TL6xx, distributed training: data parallelism that leaves GPUs waiting.

- `rules.py`: TL601 (gradient accumulation under DDP/FSDP without `no_sync`), TL602 (`nn.DataParallel` in
  training).
- `accumulation.py`: loops whose backward runs on micro-batches the optimizer does not step on.
- `wrappers.py`: which trained models are wrapped in `nn.DataParallel`.
- `describe.py`: the data-parallel wrappers of the trained models in `debug facts`.
"""
