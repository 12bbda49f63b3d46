"""A Claude Code session's tree, kept in a few bytes per entry.

Placing a whole session (claude_code.py) needs its tree before the first entry is placed:
which chain leads to the latest leaf (the main line), and, while placing, where each
entry's parent went. A session of hundreds of megabytes has hundreds of thousands of
entries; held as objects and strings that is most of a gigabyte per million entries, so
an import through the API or the command would cost memory in proportion to the file.
Here each entry costs a few dozen bytes, whatever the file's size:

- `Tree`: per entry (in file order) the 64-bit hashes of its uuid, parent uuid (or, for a
  compact boundary, its logical parent) and message id, its type as a code, its flags
  (sidechain, isMeta, a real turn) and its line number, in typed arrays; a uuid is found
  again through a `HashIndex` (open addressing in two arrays: no Python object per
  entry, not even while it is built). Two uuids of one session sharing a 64-bit hash is
  as likely as a collision of random 64-bit numbers among a million: not at all.
- `main_line`, `placement`: the main line and the order to place entries in, computed on
  those arrays (claude_code.py describes the rules);
- `KnownTable`: what the placer remembers of each placed entry (its conversation, its
  position, whether it has a real child yet), in arrays indexed by the uuid's slot;
- `Trail`: where each entry outside a sidechain was placed, for the spawn point of an
  inline subagent, in runs of increasing sequence numbers.
"""

import bisect
import hashlib
from array import array

# Entry types as codes (0: not an object, or no type).
TYPES = ("user", "assistant", "system", "progress", "attachment")
CODE = {t: i + 1 for i, t in enumerate(TYPES)}
METADATA_CODE, UNKNOWN_CODE = 6, 7
LINKED_CODES = frozenset(CODE[t] for t in ("user", "assistant", "system", "progress", "attachment"))
SIDECHAIN, META, REAL = 1, 2, 4
NONE = 0  # the hash of no uuid


def hash64(value: str | None, size: int = 8) -> int:
    """A uuid (or message id) as a signed 64-bit (or `size`-byte) number; 0 for none."""
    if not value:
        return NONE
    number = int.from_bytes(hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=size).digest(),
                            "little", signed=True)
    return number or 1


def hash32(value: str | None) -> int:
    """A message id as a signed 32-bit number (0 for none): it is only asked whether a response
    is on the main line, where a rare collision would only keep a line there."""
    return hash64(value, 4)


class HashIndex:
    """64-bit hashes (never 0) → a non-negative number, by open addressing in two arrays; a
    hash's slot (its place in the arrays) stays the same once it is in."""

    def __init__(self, capacity: int):
        # A little room past the capacity keeps probes short; no more, to stay small.
        self.size = max(16, capacity + capacity // 6 + 1)
        self.keys = array("q", [NONE]) * self.size
        self.values = array("i", [0]) * self.size

    def __len__(self) -> int:
        return len(self.keys)

    def slot(self, h: int) -> int:
        """Where `h` is, or where it would go."""
        keys, size = self.keys, self.size
        i = h % size
        while keys[i] != NONE and keys[i] != h:
            i = i + 1 if i + 1 < size else 0
        return i

    def put(self, h: int, value: int) -> int:
        i = self.slot(h)
        self.keys[i] = h
        self.values[i] = value
        return i

    def find(self, h: int) -> int:
        """The slot of `h`, or -1."""
        if h == NONE:
            return -1
        i = self.slot(h)
        return i if self.keys[i] == h else -1

    def get(self, h: int, default: int = -1) -> int:
        i = self.find(h)
        return self.values[i] if i >= 0 else default


class Tree:
    """The links and kinds of a stream's entries, in arrays (module docstring)."""

    def __init__(self):
        self.uuid = array("q")
        self.parent = array("q")
        self.group = array("i")
        self.code = bytearray()
        self.flags = bytearray()
        self.line = array("i")
        self._index: HashIndex | None = None  # every uuid

    def __len__(self) -> int:
        return len(self.code)

    def add(self, *, uuid: str | None, parent: str | None, group: str | None, type_code: int, flags: int,
            line: int) -> None:
        self.uuid.append(hash64(uuid))
        self.parent.append(hash64(parent))
        self.group.append(hash32(group))
        self.code.append(type_code)
        self.flags.append(flags)
        self.line.append(line)
        self._index = None

    def type_of(self, i: int) -> str | None:
        code = self.code[i]
        return TYPES[code - 1] if 1 <= code <= len(TYPES) else None

    def forget_links(self) -> None:
        """Give back what only the main line needs: the parents', message ids' and (once the
        index holds them) the uuids' hashes."""
        self.index()
        self.uuid = array("q")
        self.parent = array("q")
        self.group = array("i")

    def has_sidechains(self) -> bool:
        return any(f & SIDECHAIN for f in self.flags)

    def index(self) -> HashIndex:
        """Every uuid of the stream: a uuid's slot here is its place in the KnownTable."""
        if self._index is None:
            index = HashIndex(sum(1 for h in self.uuid if h != NONE))
            for h in self.uuid:
                if h != NONE:
                    index.put(h, 1)
            self._index = index
        return self._index

    def slot(self, uuid: str | None) -> int:
        return self.index().find(hash64(uuid))

    def linked_node(self, i: int) -> bool:
        return self.uuid[i] != NONE and self.code[i] in LINKED_CODES and not self.flags[i] & SIDECHAIN


class Flags:
    """The sequence numbers of the entries on the main line, as a flag per entry."""

    def __init__(self, flags: bytearray, first_seq: int):
        self.flags = flags
        self.first_seq = first_seq
        self.any = any(flags)

    def __contains__(self, seq: int) -> bool:
        i = seq - self.first_seq
        return 0 <= i < len(self.flags) and bool(self.flags[i])

    def __bool__(self) -> bool:
        return self.any


def _nodes(tree: Tree) -> tuple[bytearray, array, array]:
    """(a flag per entry: the linked node of its uuid, its parent node or -1 per entry, the nodes
    in the order their uuids first appear). A uuid written twice is its last entry."""
    n = len(tree)
    last = HashIndex(sum(1 for i in range(n) if tree.linked_node(i)))  # uuid → its last linked entry
    first = array("i")  # each uuid's first linked entry, in file order
    for i in range(n):
        if tree.linked_node(i):
            if last.find(tree.uuid[i]) < 0:
                first.append(i)
            last.put(tree.uuid[i], i)
    node = bytearray(n)
    in_order = array("i", (last.get(tree.uuid[i]) for i in first))
    for i in in_order:
        node[i] = 1
    parent_of = array("i", [-1]) * n
    for i in in_order:
        parent_of[i] = last.get(tree.parent[i])
    return node, parent_of, in_order


def main_line(tree: Tree) -> bytearray:
    """A flag per entry: on the main line. Per connected part of the tree (in file order), the
    chain to its latest non-sidechain message that is not meta, plus what a parallel turn
    hangs off that chain (tool results, lines of the same response, notes)."""
    n = len(tree)
    node, parent_of, in_order = _nodes(tree)
    _cut_cycles(parent_of, in_order)
    root_of = array("i", [-1]) * n

    def root(i: int) -> int:
        path = []
        while root_of[i] < 0 and parent_of[i] >= 0:
            path.append(i)
            i = parent_of[i]
        r = root_of[i] if root_of[i] >= 0 else i
        for p in path:
            root_of[p] = r
        root_of[i] = r
        return r

    leaf = array("i", [-1]) * n  # per root: its latest message
    for i in range(n):
        if node[i] and tree.code[i] in (CODE["user"], CODE["assistant"]) and not tree.flags[i] & META:
            leaf[root(i)] = i
    line = bytearray(n)
    for r in range(n):
        cur = leaf[r]
        while cur >= 0 and not line[cur]:
            line[cur] = 1
            cur = parent_of[cur]
    _hang_on(tree, line, node, parent_of, lambda i: leaf[root(i)] < 0)
    return line


def _hang_on(tree: Tree, line: bytearray, node: bytearray, parent_of: array, messageless) -> None:
    """Add to the line what hangs off it: an entry whose parent is on it and that is no real turn
    of its own (a tool result, a note) or a line of a response already on it; and the entries of
    a part of the tree with no message at all."""
    # The message ids of the responses on the line.
    groups = HashIndex(sum(1 for i in range(len(tree)) if line[i] and tree.group[i] != NONE))
    for i in range(len(tree)):
        if line[i] and tree.group[i] != NONE:
            groups.put(tree.group[i], 1)

    def in_groups(h: int) -> bool:
        return groups.find(h) >= 0

    for _ in range(3):
        for i in range(len(tree)):
            if not node[i] or line[i]:
                continue
            p = parent_of[i]
            if p < 0:
                if messageless(i):
                    line[i] = 1
            elif line[p] and (not tree.flags[i] & REAL or in_groups(tree.group[i])):
                line[i] = 1


def _cut_cycles(parent_of: array, nodes) -> None:
    """Drop links that make a cycle (a logicalParentUuid pointing below its boundary): walk up
    from each node once, in the order their uuids first appear; a walk that meets itself cuts
    the link that closed the loop."""
    done = bytearray(len(parent_of))
    walk = array("i", [0]) * len(parent_of)  # the walk that last passed each node
    for number, start in enumerate(nodes, 1):
        cur, last = start, -1
        while cur >= 0 and not done[cur]:
            if walk[cur] == number:
                parent_of[last] = -1
                break
            walk[cur] = number
            last, cur = cur, parent_of[cur]
        cur = start
        while cur >= 0 and not done[cur]:
            done[cur] = 1
            cur = parent_of[cur]


def placement(tree: Tree, first_seq: int = 0) -> tuple[array, Flags, bool]:
    """(the order to place entries in, as indexes; the main line; whether no linked entry names
    a parent though several are linked). The main line and metadata first, in file order; then
    branches; then sidechains."""
    line = main_line(tree)
    first, branches, sidechains = array("i"), array("i"), array("i")
    linked, named = 0, False
    for i in range(len(tree)):
        node = tree.linked_node(i)
        if node:
            linked += 1
            named = named or tree.parent[i] != NONE
        if tree.flags[i] & SIDECHAIN:
            sidechains.append(i)
        elif line[i] or not node:
            first.append(i)
        else:
            branches.append(i)
    return first + branches + sidechains, Flags(line, first_seq), linked > 1 and not named


# ---- what the placer remembers -------------------------------------------------------------------


class KnownTable:
    """The placer's memory of placed entries (claude_code_placer.Known), by uuid, in arrays."""

    def __init__(self, tree: Tree):
        self.tree = tree
        size = len(tree.index())
        self.conv = array("h", [-1]) * size
        self.position = array("i", [0]) * size
        self.real_child = bytearray(size)
        self.conv_keys: list[str] = []
        self.conv_code: dict[str, int] = {}
        self.count = 0

    def _slot(self, uuid) -> int:
        return self.tree.slot(uuid) if isinstance(uuid, str) else -1

    def __contains__(self, uuid) -> bool:
        s = self._slot(uuid)
        return s >= 0 and self.conv[s] >= 0

    def __getitem__(self, uuid):
        s = self._slot(uuid)
        if s < 0 or self.conv[s] < 0:
            raise KeyError(uuid)
        return _KnownView(self, s)

    def get(self, uuid, default=None):
        return self[uuid] if uuid in self else default

    def __setitem__(self, uuid, known) -> None:
        s = self._slot(uuid)
        if s < 0:
            return  # not an entry of this stream's tree
        key = known.conv
        if key not in self.conv_code:
            self.conv_code[key] = len(self.conv_keys)
            self.conv_keys.append(key)
        if self.conv[s] < 0:
            self.count += 1
        self.conv[s] = self.conv_code[key]
        self.position[s] = known.position
        self.real_child[s] = 1 if known.has_real_child else 0

    def update(self, other: dict) -> None:
        for uuid, known in other.items():
            self[uuid] = known

    def __bool__(self) -> bool:
        return self.count > 0

    def __len__(self) -> int:
        return self.count


class _KnownView:
    """A placed entry's memory in the table, read and written through (claude_code_placer.Known's fields)."""

    __slots__ = ("table", "slot")

    def __init__(self, table: KnownTable, slot: int):
        self.table = table
        self.slot = slot

    @property
    def conv(self) -> str:
        return self.table.conv_keys[self.table.conv[self.slot]]

    @property
    def position(self) -> int:
        return self.table.position[self.slot]

    @property
    def has_real_child(self) -> bool:
        return bool(self.table.real_child[self.slot])

    @has_real_child.setter
    def has_real_child(self, value: bool) -> None:
        self.table.real_child[self.slot] = 1 if value else 0


class Trail:
    """(sequence number, conversation, position) of each entry placed outside a sidechain, in
    runs of increasing sequence numbers (placement goes through the file's parts in order).
    Nothing of it is kept until a subagent asks (`before`): only a stream with inline
    sidechains needs it, and those are placed after all the rest."""

    def __init__(self):
        self.runs: list[tuple[array, array, array]] = []
        self.keys: list[str] = []
        self.code: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self.runs)

    def append(self, seq: int, key: str, position: int) -> None:
        if key not in self.code:
            self.code[key] = len(self.keys)
            self.keys.append(key)
        if not self.runs or self.runs[-1][0][-1] >= seq:
            self.runs.append((array("i"), array("h"), array("i")))
        seqs, convs, positions = self.runs[-1]
        seqs.append(seq)
        convs.append(self.code[key])
        positions.append(position)

    def before(self, seq: int) -> tuple[str, int] | None:
        """Where the entry placed with the greatest sequence number below `seq` went."""
        best = None
        for seqs, convs, positions in self.runs:
            i = bisect.bisect_left(seqs, seq)
            if i and (best is None or seqs[i - 1] > best[0]):
                best = (seqs[i - 1], self.keys[convs[i - 1]], positions[i - 1])
        return (best[1], best[2]) if best else None
