"""TL4xx, activation checkpointing: deep stacks of repeated blocks trained with no checkpointing, and
checkpoint calls that use the reentrant variant.

- `rules.py`: TL401, TL402.
- `structure.py`: stacks of repeated blocks in a class and where its forward applies them.
- `analysis.py`: who trains a stack's class, whether anything checkpoints it, checkpoint calls, library
  models with their own switch.
- `describe.py`: stacks and checkpointing evidence in `debug facts`.
"""
