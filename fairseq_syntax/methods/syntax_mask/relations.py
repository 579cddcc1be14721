"""The nine tree relations of McDonald & Chiang (2021), section 2: the masks ``M^m`` of their attention bias, as one
relation id per (query, key) pair. The nine relations partition all pairs, so ``M^m[i, j] = 1`` exactly when
``m = rel(i, j)`` and the bias ``-exp(sum_m s^m M^m)`` is ``-exp(s[rel(i, j)])`` (definitions of ``rel`` in
:func:`relation_ids`).

Shapes: ``parents`` ``B x T`` (the batch convention of :mod:`fairseq_syntax.core.structure`) -> relation ids
``B x T x T`` (int64), ``PAD_RELATION`` where the query or the key is padding.
"""
import torch

from fairseq_syntax.core.structure import PAD, ancestor_or_self, validate_parents

# Relation of query position i to key position j.
SELF, PARENT, CHILD, LEFT_SIB, RIGHT_SIB, ANC, DESC, LEFT_OTHER, RIGHT_OTHER = range(9)
NUM_RELATIONS = 9
RELATION_NAMES = (
    "self", "parent", "child", "left-sib", "right-sib", "anc", "desc", "left-other", "right-other"
)
PAD_RELATION = NUM_RELATIONS  # i or j is padding


def relation_ids(parents: torch.Tensor, collated: bool = False) -> torch.LongTensor:
    """``B x T x T``: the McDonald & Chiang relation of query i to key j.

    ``SELF`` i == j; ``PARENT`` i is the parent of j; ``CHILD`` i is a child of j; ``LEFT_SIB`` / ``RIGHT_SIB``
    same parent and i < j / i > j; ``ANC`` / ``DESC`` i is an ancestor / descendant of j but not its parent /
    child; ``LEFT_OTHER`` / ``RIGHT_OTHER`` none of these and i < j / i > j; ``PAD_RELATION`` if i or j is
    padding. Different roots (a tree and the EOS) are not siblings: they are "other". ``collated``: the batch
    comes from :func:`~fairseq_syntax.core.structure.collate_parents`, which checked it (see
    :func:`~fairseq_syntax.core.structure.validate_parents`).
    """
    parents = validate_parents(parents, collated)
    batch, length = parents.shape
    positions = torch.arange(length, device=parents.device)
    left_of = positions.view(-1, 1) < positions.view(1, -1)
    dom = ancestor_or_self(parents, collated=True)
    parent_of = parents.unsqueeze(1) == positions.view(1, -1, 1)  # [b, i, j]: parents[b, j] == i
    sibling = (parents.unsqueeze(2) == parents.unsqueeze(1)) & (parents >= 0).unsqueeze(2)
    valid = parents != PAD

    relations = torch.where(left_of, LEFT_OTHER, RIGHT_OTHER).repeat(batch, 1, 1)
    # Later fills take precedence: parent/child refine anc/desc, and self overrides the diagonal of dom/sibling.
    relations.masked_fill_(sibling & left_of, LEFT_SIB)
    relations.masked_fill_(sibling & ~left_of, RIGHT_SIB)
    relations.masked_fill_(dom, ANC)
    relations.masked_fill_(dom.transpose(1, 2), DESC)
    relations.masked_fill_(parent_of, PARENT)
    relations.masked_fill_(parent_of.transpose(1, 2), CHILD)
    relations.masked_fill_(torch.eye(length, dtype=torch.bool, device=parents.device), SELF)
    relations.masked_fill_(~(valid.unsqueeze(2) & valid.unsqueeze(1)), PAD_RELATION)
    return relations
