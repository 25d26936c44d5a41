"""TL1xx, compilation: the trained model that is never compiled, `torch.compile` used so that it
compiles nothing or compiles again and again, code in a compiled forward that breaks the graph, and a
compiled optimizer step that recompiles.

- `rules.py`: TL101-TL107.
- `questions.py`: is a model compiled anywhere, does a compile call run every step, is its result used,
  which distributed wrapper it compiles, is the model one kernel or RNN-bound, is it a Module at all, does
  the script need a torch without `torch.compile`.
- `graph_breaks.py`: which of this module's functions run compiled (a compiled model's forward, what it
  calls, a compiled function) and the constructs in them that make Dynamo break the graph (TL106).
- `recompiles.py`: compiled optimizer steps whose float learning rate a scheduler changes (TL107).
- `describe.py`: the trained models, compile sites and compiled code in `debug facts`.
"""
