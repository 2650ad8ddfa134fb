"""The plugins, one module each. Importing this package imports every module in it, and each
module registers its plugin with the framework registry."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
