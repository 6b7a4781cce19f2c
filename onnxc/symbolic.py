"""Symbolic dimensions: integer polynomials over non-negative atoms.

A dimension is either a Python ``int`` or an :class:`Expr`. An ``Expr`` is a sum of
monomials whose variables are *atoms*: a named symbol (``batch``) or an opaque integer
operation that is not polynomial (``floordiv(H + 2, 2)``, ``max(a, b)``). Every atom is a
size, hence >= 0, which lets the memory planner *prove* ``a <= b`` for all symbol values by
comparing coefficients. Expressions render to C (int64 arithmetic) and evaluate in Python.
"""
from __future__ import annotations

import functools
from typing import Mapping, Union

Dim = Union[int, "Expr"]


class Expr:
    """Polynomial: frozenset of (monomial, coefficient); a monomial is a sorted tuple of atoms."""

    __slots__ = ("terms", "_hash", "_minmax")

    def __init__(self, terms: Mapping[tuple, int]):
        self.terms = {m: c for m, c in terms.items() if c != 0}
        self._hash = hash(frozenset(self.terms.items()))
        self._minmax = None     # has a max() or min() atom (computed when first asked)

    def has_minmax(self) -> bool:
        if self._minmax is None:
            self._minmax = any(a[0] in ("max", "min") for m in self.terms for a in m)
        return self._minmax

    # ---- construction ------------------------------------------------------------------
    @staticmethod
    def symbol(name: str) -> "Expr":
        return Expr({(("sym", name),): 1})

    @staticmethod
    def _atom(atom: tuple) -> "Expr":
        return Expr({(atom,): 1})

    @staticmethod
    def lift(x: Dim) -> "Expr":
        if isinstance(x, Expr):
            return x
        return Expr({(): int(x)})

    def simplify(self) -> Dim:
        if not self.terms:
            return 0
        if len(self.terms) == 1 and () in self.terms:
            return self.terms[()]
        return self

    # ---- arithmetic --------------------------------------------------------------------
    def __add__(self, other: Dim) -> Dim:
        o = Expr.lift(other)
        t = dict(self.terms)
        for m, c in o.terms.items():
            t[m] = t.get(m, 0) + c
        return Expr(t).simplify()

    __radd__ = __add__

    def __neg__(self) -> Dim:
        return Expr({m: -c for m, c in self.terms.items()}).simplify()

    def __sub__(self, other: Dim) -> Dim:
        return self + (-Expr.lift(other))

    def __rsub__(self, other: Dim) -> Dim:
        return Expr.lift(other) + (-self)

    def __mul__(self, other: Dim) -> Dim:
        o = Expr.lift(other)
        t: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in o.terms.items():
                m = tuple(sorted(m1 + m2, key=_atom_key))
                t[m] = t.get(m, 0) + c1 * c2
        return Expr(t).simplify()

    __rmul__ = __mul__

    def __eq__(self, other) -> bool:
        if isinstance(other, int):
            return False  # a simplified Expr is never constant
        return isinstance(other, Expr) and self.terms == other.terms

    def __hash__(self) -> int:
        return self._hash

    # ---- inspection --------------------------------------------------------------------
    def atoms(self) -> set:
        out = set()
        for m in self.terms:
            out.update(m)
        return out

    def symbols(self) -> set:
        out = set()
        for a in self.atoms():
            out |= _atom_symbols(a)
        return out

    def evaluate(self, env: Mapping[str, int]) -> int:
        total = 0
        for m, c in self.terms.items():
            v = c
            for a in m:
                v *= _atom_eval(a, env)
            total += v
        return total

    def to_c(self, names: Mapping[str, str]) -> str:
        parts = []
        for m, c in sorted(self.terms.items(), key=lambda mc: _mono_key(mc[0])):
            factors = [_atom_c(a, names) for a in m]
            if c != 1 or not factors:
                factors.insert(0, f"INT64_C({c})" if c >= 0 else f"(-INT64_C({-c}))")
            parts.append("*".join(factors))
        return "(" + " + ".join(parts) + ")"

    def __repr__(self) -> str:
        parts = []
        for m, c in sorted(self.terms.items(), key=lambda mc: _mono_key(mc[0])):
            f = [_atom_repr(a) for a in m]
            if c != 1 or not f:
                f.insert(0, str(c))
            parts.append("*".join(f))
        return " + ".join(parts)


def _atom_key(a: tuple) -> str:
    return repr(a)


def _mono_key(m: tuple) -> tuple:
    return (len(m), [repr(a) for a in m])


def _atom_symbols(a: tuple) -> set:
    if a[0] == "sym":
        return {a[1]}
    out = set()
    for x in a[1:]:
        if isinstance(x, Expr):
            out |= x.symbols()
    return out


def _dim_eval(x: Dim, env) -> int:
    return x.evaluate(env) if isinstance(x, Expr) else x


def _atom_eval(a: tuple, env) -> int:
    kind = a[0]
    if kind == "sym":
        return int(env[a[1]])
    x, y = (_dim_eval(v, env) for v in a[1:])
    if kind == "floordiv":
        return x // y
    if kind == "mod":
        return x % y
    if kind == "max":
        return max(x, y)
    if kind == "min":
        return min(x, y)
    raise ValueError(kind)


def _dim_c(x: Dim, names) -> str:
    return x.to_c(names) if isinstance(x, Expr) else f"INT64_C({x})"


_C_FUNCS = {"floordiv": "onnxc_floordiv", "mod": "onnxc_mod", "max": "onnxc_max64", "min": "onnxc_min64"}


def _atom_c(a: tuple, names) -> str:
    if a[0] == "sym":
        return names[a[1]]
    return f"{_C_FUNCS[a[0]]}({_dim_c(a[1], names)}, {_dim_c(a[2], names)})"


def _atom_repr(a: tuple) -> str:
    if a[0] == "sym":
        return a[1]
    return f"{a[0]}({a[1]!r}, {a[2]!r})"


# ---- functions on Dims ---------------------------------------------------------------------
def terms_of(d: Dim) -> list[tuple[Dim, int]]:
    """d as (monomial, coefficient) pairs in a fixed order, each monomial a Dim with coefficient 1
    (1 for the constant term): d == sum(m * c)."""
    terms = d.terms if isinstance(d, Expr) else {(): d}
    return [(Expr({m: 1}).simplify(), c) for m, c in sorted(terms.items(), key=lambda mc: _mono_key(mc[0]))]


def sym(name: str) -> Expr:
    return Expr.symbol(name)


def is_static(d: Dim) -> bool:
    return isinstance(d, int)


def evaluate(d: Dim, env: Mapping[str, int]) -> int:
    return _dim_eval(d, env)


def to_c(d: Dim, names: Mapping[str, str]) -> str:
    """C expression (int64) for a dim; plain integer literal when static."""
    return str(d) if isinstance(d, int) else d.to_c(names)


def symbols_of(d: Dim) -> set:
    return d.symbols() if isinstance(d, Expr) else set()


def floordiv(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError("division of a dimension by zero")
        return a // b
    if isinstance(b, int) and b == 1:
        return a
    if isinstance(b, int) and b > 0 and all(c % b == 0 for c in Expr.lift(a).terms.values()):
        return Expr({m: c // b for m, c in Expr.lift(a).terms.items()}).simplify()
    if isinstance(a, Expr) and a == b:
        return 1
    return Expr._atom(("floordiv", a, b))


def ceildiv(a: Dim, b: Dim) -> Dim:
    return floordiv(a + (b - 1) if isinstance(b, int) else a + b - 1, b)


def mod(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return Expr._atom(("mod", a, b))


def dmax(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    if provably_le(a, b):
        return b
    if provably_le(b, a):
        return a
    return Expr._atom(("max", a, b))


def dmin(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    if provably_le(a, b):
        return a
    if provably_le(b, a):
        return b
    return Expr._atom(("min", a, b))


def product(dims) -> Dim:
    out: Dim = 1
    for d in dims:
        out = out * d
    return out


def provably_le(a: Dim, b: Dim) -> bool:
    """True when a <= b for every non-negative value of every atom."""
    if isinstance(a, int) and isinstance(b, int):
        return a <= b
    at = a.terms if isinstance(a, Expr) else {(): a}
    bt = b.terms if isinstance(b, Expr) else {(): b}
    if all(bt.get(m, 0) >= c for m, c in at.items()) and all(c >= 0 or m in at for m, c in bt.items()):
        return True             # every coefficient of b - a is non-negative
    if not (isinstance(a, Expr) and a.has_minmax()) and not (isinstance(b, Expr) and b.has_minmax()):
        return False            # no max / min atom to substitute: _nonneg's answer too
    return _provably_le(a, b)


@functools.lru_cache(maxsize=1 << 16)
def _provably_le(a: Dim, b: Dim) -> bool:
    return not _refuted(a, b) and _nonneg(Expr.lift(Expr.lift(b) - a), 4)


_SAMPLE = 1009   # every symbol's value in _refuted's sample


def _refuted(a: Dim, b: Dim) -> bool:
    """a > b at one sample of the symbols where every atom is non-negative: then no proof exists
    (a proof holds for all such values), and _nonneg's substitutions of max / min atoms, which
    multiply polynomials, are skipped (with the cache above: the memory planner of a 24-layer
    BERT with batch and sequence dims 40 s -> 0.4 s)."""
    env = dict.fromkeys(symbols_of(a) | symbols_of(b), _SAMPLE)
    try:
        if not (_atoms_nonneg(a, env) and _atoms_nonneg(b, env)):
            return False
        return _dim_eval(a, env) > _dim_eval(b, env)
    except (ArithmeticError, ValueError, KeyError):
        return False


def _atoms_nonneg(d: Dim, env: Mapping[str, int]) -> bool:
    if isinstance(d, int):
        return True
    for atom in d.atoms():
        if atom[0] != "sym" and (_atom_eval(atom, env) < 0
                                 or not all(_atoms_nonneg(x, env) for x in atom[1:])):
            return False
    return True


def _nonneg(e: Expr, depth: int) -> bool:
    """Sufficient test for e >= 0: all coefficients non-negative, or, for a max() atom that only
    adds (or a min() atom that only subtracts), the same test with it replaced by either of its
    arguments -- each replacement is a lower bound of e."""
    if all(c >= 0 for c in e.terms.values()):
        return True
    if depth == 0:
        return False
    for atom in e.atoms():
        if atom[0] not in ("max", "min"):
            continue
        signs = {c > 0 for m, c in e.terms.items() if atom in m}
        if signs == ({True} if atom[0] == "max" else {False}):
            if any(_nonneg(Expr.lift(_subs(e, atom, arg)), depth - 1) for arg in atom[1:]):
                return True
    return False


def _subs(e: Expr, atom: tuple, value: Dim) -> Dim:
    out: Dim = 0
    for m, c in e.terms.items():
        term: Dim = c
        for a in m:
            term = term * (value if a == atom else Expr({(a,): 1}))
        out = out + term
    return out


def align_up(d: Dim, alignment: int) -> Dim:
    if isinstance(d, int):
        return -(-d // alignment) * alignment
    e = Expr.lift(d)
    const = e.terms.get((), 0)
    rest = {m: c for m, c in e.terms.items() if m != ()}
    if all(c % alignment == 0 and c >= 0 for c in rest.values()):
        return Expr(rest) + (-(-const // alignment) * alignment)
    return floordiv(d + (alignment - 1), alignment) * alignment


def dim_repr(d: Dim) -> str:
    return str(d) if isinstance(d, int) else repr(d)


def substitute(d: Dim, values: Mapping[str, Dim]) -> Dim:
    """d with the named symbols replaced (inside floordiv/max/... atoms too)."""
    if isinstance(d, int) or not (d.symbols() & values.keys()):
        return d
    out: Dim = 0
    for m, c in d.terms.items():
        term: Dim = c
        for a in m:
            term = term * _subs_atom(a, values)
        out = out + term
    return out


def _subs_atom(a: tuple, values: Mapping[str, Dim]) -> Dim:
    if a[0] == "sym":
        return values.get(a[1], Expr._atom(a))
    x, y = (substitute(v, values) for v in a[1:])
    return {"floordiv": floordiv, "mod": mod, "max": dmax, "min": dmin}[a[0]](x, y)


def exact_div(a: Dim, b: Dim) -> Dim | None:
    """a / b when b is one monomial (c * atoms) dividing every term of a exactly, else None."""
    ea, eb = Expr.lift(a), Expr.lift(b)
    if len(eb.terms) != 1:
        return None
    (mono, coef), = eb.terms.items()
    if coef == 0:
        return None
    out: dict = {}
    for m, c in ea.terms.items():
        rest = list(m)
        for atom in mono:
            if atom not in rest:
                return None
            rest.remove(atom)
        if c % coef:
            return None
        key = tuple(rest)
        out[key] = out.get(key, 0) + c // coef
    return Expr(out).simplify()
