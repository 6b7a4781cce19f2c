"""Stage 4: the static memory plan. A pure function: (Graph, per-node planning facts) -> MemoryPlan.

1. Storage groups (union-find): views (Reshape, Flatten, ...) alias their input; elementwise
   ops may write over an input that dies at that node (in-place); a Concat of one output row
   gets its inputs as slices of its output (each value then sits at a byte offset, `delta`, in
   its group; its producer writes there and the Concat copies nothing), and a Slice of whole rows
   is a window into its input (at its offset, copying nothing). A group is read-only (a
   graph input or a weight), bound to a graph output buffer, or placed in the arena.
2. Liveness of each arena group: [first producer, last reader] in node order; node scratch
   lives during its node only.
3. A group whose size involves a heap dim (onnxc.dynamic: known only while running, no bound)
   is not placed: its first producer takes it from the run's heap; so is such a node scratch.
4. Placement: greedy by size, lowest offset first. Sizes are symbolic polynomials; a candidate
   offset is taken only when it is *provably* free of every overlapping block for all symbol
   values, so one plan serves every batch size. Offsets are 64-byte aligned.
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple

from .dynamic import on_heap, run_bounds
from .ir import Graph, Node, Value
from .symbolic import Dim, align_up, dmax, dim_repr, evaluate, product, provably_le, substitute, terms_of

ALIGN = 64


@dataclass(frozen=True)
class NodeFacts:
    """What the planner needs to know about one node (from its OpSpec)."""
    view: bool = False
    inplace: tuple[tuple[int, int], ...] = ()
    scratch: Dim = 0
    slices: tuple[int, ...] = ()    # output 0 holds input i's bytes at byte offset slices[i]
    window: int | None = None       # output 0 is input 0's bytes from this byte offset on


@dataclass
class Block:
    key: str          # "g<root value id>" or "s<node index>"
    size: Dim
    start: int
    end: int
    offset: Dim = 0


@dataclass
class MemoryPlan:
    storage: dict[int, tuple]          # value id -> ("input", i) | ("overridable", i, root id)
                                       #            | ("weight", root id)
                                       #            | ("output", j) | ("arena", offset)
                                       #            | ("heap", id of the group's first value)
    aliased_views: set[int]            # node indices whose view output shares its input's storage
                                       # (and Concats whose inputs are slices of their output,
                                       # Slices whose output is a window into their input)
    copies: list[tuple[Value, int]]    # at the end: copy value into graph output j
    scratch: dict[int, Dim]            # node index -> arena offset of its workspace
    blocks: list[Block]
    arena_bytes: Dim
    hint: dict[str, int] = field(default_factory=dict)
    heap_outputs: list[tuple[Value, int]] = field(default_factory=list)  # graph output j is on the heap
    heap_scratch: dict[int, Dim] = field(default_factory=dict)           # node index -> scratch bytes

    def lower_bound(self, env: Mapping[str, int]) -> int:
        """Largest sum of simultaneously live blocks: no plan can use less."""
        if not self.blocks:
            return 0
        last = max(b.end for b in self.blocks)
        best = 0
        for t in range(last + 1):
            best = max(best, sum(evaluate(b.size, env) for b in self.blocks if b.start <= t <= b.end))
        return best

    def arena_at(self, env: Mapping[str, int]) -> int:
        return evaluate(self.arena_bytes, env)


def nbytes(v: Value, bounds: Mapping[str, Dim] | None = None) -> Dim:
    """Bytes of v; dims assigned while the model runs count at their upper bound."""
    size = product(v.shape) * v.etype.itemsize
    return substitute(size, bounds) if bounds else size


class _Groups:
    def __init__(self):
        self.parent: dict[int, int] = {}
        self.kind: dict[int, tuple] = {}

    def find(self, x: int) -> int:
        while self.parent.get(x, x) != x:
            self.parent[x] = self.parent.get(self.parent[x], self.parent[x])
            x = self.parent[x]
        return x

    def union(self, keep: int, other: int, kind: tuple) -> None:
        a, b = self.find(keep), self.find(other)
        self.parent[b] = a
        self.kind[a] = kind


def plan(graph: Graph, facts: Callable[[Node], NodeFacts], hint: Mapping[str, int] | None = None) -> MemoryPlan:
    bounds = run_bounds(graph.nodes)
    g = _Groups()
    members: dict[int, list[Value]] = {}
    for v in graph.values:
        members[v.id] = [v]
        if v.producer is None:
            if v in graph.overridable:
                g.kind[v.id] = ("overridable", graph.overridable.index(v), v.id)
            elif v.is_input:
                g.kind[v.id] = ("input", graph.inputs.index(v))
            elif v.const is not None:
                g.kind[v.id] = ("weight", v.id)   # views of it keep reading the root's bytes
        else:
            g.kind[v.id] = ("arena",)
    copies: list[tuple[Value, int]] = []
    for j, v in enumerate(graph.outputs):
        root = g.find(v.id)
        if g.kind[root][0] == "arena":
            g.kind[root] = ("output", j)
        else:  # an input, a weight, or an output listed twice
            copies.append((v, j))

    def last_use(root: int) -> int:
        return max((c.index for m in members[root] for c in m.consumers), default=-1)

    delta: dict[int, int] = {}      # value id -> byte offset in its group's storage (0 if absent)
    uneven: set[int] = set()        # roots of groups with members at offsets or of other sizes

    def merge(a: Value, b: Value, at: int = 0) -> None:
        """b's group into a's, b at byte offset `at` from a (its members move with it)."""
        ra, rb = g.find(a.id), g.find(b.id)
        ka, kb = g.kind[ra], g.kind[rb]
        kind = kb if kb[0] == "output" else ka
        shift = delta.get(a.id, 0) + at - delta.get(b.id, 0)
        # one size comparison per merge: recomputing sizes over whole groups (symbolic products)
        # at every view or in-place candidate was quadratic in long chains. Only numbers can
        # differ: windows and slices need known sizes, and a view's symbolic size may be written
        # another way yet is the same
        na, nb = nbytes(members[ra][0], bounds), nbytes(members[rb][0], bounds)
        if shift or ra in uneven or rb in uneven or (isinstance(na, int) and isinstance(nb, int) and na != nb):
            uneven.add(ra)
        uneven.discard(rb)
        g.union(ra, rb, kind)
        if shift:
            for m in members[rb]:
                delta[m.id] = delta.get(m.id, 0) + shift
        members[ra].extend(members.pop(rb))

    def sliced(root: int) -> bool:
        """Members at different offsets or of different sizes (Concat slices, Slice windows)."""
        return root in uneven

    def arena_only(r: int) -> bool:
        """Group r is placed in the arena and holds no graph output."""
        return g.kind[r][0] == "arena" and not any(m.is_output for m in members[r])

    def plain(x: Value) -> bool:
        """x's group: in the arena, not a graph output, every member x's bytes at offset 0."""
        r = g.find(x.id)
        return arena_only(r) and not sliced(r) and nbytes(members[r][0], bounds) == nbytes(x, bounds)

    def fresh_output(y: Value) -> bool:
        """y alone in a plain group: it may take storage inside another group."""
        return plain(y) and len(members[g.find(y.id)]) == 1

    def busy_until(m: Value) -> int:
        """The last node that writes or reads m."""
        return max([c.index for c in m.consumers] + [m.producer.index if m.producer is not None else -1])

    def group_start(root: int) -> int:
        """The first node that writes group root."""
        return min(m.producer.index for m in members[root] if m.producer is not None)

    def take_slices(node: Node, at: tuple[int, ...]) -> bool:
        """Output 0 as its inputs laid end to end (byte offsets `at`), all of them or none. An input
        in a group of its own joins y's storage at its offset; inputs already sliced into one group
        (a Concat of the same prefix before: DenseNet's blocks) must sit at these offsets from each
        other, and y joins that group where they say, its other bytes free of every member still
        read or written once the new input's group is first written."""
        y, xs = node.outputs[0], node.inputs
        if y is None or len(xs) != len(at) or None in xs or any(o % ALIGN for o in at) or not fresh_output(y):
            return False
        fresh = [i for i, x in enumerate(xs) if plain(x)]
        held = [i for i in range(len(xs)) if i not in fresh]
        if len({g.find(xs[i].id) for i in fresh}) != len(fresh):   # an input twice, or its view
            return False
        if held:
            r, anchor = g.find(xs[held[0]].id), xs[held[0]]
            base = delta.get(anchor.id, 0) - at[held[0]]             # y's offset in that group
            if not arena_only(r) or any(g.find(xs[i].id) != r or delta.get(xs[i].id, 0) - at[i] != base
                                        for i in held):
                return False
            # a member's bytes are free again after its last use: ShuffleNet concatenates a
            # channel half of the unit's input with the branch computed from the other half
            used = [(delta.get(m.id, 0), delta.get(m.id, 0) + nbytes(m, bounds), busy_until(m)) for m in members[r]]
            for i in fresh:
                lo, first = base + at[i], group_start(g.find(xs[i].id))
                if any(a < lo + nbytes(xs[i], bounds) and lo < b and until >= first for a, b, until in used):
                    return False
            merge(anchor, y, -at[held[0]])
        for i in fresh:
            merge(y, xs[i], at[i])
        return True

    def take_window(node: Node, at: int) -> bool:
        """Output 0 as input 0's bytes from byte offset `at` on: both in the arena (a window
        never becomes a graph output buffer, nor reads one), sizes known, the offset aligned."""
        x, y = node.inputs[0], node.outputs[0]
        if x is None or y is None or at % ALIGN or not fresh_output(y):
            return False
        r = g.find(x.id)
        # sizes known: an even group's members share its first one's, an uneven one's are numbers
        if not arena_only(r) or not isinstance(nbytes(members[r][0], bounds), int):
            return False
        merge(x, y, at)
        return True

    aliased: set[int] = set()
    scratch_sizes: dict[int, Dim] = {}
    for node in graph.nodes:
        f = facts(node)
        if f.scratch != 0:
            scratch_sizes[node.index] = f.scratch
        if f.view and node.inputs[0] is not None and node.outputs[0] is not None:
            x, y = node.inputs[0], node.outputs[0]
            kx, ky = g.kind[g.find(x.id)][0], g.kind[g.find(y.id)][0]
            # a Concat slice or Slice window cannot become an output buffer of its own
            if not (ky == "output" and (kx != "arena" or sliced(g.find(x.id)))):
                merge(x, y)
                aliased.add(node.index)
            continue
        if f.slices and take_slices(node, f.slices):
            aliased.add(node.index)
            continue
        if f.window is not None and take_window(node, f.window):
            aliased.add(node.index)
            continue
        for oi, ii in f.inplace:
            x, y = node.input(ii), node.outputs[oi] if oi < len(node.outputs) else None
            if x is None or y is None:
                continue
            rx, ry = g.find(x.id), g.find(y.id)
            kx, ky = g.kind[rx][0], g.kind[ry][0]
            if rx == ry or kx not in ("arena", "output") or (kx == "output" and ky == "output"):
                continue
            if (ky == "output" and sliced(rx)) or (kx == "output" and sliced(ry)):
                continue
            if any(m.is_output for m in members[rx]) or last_use(rx) != node.index:
                continue
            if nbytes(x, bounds) != nbytes(y, bounds) or (bounds and nbytes(x) != nbytes(y)):
                continue
            merge(x, y)
            break

    storage: dict[int, tuple] = {}
    blocks: list[Block] = []
    block_of: dict[int, Block] = {}
    heap_outputs: list[tuple[Value, int]] = []
    for root, mem in members.items():
        kind = g.kind[g.find(root)]
        if kind[0] in ("arena", "output") and on_heap(nbytes(mem[0], bounds)):
            first = min((m for m in mem if m.producer is not None), key=lambda m: m.producer.index)
            if kind[0] == "output":
                heap_outputs.append((graph.outputs[kind[1]], kind[1]))
            kind = ("heap", first.id)
        elif kind[0] == "arena":
            # members share one byte size, but for Concat slices and Slice windows (sizes known)
            size = nbytes(mem[0], bounds)
            if sliced(root):     # from the lowest member's first byte (a prefix may come first)
                low = min(delta.get(m.id, 0) for m in mem)
                for m in mem:
                    delta[m.id] = delta.get(m.id, 0) - low
                size = max(delta[m.id] + nbytes(m, bounds) for m in mem)
            size = align_up(size, ALIGN)
            start = min(m.producer.index for m in mem if m.producer is not None)
            end = max(start, last_use(root))
            b = Block(f"g{root}", size, start, end)
            blocks.append(b)
            block_of[root] = b
        for m in mem:
            storage[m.id] = kind
    heap_scratch: dict[int, Dim] = {}
    for idx, size in scratch_sizes.items():
        size = substitute(size, bounds)
        if on_heap(size):
            heap_scratch[idx] = size
        else:
            blocks.append(Block(f"s{idx}", align_up(size, ALIGN), idx, idx))
    for v, j in list(copies):   # an input or a second name of a heap value: its pointer
        if on_heap(nbytes(v, bounds)):
            copies.remove((v, j))
            heap_outputs.append((v, j))

    hint = dict(hint or {})
    for b in blocks:
        for s in _symbols(b.size):
            hint.setdefault(s, 16)
    arena = _place(blocks, hint)
    for root, b in block_of.items():
        for m in members[root]:
            storage[m.id] = ("arena", b.offset + delta.get(m.id, 0))
    scratch = {int(b.key[1:]): b.offset for b in blocks if b.key[0] == "s"}
    return MemoryPlan(storage, aliased, copies, scratch, blocks, arena, hint, heap_outputs, heap_scratch)


def _symbols(d: Dim) -> set:
    return d.symbols() if not isinstance(d, int) else set()


def _place(blocks: list[Block], hint: Mapping[str, int]) -> Dim:
    """Offsets for blocks (set on each) and the arena's size. With symbolic sizes, two plans: all
    blocks at once (_place_symbolic), and one region per shape class (_place_by_class); the one
    smaller at the hint is kept (both are valid for every symbol value)."""
    if all(isinstance(b.size, int) for b in blocks):
        return _place_concrete(blocks)
    by_class = _place_by_class(blocks, hint)
    offsets = [b.offset for b in blocks]
    mixed = _place_symbolic(blocks, hint)
    if evaluate(by_class, hint) <= evaluate(mixed, hint):
        for b, off in zip(blocks, offsets):
            b.offset = off
        return by_class
    return mixed


def _place_by_class(blocks: list[Block], hint: Mapping[str, int]) -> Dim:
    """Blocks grouped by their size's monomials (a torchvision model with a batch dim: numbers,
    for the scratch of nodes that work per image, and multiples of batch), each group placed in
    its own region, the regions one above the other. A group of one monomial m (sizes c * m, c >= 0)
    is placed as numbers (the coefficients c) and scaled by m: m >= 0, so blocks apart at m = 1
    are apart for every value. Mixing groups, as _place_symbolic does, leaves a block of c * batch
    and one of a fixed size comparable only through max() atoms; past MAX_NESTING nothing above
    them was reused: ResNet-18 exported with a batch dim took a 73 MB arena at batch 1 (12.9 MB
    placed per class)."""
    groups: dict[tuple, list[Block]] = {}
    terms = {id(b): terms_of(b.size) for b in blocks}
    for b in blocks:
        groups.setdefault(tuple(dim_repr(m) for m, _ in terms[id(b)]), []).append(b)
    base: Dim = 0
    for key in sorted(groups):
        members = groups[key]
        coefs = [terms[id(b)][0][1] for b in members] if len(key) == 1 else [-1]
        if min(coefs) >= 0:
            unit = terms[id(members[0])][0][0]               # the group's one monomial
            scaled = [Block(b.key, c, b.start, b.end) for b, c in zip(members, coefs)]
            region: Dim = _place_concrete(scaled) * unit
            for b, s in zip(members, scaled):
                b.offset = base + s.offset * unit
        else:
            region = _place_symbolic(members, hint)
            for b in members:
                b.offset = base + b.offset
        base = base + region
    return base


class _Placed(NamedTuple):
    """A placed block's end (its value at the hint, its repr to order ties, the Dim) and the value
    of its offset at the hint."""
    hi_v: int
    hi_repr: str
    hi: Dim
    lo_v: int


def _place_symbolic(blocks: list[Block], hint: Mapping[str, int]) -> Dim:
    """Greedy by size, lowest provably free offset first. A candidate that overlaps a live block at
    the hint's values cannot be free for every value, so only candidates free at the hint (found
    with the live blocks sorted by offset) get the symbolic test, and two numbers compare without
    the algebra: testing every candidate against every live block symbolically was cubic (a
    DenseNet-121 with a batch dim took over 20 minutes)."""
    order = sorted(blocks, key=lambda b: (-evaluate(b.size, hint), b.start, b.key))
    placed: list[Block] = []
    ends: dict[int, _Placed] = {}   # id(placed block) -> its offset and end
    top: Dim = 0      # the sizes placed so far, summed: every placed block ends at or below it
    for b in order:
        live = [p for p in placed if p.start <= b.end and b.start <= p.end]
        size_v = evaluate(b.size, hint)
        facts = [ends[id(p)] for p in live]
        lows = [f.lo_v for f in facts]
        spans = sorted((f.lo_v, f.hi_v) for f in facts)
        starts = [lo for lo, _ in spans]
        reach = list(itertools.accumulate((hi for _, hi in spans), max))   # highest end so far
        cands = {0: _Placed(0, "0", 0, 0)}
        for f in facts:
            cands.setdefault(f.hi, f)
        chosen = None
        for c_v, _, c, _ in sorted(cands.values(), key=lambda t: (t.hi_v, t.hi_repr)):
            k = bisect.bisect_left(starts, c_v + size_v)   # live blocks starting below its end
            if k and reach[k - 1] > c_v:                   # one of them ends above its start
                continue
            if _free(c, c + b.size, c_v, c_v + size_v, live, lows, ends):
                chosen = c
                break
        if chosen is None:  # above every block it overlaps: valid for all symbol values
            chosen = _above([ends[id(p)].hi for p in live], top)
        b.offset = chosen
        end = chosen + b.size
        end_v = evaluate(end, hint)
        ends[id(b)] = _Placed(end_v, repr(end), end, evaluate(chosen, hint))
        top = top + b.size
        placed.append(b)
    return _above([ends[id(b)].hi for b in placed], top)


def _free(lo: Dim, hi: Dim, lo_v: int, hi_v: int, live: list[Block], lows: list[int], ends: dict) -> bool:
    """[lo, hi) (lo_v, hi_v at the hint) provably below or above each live block. At the hint each
    block lies on one side already (the caller checked): only that side can be provable, so only
    it is tested."""
    for p, p_lo_v in zip(live, lows):
        placed_p = ends[id(p)]
        p_hi_v, p_hi = placed_p.hi_v, placed_p.hi
        if hi_v <= p_lo_v and provably_le(hi, p.offset):
            continue
        if p_hi_v <= lo_v and provably_le(p_hi, lo):
            continue
        return False
    return True


def _place_concrete(blocks: list[Block]) -> int:
    """_place's choice when every size is a number (no symbolic dims): the lowest offset free of
    every block live at the same time, found by one sweep over those blocks sorted by offset
    instead of testing each candidate against each of them symbolically (cubic: DenseNet-121's
    1198 blocks took 19 minutes to place)."""
    placed: list[Block] = []
    arena = 0
    for b in sorted(blocks, key=lambda b: (-b.size, b.start, b.key)):
        off = 0
        for lo, hi in sorted((p.offset, p.offset + p.size) for p in placed
                             if p.start <= b.end and b.start <= p.end):
            if off + b.size <= lo:      # fits below this block, and every later one starts above
                break
            off = max(off, hi)          # overlaps it (or lies below it): try just above it
        b.offset = off
        arena = max(arena, off + b.size)
        placed.append(b)
    return arena


def _above(ends: list[Dim], top: Dim) -> Dim:
    """The max of ends (each <= top), kept shallow: a max of max of ... in several run-time dims
    grows exponentially as later offsets nest it again, so past MAX_NESTING the bound is top (no
    reuse above it, but a polynomial)."""
    out: Dim = 0
    for e in ends:
        out = dmax(out, e)
        if _max_depth(out) > MAX_NESTING:
            return top
    return out


MAX_NESTING = 3


def _max_depth(d: Dim, limit: int = MAX_NESTING + 1) -> int:
    """How deeply max() atoms nest in d, counted up to limit."""
    if isinstance(d, int) or limit == 0:
        return 0
    deepest = 0
    for a in d.atoms():
        if a[0] == "max":
            deepest = max(deepest, 1 + max(_max_depth(x, limit - 1) for x in a[1:]))
        elif a[0] != "sym":
            deepest = max(deepest, max(_max_depth(x, limit) for x in a[1:]))
        if deepest >= limit:
            return deepest
    return deepest
