"""A row's draft plans merged into one token tree, flattened for a single tree-attention pass,
and verified from the root with multi-candidate speculative sampling.

Every :class:`~structgen.decoding.drafts.Plan` of a row starts at the row's current point, so
their chains merge into a trie: a node is a point of the constraint (its mask comes from the
plans, which walked there), an edge a draft token with the forced tokens fast-forward appends
after it.  Verification at a node with target distribution p′ tries its children in order:
child ``d`` with draft distribution ``q`` (one-hot for deterministic sources) is accepted with
probability min(1, r(d)/q(d)), where r starts as p′ and after each rejection becomes
norm(max(0, r − q)); when every child is rejected the token is drawn from r.  Each test is a
standard speculative step whose target is the previous residual, so the token leaving a node
is distributed exactly as p′ — which children exist may depend on anything drawn before.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = ["Edge", "Node", "DraftTree"]


@dataclass
class Edge:
    token: int
    source: str
    q: torch.Tensor | None          # draft distribution; None: one-hot on ``token``
    after: list[int]                # forced tokens riding on this edge
    child: "Node"
    first: int = -1                 # block index of ``token`` (set by DraftTree.flatten)


@dataclass
class Node:
    mask: torch.Tensor | None       # the constraint's mask row here (None: unconstrained)
    edges: list[Edge] = field(default_factory=list)
    pos: int = -1                   # block position whose logits predict this node's next token (-1: the tail's last)
    ends: bool = False              # reached through EOS: nothing follows


class DraftTree:
    """The trie of one row's plans (see the module docstring)."""

    def __init__(self, plans, eos_ids):
        eos = set(int(e) for e in eos_ids)
        first = plans[0]
        self.root = Node(self._mask(first, first.slots[0]))
        for plan in plans:
            node = self.root
            for slot in plan.slots:
                if node.mask is None and slot.mask is not None:
                    node.mask = plan.bitmask[slot.mask]
                if slot.token is None:
                    break
                edge = next((e for e in node.edges if e.token == slot.token), None)
                if edge is None:
                    child = Node(None, ends=slot.token in eos)
                    edge = Edge(slot.token, slot.source, slot.q, list(slot.after), child)
                    node.edges.append(edge)
                node = edge.child

    @staticmethod
    def _mask(plan, slot):
        return None if slot.mask is None else plan.bitmask[slot.mask]

    def nodes(self):
        """Every node, preorder (the root first)."""
        out, stack = [], [self.root]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(e.child for e in reversed(n.edges))
        return out

    def edges(self):
        return [e for n in self.nodes() for e in n.edges]

    def flatten(self) -> tuple[list[int], list[int]]:
        """``(tokens, parents)`` of the tree's block, preorder: ``parents[k]`` is the block index
        of token ``k``'s predecessor (-1: the tail's last token).  Sets every node's ``pos``."""
        tokens, parents = [], []
        self.root.pos = -1
        stack = [(e, -1) for e in reversed(self.root.edges)]
        while stack:
            e, prev = stack.pop()
            e.first = len(tokens)
            for t in [e.token] + e.after:
                tokens.append(t)
                parents.append(prev)
                prev = len(tokens) - 1
            e.child.pos = prev
            stack.extend((x, prev) for x in reversed(e.child.edges))
        return tokens, parents

    def depth(self) -> int:
        """Edges on the longest root-to-leaf path."""
        best, stack = 0, [(self.root, 0)]
        while stack:
            n, d = stack.pop()
            best = max(best, d)
            stack.extend((e.child, d + 1) for e in n.edges)
        return best
