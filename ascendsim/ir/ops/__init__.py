"""Op families: each module here registers its ops (OpDef) on import.

Every module of this package is imported once, so adding a family is adding a file.
"""

import importlib
import pkgutil

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_mod}")
