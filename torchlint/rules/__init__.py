"""Rule families, one module each (TL1xx compile, TL2xx data loading, TL3xx mixed precision, ...).

Importing this package imports every family module, which registers its rules.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")
