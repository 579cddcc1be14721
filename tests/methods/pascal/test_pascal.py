"""PASCAL (Bugliarello & Okazaki 2020): parent positions, the Gaussian, the parent-scaled heads, by hand."""
import math

import pytest
import torch
from conftest import THE_CAT_SAT, one_word_batch

from fairseq_syntax.methods.pascal.attention import ParentScaledSelfAttention
from fairseq_syntax.methods.pascal.parents import parent_density, parent_positions

@pytest.mark.parametrize("pieces, length, left_pad, expected", [
    # the(0) cat(1) sat(2) EOS(3): the -> cat at 1, cat -> sat at 2, sat (root) -> itself, EOS -> itself
    ([1, 1, 1], 4, False, [1.0, 2.0, 2.0, 3.0]),
    # the(0) c@@(1) at(2) s@@(3) at(4) EOS(5), padding: "the" depends on cat = pieces 1, 2 -> 1.5; both pieces of
    # cat depend on sat = pieces 3, 4 -> 3.5; sat is the root: its own mean 3.5; EOS itself (5)
    ([1, 2, 2], 7, False, [1.5, 3.5, 3.5, 3.5, 3.5, 5.0]),
    # left padding moves the positions with the tokens: two padding positions, the(2) cat(3) sat(4) EOS(5)
    ([1, 1, 1], 6, True, [3.0, 4.0, 4.0, 5.0]),
])
def test_parent_positions_of_words_split_heads_root_and_eos(pieces, length, left_pad, expected):
    positions = parent_positions(*one_word_batch(THE_CAT_SAT, pieces, length, left_pad))[0]
    assert (positions[-len(expected):] if left_pad else positions[:len(expected)]).tolist() == expected


def test_gaussian_with_its_normalising_constant():
    density = parent_density(torch.tensor([[1.0, 2.0, 2.0, 3.0]]), sigma=1.0)
    c = 1 / math.sqrt(2 * math.pi)  # 0.3989
    # row of "the" (parent at 1): distances 1, 0, 1, 2
    assert density[0, 0].tolist() == pytest.approx([c * math.exp(-0.5), c, c * math.exp(-0.5), c * math.exp(-2)])
    assert density[0, 0].tolist() == pytest.approx([0.2420, 0.3989, 0.2420, 0.0540], abs=1e-4)
    wide = parent_density(torch.tensor([[1.0, 1.0]]), sigma=2.0)
    # at the parent itself (key 1): the peak 1 / sqrt(2 pi 4); one position away: e^(-1/8) of it
    assert wide[0, 0, 1].item() == pytest.approx(1 / math.sqrt(8 * math.pi))
    assert wide[0, 0, 0].item() == pytest.approx(math.exp(-1 / 8) / math.sqrt(8 * math.pi))


def test_the_last_heads_scale_each_sentences_scores_by_its_own_density_and_the_others_do_not():
    # the released code scales the wrong rows of a batch (see pascal/attention.py): sentence b's heads take sentence
    # b's density
    attention = ParentScaledSelfAttention(embed_dim=6, num_heads=3, pascal_heads=2).eval()
    q, k = torch.ones(2, 3, 2, 2), torch.ones(2, 3, 2, 2)  # every plain score 2 / sqrt(2) = sqrt(2)
    density = torch.tensor([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]])
    scores = attention.attention_scores(q, k, {"parent_density": density})
    s = math.sqrt(2)
    assert scores[:, 0].flatten().tolist() == pytest.approx([s] * 8)
    for head in (1, 2):
        assert scores[:, head].flatten().tolist() == pytest.approx([n * s for n in range(1, 9)])


def test_parent_ignoring_leaves_rows_unscaled_only_in_training():
    attention = ParentScaledSelfAttention(embed_dim=4, num_heads=2, pascal_heads=1, parent_ignoring=0.999999)
    q, k = torch.ones(1, 2, 3, 2), torch.ones(1, 2, 3, 2)
    density = torch.full((1, 3, 3), 0.5)
    plain = q @ k.transpose(-1, -2) / math.sqrt(2)
    attention.train()
    assert torch.allclose(attention.attention_scores(q, k, {"parent_density": density}), plain)  # every row ignored
    attention.eval()
    assert torch.allclose(attention.attention_scores(q, k, {"parent_density": density})[:, 1], plain[:, 1] * 0.5)


def test_bad_head_counts_are_refused():
    with pytest.raises(ValueError, match="--pascal-heads 3 must be between 1 and the layer's 2 heads"):
        ParentScaledSelfAttention(embed_dim=4, num_heads=2, pascal_heads=3)
