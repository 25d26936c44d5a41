"""TL2xx, data loading: loaders that keep the accelerator waiting (no workers, no pinned memory, workers
started again every epoch, worker options that fail) and blocking host-to-device copies.

- `rules.py`: TL201-TL205.
- `datasets.py`: what a loader's dataset is (in memory, indices, iterable, ...), whether its samples stay on
  the CPU, and what worker processes could not pickle.
- `describe.py`: each loader's dataset in `debug facts`.
"""
