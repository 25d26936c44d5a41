"""TL3xx, mixed precision: training in float32 on the GPU, float16 without loss scaling, backward inside
autocast, clipping scaled gradients, a scaler with bfloat16, and the deprecated `torch.cuda.amp` API.

- `rules.py`: TL301-TL307.
- `precision.py`: autocast sites and regions, scalers, every other way a project decides about precision,
  the device of each loop, and the plans the fixes follow.
- `steps.py`: the forward-and-loss statements of one training step, which TL301's fix wraps.
- `deprecations.py`: the deprecated entry points and their replacements (TL303, TL304).
- `describe.py`: the precision section of `debug facts`.
"""
