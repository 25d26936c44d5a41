"""Rule families, one folder each (`FAMILIES`: TL0xx torchlint's own, TL1xx compile, TL2xx data loading,
TL3xx mixed precision, TL4xx checkpointing), as ruff keeps `rules/<plugin>/`.

A family folder holds `rules.py` (its rule classes), the detection only it uses (reached through
`ModuleFacts.analysis`), and `describe.py` (its section of `torchlint debug facts`). Families never import
one another; what two of them need lives in `torchlint.facts`. Importing this package imports nothing:
`torchlint.rules.base.registered_rules` finds the rules.
"""
