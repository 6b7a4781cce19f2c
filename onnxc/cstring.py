"""The only way model-supplied text reaches generated source: as an escaped C string literal.

Everything outside printable ASCII, and every character that could end a literal or a
comment, start a trigraph or splice a line (" \\ ? * / newline, CR), becomes an octal escape.
"""
from __future__ import annotations

_SAFE = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;=+()[]{}<>!@$%^&|~'`")


def literal(text: str | bytes, chunk: int = 120) -> str:
    """C string literal for text; long strings are split into adjacent literals over lines."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    pieces, cur, width = [], [], 0
    for b in data:
        tok = chr(b) if b in _SAFE else f"\\{b:03o}"
        cur.append(tok)
        width += len(tok)
        if width >= chunk:
            pieces.append('"' + "".join(cur) + '"')
            cur, width = [], 0
    if cur or not pieces:
        pieces.append('"' + "".join(cur) + '"')
    return "\n    ".join(pieces)
