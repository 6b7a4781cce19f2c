"""Operator modules; importing this package registers them all."""
import importlib
import pkgutil

from .registry import OpSpec, lookup, register, supported

for _m in pkgutil.iter_modules(__path__):
    if _m.name not in ("registry", "common"):
        importlib.import_module(f"{__name__}.{_m.name}")

__all__ = ["OpSpec", "lookup", "register", "supported"]
