"""RE2-syntax patterns compiled at compile time into a byte-level NFA program (Thompson).

Supported (RE2's syntax and meaning): literals and escapes (\\a \\f \\t \\n \\r \\v \\0oo \\xHH
\\x{H..} \\Q..\\E, escaped punctuation), ``.``, classes ``[...]`` with ranges, negation, Perl
classes (\\d \\s \\w and negations, ASCII as in RE2) and POSIX ``[:name:]``, groups ``(...)``,
``(?:...)``, ``(?P<n>...)``, ``(?<n>...)``, flags ``(?imsU-imsU)`` / ``(?i:...)``, alternation,
quantifiers ``* + ? {m} {m,} {m,n}`` (lazy forms too: full match does not care), anchors ``^ $ \\A
\\z`` and ASCII word boundaries ``\\b \\B``. Input is UTF-8: ``.`` and classes consume one code
point (encoded as byte-range sequences), literals their bytes. Anything else (backreferences,
lookaround, \\p{..}, \\C) is rejected with its position, as RE2 rejects most of them.

The program is a list of instructions (op, lo, hi, x, y): BYTE lo..hi -> x, SPLIT -> x | y,
ASSERT kind -> x, MATCH. The C side (runtime_c/onnxc_regex.h) simulates it over the bytes.
"""
from __future__ import annotations

import bisect
import functools

MAX_CP = 0x10FFFF
SURR = (0xD800, 0xDFFF)          # never in UTF-8 text
MAX_REPEAT = 1000                # RE2's limit for {m,n}
MAX_INSTS = 8192                 # program size cap (the matcher keeps per-state arrays on the stack)

# instruction opcodes and assertion kinds (the numbers runtime_c/onnxc_regex.h expects)
BYTE, SPLIT, ASSERT, MATCH = 0, 1, 2, 3
BEGIN_TEXT, END_TEXT, BEGIN_LINE, END_LINE, WORD_B, NOT_WORD_B = 1, 2, 3, 4, 5, 6


class RegexError(ValueError):
    def __init__(self, msg: str, pos: int | None):
        super().__init__(msg if pos is None else f"{msg} at position {pos}")
        self.pos = pos


# ---- code point sets: sorted disjoint [lo, hi] lists ---------------------------------------
def norm(ranges) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]


def negate(ranges) -> list[tuple[int, int]]:
    out, nxt = [], 0
    for lo, hi in norm(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return out


DIGIT = [(0x30, 0x39)]
SPACE = [(0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20)]          # RE2: [\t\n\f\r ]
WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
PERL = {"d": DIGIT, "s": SPACE, "w": WORD}
POSIX = {
    "alnum": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)], "alpha": [(0x41, 0x5A), (0x61, 0x7A)],
    "ascii": [(0, 0x7F)], "blank": [(0x09, 0x09), (0x20, 0x20)], "cntrl": [(0, 0x1F), (0x7F, 0x7F)],
    "digit": DIGIT, "graph": [(0x21, 0x7E)], "lower": [(0x61, 0x7A)], "print": [(0x20, 0x7E)],
    "punct": [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)], "space": [(0x09, 0x0D), (0x20, 0x20)],
    "upper": [(0x41, 0x5A)], "word": WORD, "xdigit": [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
}


@functools.lru_cache(maxsize=1)
def _fold_orbits() -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """Simple case-folding orbits (k K U+212A, s S U+017F, ...) from single-character case maps."""
    parent: dict[int, int] = {}

    def find(a):
        while parent.get(a, a) != a:
            a = parent[a]
        return a

    for cp in range(0x1F000):
        if SURR[0] <= cp <= SURR[1]:
            continue
        c = chr(cp)
        for v in (c.lower(), c.upper()):
            if len(v) == 1 and ord(v) != cp:
                a, b = find(cp), find(ord(v))
                if a != b:
                    parent[a] = b
    groups: dict[int, list[int]] = {}
    for cp in list(parent):
        groups.setdefault(find(cp), []).append(cp)
    orbit = {}
    for root, members in groups.items():
        o = tuple(sorted(set(members) | {root}))
        for m in o:
            orbit[m] = o
    return sorted(orbit), orbit


def fold(ranges) -> list[tuple[int, int]]:
    keys, orbit = _fold_orbits()
    out = list(ranges)
    for lo, hi in ranges:
        for k in keys[bisect.bisect_left(keys, lo):bisect.bisect_right(keys, hi)]:
            out.extend((m, m) for m in orbit[k])
    return norm(out)


# ---- UTF-8: a code point range as byte-range sequences -------------------------------------
def _enc(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


def utf8_sequences(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    stack, out = [(lo, hi)], []
    while stack:
        s, e = stack.pop()
        if s > e:
            continue
        if s <= SURR[1] and e >= SURR[0]:               # cut the surrogates out
            stack += [(SURR[1] + 1, e), (s, SURR[0] - 1)]
            continue
        split = next((m for m in (0x7F, 0x7FF, 0xFFFF) if s <= m < e), None)
        if split is not None:                           # one encoded length per piece
            stack += [(split + 1, e), (s, split)]
            continue
        if e <= 0x7F:
            out.append([(s, e)])
            continue
        for i in range(1, 4):
            m = (1 << (6 * i)) - 1
            if s & ~m != e & ~m:
                if s & m:
                    stack += [((s | m) + 1, e), (s, s | m)]
                    break
                if e & m != m:
                    stack += [(e & ~m, e), (s, (e & ~m) - 1)]
                    break
        else:
            out.append(list(zip(_enc(s), _enc(e))))
    return out


# ---- parser: pattern -> AST ----------------------------------------------------------------
# AST: ("set", ranges) one code point; ("cat", [..]); ("alt", [..]); ("rep", node, min, max|None);
# ("assert", kind); ("empty",)
class _Parser:
    def __init__(self, pattern: str):
        self.p, self.i = pattern, 0

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def parse(self):
        node = self.alt({"i": False, "s": False, "m": False})
        if self.i < len(self.p):
            raise RegexError("unexpected )", self.i)
        return node

    def alt(self, flags):
        flags = dict(flags)         # (?i) inside a group lasts to the group's end
        branches = [self.cat(flags)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.cat(flags))
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def cat(self, flags):
        items = []
        while self.i < len(self.p) and self.peek() not in "|)":
            start = self.i
            c = self.peek()
            if c in "*+?" or (c == "{" and self._repeat_at(self.i)):
                raise RegexError("missing argument to repetition operator", start)
            atom = self.atom(flags)
            if atom is None:        # a flag group such as (?i): no atom, flags changed
                continue
            atom = self.quantifiers(atom)
            items.append(atom)
        return ("empty",) if not items else items[0] if len(items) == 1 else ("cat", items)

    def _repeat_at(self, j: int):
        """(min, max, end) when a {m}, {m,} or {m,n} repeat starts at j (else '{' is literal)."""
        p, k = self.p, j + 1
        d0 = k
        while k < len(p) and p[k].isdigit():
            k += 1
        if k == d0:
            return None
        lo, hi = int(p[d0:k]), None
        if k < len(p) and p[k] == ",":
            k += 1
            d1 = k
            while k < len(p) and p[k].isdigit():
                k += 1
            hi = int(p[d1:k]) if k > d1 else -1
        else:
            hi = lo
        if k >= len(p) or p[k] != "}":
            return None
        return lo, (None if hi == -1 else hi), k + 1

    def quantifiers(self, atom):
        quantified = False
        while True:
            c, start = self.peek(), self.i
            if c in ("*", "+", "?") and c:
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                self.i += 1
            elif c == "{" and self._repeat_at(self.i):
                lo, hi, self.i = self._repeat_at(self.i)
                if lo > MAX_REPEAT or (hi is not None and (hi > MAX_REPEAT or hi < lo)):
                    raise RegexError(f"bad repetition operator {self.p[start:self.i]!r}", start)
            else:
                return atom
            if quantified:
                raise RegexError(f"bad repetition operator {self.p[start:self.i]!r} (repeated repetition)", start)
            quantified = True
            if self.peek() == "?":      # lazy: the same set of full matches
                self.i += 1
            atom = ("rep", atom, lo, hi)

    def atom(self, flags):
        c, start = self.peek(), self.i
        self.i += 1
        if c == "(":
            return self.group(flags, start)
        if c == "[":
            return self.cls(flags, start)
        if c == ".":
            r = [(0, MAX_CP)] if flags["s"] else [(0, 9), (11, MAX_CP)]
            return ("set", r)
        if c == "^":
            return ("assert", BEGIN_LINE if flags["m"] else BEGIN_TEXT)
        if c == "$":
            return ("assert", END_LINE if flags["m"] else END_TEXT)
        if c == "\\":
            return self.escape(flags, start, in_class=False)
        return self.lit(ord(c), flags)

    def lit(self, cp: int, flags):
        r = [(cp, cp)]
        return ("set", fold(r) if flags["i"] else r)

    def group(self, flags, start):
        inner = dict(flags)
        if self.peek() == "?":
            self.i += 1
            c = self.peek()
            if c == "P" and self.peek(1) == "<" or c == "<" and self.peek(1) not in "=!":
                self.i += 2 if c == "P" else 1
                name_start = self.i
                while self.peek() and (self.peek().isalnum() or self.peek() == "_"):
                    self.i += 1
                if self.i == name_start or self.peek() != ">":
                    raise RegexError("invalid named capture group", start)
                self.i += 1
            elif c in ("=", "!") or c == "<" or c == "P":
                what = "backreference" if c == "P" else "lookaround"
                raise RegexError(f"{what} (?{c}...) is not supported (nor by RE2)", start)
            else:
                on = True
                seen = False
                while True:
                    c = self.peek()
                    self.i += 1
                    if c in ("i", "m", "s", "U"):
                        if c != "U":
                            inner[c] = on
                        seen = True
                    elif c == "-" and on:
                        on, seen = False, False
                    elif c == ")" and seen:
                        flags.update(inner)     # (?i): applies to the rest of the enclosing group
                        return None
                    elif c == ":" and (seen or on):
                        break
                    else:
                        raise RegexError("invalid or unsupported group flags", start)
        node = self.alt(inner)
        if self.peek() != ")":
            raise RegexError("missing )", start)
        self.i += 1
        return node

    def escape(self, flags, start, in_class: bool):
        c = self.peek()
        if not c:
            raise RegexError("trailing \\", start)
        self.i += 1
        simple = {"a": 7, "f": 12, "t": 9, "n": 10, "r": 13, "v": 11}
        if c in simple:
            return self.lit(simple[c], flags)
        if c in "dswDSW":
            r = PERL[c.lower()]
            if flags["i"]:
                r = fold(r)
            return ("set", negate(r) if c.isupper() else r)
        if c == "x":
            if self.peek() == "{":
                end = self.p.find("}", self.i)
                digits = self.p[self.i + 1:end] if end > 0 else ""
                self.i = end + 1 if end > 0 else self.i
            else:
                digits = self.p[self.i:self.i + 2]
                self.i += 2
            try:
                cp = int(digits, 16)
            except ValueError:
                raise RegexError("invalid \\x escape", start) from None
            if not all(ch in "0123456789abcdefABCDEF" for ch in digits) or cp > MAX_CP or (
                    len(digits) != 2 and self.p[self.i - 1] != "}"):
                raise RegexError("invalid \\x escape", start)
            return self.lit(cp, flags)
        if c == "0" or c in "1234567" and self.peek() and self.peek() in "01234567":
            k = self.i      # octal: \0, or \1-\7 followed by an octal digit (RE2)
            while k < len(self.p) and k < self.i + 2 and self.p[k] in "01234567":
                k += 1
            cp = int(c + self.p[self.i:k], 8)
            self.i = k
            return self.lit(cp, flags)
        if c in "123456789":
            raise RegexError(f"backreference \\{c} is not supported (nor by RE2)", start)
        if not in_class:
            kinds = {"A": BEGIN_TEXT, "z": END_TEXT, "b": WORD_B, "B": NOT_WORD_B}
            if c in kinds:
                return ("assert", kinds[c])
            if c == "Q":
                end = self.p.find("\\E", self.i)
                text = self.p[self.i:end if end >= 0 else len(self.p)]
                self.i = end + 2 if end >= 0 else len(self.p)
                items = [self.lit(ord(ch), flags) for ch in text]
                return ("cat", items) if items else ("empty",)
        if c.isascii() and not c.isalnum():
            return self.lit(ord(c), flags)
        if c in "pP":
            raise RegexError(f"Unicode class \\{c} is not supported by onnxc", start)
        raise RegexError(f"invalid or unsupported escape \\{c}", start)

    def cls(self, flags, start):
        neg = self.peek() == "^"
        if neg:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.peek()
            if not c:
                raise RegexError("missing ]", start)
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[" and self.peek(1) == ":":
                end = self.p.find(":]", self.i + 2)
                name = self.p[self.i + 2:end] if end > 0 else ""
                pneg = name.startswith("^")
                if end > 0 and name.lstrip("^") in POSIX:
                    r = POSIX[name.lstrip("^")]
                    ranges += negate(r) if pneg else r
                    self.i = end + 2
                    continue
                if end > 0 and name.isalpha():
                    raise RegexError(f"invalid character class name [:{name}:]", self.i)
            item_start = self.i
            lo = self.class_char(flags)
            if isinstance(lo, list):            # \d, \w, ... inside the class
                ranges += lo
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.class_char(flags)
                if isinstance(hi, list) or hi < lo:
                    raise RegexError("bad character class range", item_start)
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        if flags["i"]:
            ranges = fold(ranges)
        ranges = norm(ranges)
        return ("set", negate(ranges) if neg else ranges)

    def class_char(self, flags):
        """One class member: a code point, or a list of ranges for \\d etc."""
        c, start = self.peek(), self.i
        self.i += 1
        if c != "\\":
            return ord(c)
        e = self.peek()
        if e in ("b", "A", "z", "B", "Q"):
            raise RegexError(f"invalid escape \\{e} in a character class", start)
        node = self.escape({**flags, "i": False}, start, in_class=True)
        r = node[1]
        return r[0][0] if len(r) == 1 and r[0][0] == r[0][1] and e not in "dswDSW" else list(r)


# ---- AST -> program --------------------------------------------------------------------------
class _Prog:
    def __init__(self, where: str):
        self.insts: list[list[int]] = []
        self.where = where

    def emit(self, op, lo=0, hi=0, x=0, y=0) -> int:
        if len(self.insts) >= MAX_INSTS:
            raise RegexError(f"pattern is too large: its program exceeds {MAX_INSTS} states", None)
        self.insts.append([op, lo, hi, x, y])
        return len(self.insts) - 1

    def split_all(self, starts: list[int]) -> int:
        s = starts[-1]
        for st in reversed(starts[:-1]):
            s = self.emit(SPLIT, x=st, y=s)
        return s

    def comp(self, node, nxt: int) -> int:
        """Instructions for node that continue to nxt; returns the entry."""
        kind = node[0]
        if kind == "empty":
            return nxt
        if kind == "assert":
            return self.emit(ASSERT, lo=node[1], x=nxt)
        if kind == "set":
            if not node[1]:
                return self.emit(BYTE, 1, 0, nxt)     # an empty class: a byte range nothing is in
            starts, tails = [], {}      # tails: shared suffixes (continuation bytes) -> entry
            for lo, hi in node[1]:
                for seq in utf8_sequences(lo, hi):
                    k = nxt
                    for j in reversed(range(len(seq))):
                        key = tuple(seq[j:])
                        if key not in tails:
                            tails[key] = self.emit(BYTE, seq[j][0], seq[j][1], k)
                        k = tails[key]
                    starts.append(k)
            return self.split_all(starts)
        if kind == "cat":
            for child in reversed(node[1]):
                nxt = self.comp(child, nxt)
            return nxt
        if kind == "alt":
            return self.split_all([self.comp(c, nxt) for c in node[1]])
        _, sub, lo, hi = node
        k = nxt
        if hi is None:                       # x*: a loop back through one split
            loop = self.emit(SPLIT, x=-1, y=nxt)
            self.insts[loop][3] = self.comp(sub, loop)
            k = loop
        else:
            for _ in range(hi - lo):         # (x(x(...)?)?)?
                k = self.emit(SPLIT, x=self.comp(sub, k), y=nxt)
        for _ in range(lo):
            k = self.comp(sub, k)
        return k


def compile_pattern(pattern: str) -> tuple[int, list[list[int]]]:
    """(entry, instructions) of the full-match program of pattern; RegexError if unsupported."""
    ast = _Parser(pattern).parse()
    prog = _Prog(pattern)
    match = prog.emit(MATCH)
    entry = prog.comp(ast, match)
    return entry, prog.insts


# ---- program -> DFA (subset construction), when small enough ---------------------------------
MAX_DFA_STATES = 4096
MAX_DFA_CELLS = 1 << 16          # transition table entries (C source size)
MAX_DFA_WORK = 1 << 22           # NFA states visited while building it (compile time)


def _closure_word(c: int) -> bool:
    return 0 <= c < 0x80 and (chr(c).isalnum() or c == 0x5F)


def _closure(insts, seeds, prev: int, nxt: int) -> set[int]:
    """BYTE/MATCH states reachable from seeds between bytes prev (-1: start) and nxt (0: end)."""
    word = _closure_word
    holds = {BEGIN_TEXT: prev < 0, END_TEXT: nxt == 0, BEGIN_LINE: prev < 0 or prev == 10,
             END_LINE: nxt in (0, 10), WORD_B: word(prev) != word(nxt), NOT_WORD_B: word(prev) == word(nxt)}
    seen, out, stack = set(), set(), list(seeds)
    while stack:
        k = stack.pop()
        if k in seen:
            continue
        seen.add(k)
        op, lo, _, x, y = insts[k]
        if op == SPLIT:
            stack += [x, y]
        elif op == ASSERT:
            if holds[lo]:
                stack.append(x)
        else:
            out.add(k)
    return out


def to_dfa(entry: int, insts):
    """A DFA for the program, or None past the size caps. A state is (NFA states still to close,
    previous byte's class representative): assertions need the bytes either side. Returns
    (class of each byte [256], number of classes, transitions [state * classes + class], accepting
    [state], start); state 0 is the dead state."""
    has_assert = any(i[0] == ASSERT for i in insts)
    cuts = {0, 1, 256}                                   # byte 0 (never read) is a class of its own
    for op, lo, hi, _, _ in insts:
        if op == BYTE and lo <= hi:
            cuts |= {lo, hi + 1}
    if has_assert:                                       # word / newline must not share a class
        cuts |= {10, 11, 0x30, 0x3A, 0x41, 0x5B, 0x5F, 0x60, 0x61, 0x7B}
    cuts = sorted(cuts)
    reps = cuts[:-1]                                     # lowest byte of each class
    cls = [0] * 256
    for c, (a, b) in enumerate(zip(cuts, cuts[1:])):
        for v in range(a, b):
            cls[v] = c
    ncls = len(reps)
    ids = {None: 0}
    states: list = [None]
    delta: list[int] = [0] * ncls
    accept = [0]

    def meets_assert(seeds) -> bool:
        seen, stack = set(), list(seeds)
        while stack:
            k = stack.pop()
            if k not in seen:
                seen.add(k)
                op, _, _, x, y = insts[k]
                if op == ASSERT:
                    return True
                if op == SPLIT:
                    stack += [x, y]
        return False

    def state_id(seeds, prev):
        seeds = frozenset(seeds)
        # only what assertions ask of the previous byte tells states apart: start, newline, word, other
        prev = (-1 if prev < 0 else 10 if prev == 10 else 0x61 if _closure_word(prev) else 0x20) \
            if has_assert and meets_assert(seeds) else 0
        key = (seeds, prev) if seeds else None
        if key not in ids:
            ids[key] = len(states)
            states.append(key)
        return ids[key]

    start = state_id({entry}, -1)
    j, work = 1, 0
    while j < len(states):
        if len(states) > MAX_DFA_STATES or len(states) * ncls > MAX_DFA_CELLS or work > MAX_DFA_WORK:
            return None
        seeds, prev = states[j]
        closures: dict[int, list[int]] = {}   # assertions only see the next byte's kind

        def live(b):
            kind = 0 if b == 0 else 10 if b == 10 else 0x61 if _closure_word(b) else 0x20
            if kind not in closures:
                closures[kind] = sorted(_closure(insts, seeds, prev, kind))
            return closures[kind]

        accept.append(int(any(insts[k][0] == MATCH for k in live(0))))
        for b in reps:
            if b == 0:
                delta.append(0)
                continue
            ks = live(b)
            work += len(ks)
            nxt = {insts[k][3] for k in ks if insts[k][0] == BYTE and insts[k][1] <= b <= insts[k][2]}
            delta.append(state_id(nxt, b))
        j += 1
    return cls, ncls, delta, accept, start
