"""Lexical constraints as automata: which target phrases a hypothesis has produced so far.

A sentence's constraints are target phrases, each a run of piece ids that its translation must
contain (Hokamp & Liu, 2017; Post & Vilar, 2018; Hu et al., 2019). :class:`Constraints` reads
a hypothesis one token at a time and tracks, as a small hashable state:

- unordered (the default): an Aho-Corasick automaton over the phrases (the longest suffix of
  the output that begins some phrase) and the set of phrases met, so every occurrence of
  every phrase is seen, overlapping ones and phrases inside others included;
- ordered (fairseq's ``--constraints ordered``): the next phrase due and how much of it the
  output's suffix matches (its KMP state); a phrase counts only after the one before it.

With ``boundaries`` (the target pieces that begin a new word: "▁dog", ".", but not "s"), a
phrase counts only where a word ends after it, so "dog" is not met by "dogs": a virtual
boundary symbol is read before every boundary piece and before EOS, and each phrase holds it
where it does (before each of its words but the first, and at its end).

``progress`` is the number of constraint tokens met (whole phrases met, plus the matched
prefix of an unmet one): the bank of dynamic beam allocation. ``wanted`` are the tokens that
raise it, the candidates the search adds for each hypothesis (where a word ending would
raise it, :meth:`Constraints.awaits_boundary`, the search adds the best boundary piece).
Transitions are memoised per sentence, so a search step costs a few dictionary lookups per
candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

State = tuple[int, int]  # unordered: (node, phrases met as a bit mask); ordered: (phrase, node)
BOUNDARY = -1  # the virtual symbol read where a word ends


@dataclass
class _Trie:
    """An Aho-Corasick automaton over ``phrases``: node 0 is the root (the empty prefix)."""

    phrases: Sequence[tuple[int, ...]]
    children: list[dict[int, int]] = field(default_factory=lambda: [{}])
    depth: list[int] = field(default_factory=lambda: [0])
    fail: list[int] = field(default_factory=lambda: [0])
    ends: list[int] = field(default_factory=lambda: [0])  # phrases ending here (or at a suffix)
    prefix_of: list[int] = field(default_factory=lambda: [0])  # phrases this node begins

    def __post_init__(self) -> None:
        for index, phrase in enumerate(self.phrases):
            node = 0
            self.prefix_of[0] |= 1 << index
            for token in phrase:
                if token not in self.children[node]:
                    self.children[node][token] = len(self.children)
                    self.children.append({})
                    self.depth.append(self.depth[node] + 1)
                    self.fail.append(0)
                    self.ends.append(0)
                    self.prefix_of.append(0)
                node = self.children[node][token]
                self.prefix_of[node] |= 1 << index
            self.ends[node] |= 1 << index
        order = list(self.children[0].values())  # breadth first: a node's fail link is shallower
        while order:
            node = order.pop(0)
            for token, child in self.children[node].items():
                self.fail[child] = self.goto(self.fail[node], token) if node else 0
                self.ends[child] |= self.ends[self.fail[child]]
                order.append(child)

    def goto(self, node: int, token: int) -> int:
        """The node after reading ``token`` at ``node``."""
        while node and token not in self.children[node]:
            node = self.fail[node]
        return self.children[node].get(token, 0)

    def chain(self, node: int) -> list[int]:
        """``node`` and its fail links down to the root: every phrase prefix the output ends in."""
        found = [node]
        while node:
            node = self.fail[node]
            found.append(node)
        return found


class Constraints:
    """One sentence's constraints: ``phrases`` (piece ids each; empty ones are dropped; a
    phrase given twice is met by one occurrence unless ``ordered``), ``ordered`` or not;
    ``boundaries`` (None: phrases are bare token runs) the pieces before which a word ends."""

    def __init__(
        self,
        phrases: Sequence[Sequence[int]],
        ordered: bool = False,
        boundaries: frozenset[int] | None = None,
    ) -> None:
        kept = [tuple(p) for p in phrases if len(p)]
        if not ordered:  # a phrase given twice is met once
            kept = list(dict.fromkeys(kept))
        self.pieces = sum(len(p) for p in kept)  # target pieces the phrases need
        if boundaries is not None:  # as read: a boundary before each word a phrase holds
            kept = [
                (
                    p[0],
                    *(x for t in p[1:] for x in ((BOUNDARY, t) if t in boundaries else (t,))),
                    BOUNDARY,
                )
                for p in kept
            ]
        self.boundaries = boundaries
        self.phrases = kept
        self.ordered = ordered
        self.total = sum(len(p) for p in kept)  # progress once every phrase is met
        self.tries = [_Trie([p]) for p in kept] if ordered else [_Trie(kept)]
        self.start: State = (0, 0)
        self.all_met = (1 << len(kept)) - 1
        self._next: dict[tuple[State, int], State] = {}
        self._progress: dict[State, int] = {}
        self._wanted: dict[State, list[int]] = {}

    def __len__(self) -> int:
        return len(self.phrases)

    def done(self, state: State) -> bool:
        """Every phrase met (in order, when ordered)."""
        if self.ordered:
            return state[0] == len(self.phrases)
        return state[1] == self.all_met

    def finishes(self, state: State) -> bool:
        """Whether EOS may come now: every phrase met once the last word ends."""
        return self.done(self._read(state, BOUNDARY) if self.boundaries is not None else state)

    def advance(self, state: State, token: int) -> State:
        """The state after the output gains ``token``."""
        key = (state, token)
        found = self._next.get(key)
        if found is None:
            if self.boundaries is not None and token in self.boundaries:
                state = self._read(state, BOUNDARY)
            found = self._read(state, token)
            self._next[key] = found
        return found

    def _read(self, state: State, symbol: int) -> State:
        return self._ordered_step(state, symbol) if self.ordered else self._step(state, symbol)

    def _step(self, state: State, token: int) -> State:
        trie = self.tries[0]
        node = trie.goto(state[0], token)
        return node, state[1] | trie.ends[node]

    def _ordered_step(self, state: State, token: int) -> State:
        phrase, node = state
        if phrase == len(self.phrases):
            return state
        trie = self.tries[phrase]
        node = trie.goto(node, token)
        if trie.ends[node]:
            return phrase + 1, 0
        return phrase, node

    def progress(self, state: State) -> int:
        """Constraint tokens met: whole phrases met plus the matched start of an unmet one."""
        found = self._progress.get(state)
        if found is None:
            found = self._measure(state)
            self._progress[state] = found
        return found

    def _measure(self, state: State) -> int:
        if self.ordered:
            phrase, node = state
            whole = sum(len(p) for p in self.phrases[:phrase])
            return whole + (self.tries[phrase].depth[node] if phrase < len(self.phrases) else 0)
        node, met = state
        trie = self.tries[0]
        whole = sum(len(p) for i, p in enumerate(self.phrases) if met >> i & 1)
        partial = next((trie.depth[n] for n in trie.chain(node) if trie.prefix_of[n] & ~met), 0)
        return whole + partial

    def wanted(self, state: State) -> list[int]:
        """The tokens that raise :meth:`progress` from ``state``, ascending."""
        found = self._wanted.get(state)
        if found is None:
            now = self.progress(state)
            found = sorted(
                t for t in self._followers(state) if self.progress(self.advance(state, t)) > now
            )
            self._wanted[state] = found
        return found

    def _followers(self, state: State) -> set[int]:
        """Tokens that continue some phrase prefix the output ends in, now or once a word
        ends (a superset of wanted)."""
        found = self._continuing(state)
        if self.boundaries is not None:
            found |= self._continuing(self._read(state, BOUNDARY))
        return found - {BOUNDARY}

    def _continuing(self, state: State) -> set[int]:
        """The symbols that continue some phrase prefix the output ends in."""
        if self.ordered:
            phrase, node = state
            if phrase == len(self.phrases):
                return set()
            trie = self.tries[phrase]
        else:
            trie, node = self.tries[0], state[0]
        return {t for n in trie.chain(node) for t in trie.children[n]}

    def awaits_boundary(self, state: State) -> bool:
        """Whether a word ending now (before any boundary piece, which :meth:`wanted` does not
        list one by one) would raise :meth:`progress`."""
        if self.boundaries is None:
            return False
        return self.progress(self._read(state, BOUNDARY)) > self.progress(state)

    def met_by(self, tokens: Sequence[int]) -> bool:
        """Whether a whole output ``tokens`` (EOS not included) meets every constraint."""
        state = self.start
        for token in tokens:
            state = self.advance(state, token)
        return self.finishes(state)
