"""Where the templates and C runtime live: installed beside the package, or in a checkout."""
from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _find(installed: str, checkout: str) -> Path:
    for p in (_HERE / installed, _HERE.parent / checkout):
        if p.is_dir():
            return p
    raise FileNotFoundError(f"onnxc data folder {checkout!r} is missing from the installation")


def templates_dir() -> Path:
    return _find("_templates", "templates")


def runtime_dir() -> Path:
    return _find("_runtime_c", "runtime_c")
