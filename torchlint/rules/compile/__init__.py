"""TL1xx, compilation: the trained model that is never compiled, and `torch.compile` used so that it
compiles nothing or compiles again and again.

- `rules.py`: TL101-TL105.
- `questions.py`: is a model compiled anywhere, does a compile call run every step, is its result used,
  which distributed wrapper it compiles, is the model one kernel or RNN-bound, is it a Module at all, does
  the script need a torch without `torch.compile`.
- `describe.py`: the trained models and compile sites in `debug facts`.
"""
