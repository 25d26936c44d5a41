"""Rule families, one module each (TL0xx errors, TL2xx data loading, TL3xx mixed precision, ...).

Importing this package imports nothing: `torchlint.rules.base.registered_rules` walks it to find the rules.
"""
