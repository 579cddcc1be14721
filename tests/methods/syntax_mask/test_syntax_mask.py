"""transformer_syntax_mask (McDonald & Chiang 2021, section 2): bias, zero-init equivalence, gradients, options."""
import argparse

import numpy as np
import pytest
import torch
from conftest import tiny_encoder_parts
from fairseq.models.transformer import TransformerEncoderBase

from fairseq_syntax.core import structure
from fairseq_syntax.methods.syntax_mask import relations
from fairseq_syntax.methods.syntax_mask.attention import (
    MAX_LOG_PENALTY,
    RelationMaskAttention,
)
from fairseq_syntax.methods.syntax_mask.model import (
    SyntaxMaskEncoder,
    SyntaxMaskOptions,
    SyntaxMaskTransformerModel,
)

# (S (NP He) (VP is)) in preorder: (S=0 (NP=1 He=2 (VP=3 is=4 ; EOS=5 is its own root
PARENTS = [-1, 0, 1, 0, 3]


def make_encoders(options=SyntaxMaskOptions(), layers=2):
    cfg, d, embed = tiny_encoder_parts(["(S", "(NP", "He", "(VP", "is"], layers)
    syntax = SyntaxMaskEncoder(cfg, options, d, embed).eval()
    plain = TransformerEncoderBase(cfg, d, embed).eval()
    missing, unexpected = plain.load_state_dict(syntax.state_dict(), strict=False)
    assert not missing and all("strengths" in k for k in unexpected)
    tokens = torch.tensor([[4, 5, 6, 7, 8, d.eos()], [d.pad(), d.pad(), 4, 6, 8, d.eos()]])
    parents = structure.collate_parents([PARENTS, [-1, 0, 0]], left_pad=True)
    return syntax, plain, tokens, parents


def test_bias_is_minus_exp_strength_of_each_pairs_relation():
    strengths = torch.nn.Parameter(torch.arange(18, dtype=torch.float).view(2, 9) / 10)
    attn = RelationMaskAttention(8, 2, strengths)
    rel = relations.relation_ids(structure.collate_parents([PARENTS]))
    bias = attn.score_bias({"relations": rel})
    assert bias.shape == (1, 2, 6, 6)
    # hand-derived relations of query (S)=0: self, parent of (NP and (VP, ancestor of He and is, other to EOS
    expected_rel_row0 = [relations.SELF, relations.PARENT, relations.ANC, relations.PARENT, relations.ANC,
                         relations.LEFT_OTHER]
    assert rel[0, 0].tolist() == expected_rel_row0
    for h in range(2):
        for j, r in enumerate(expected_rel_row0):
            assert bias[0, h, 0, j].item() == pytest.approx(-torch.exp(strengths[h, r]).item())


def test_relations_outside_the_subset_keep_strength_zero():
    strengths = torch.nn.Parameter(torch.full((2, 9), 2.0))
    attn = RelationMaskAttention(8, 2, strengths, relations=[relations.PARENT])
    rel = relations.relation_ids(structure.collate_parents([PARENTS]))
    bias = attn.score_bias({"relations": rel})
    assert bias[0, 0, 0, 1].item() == pytest.approx(-torch.exp(torch.tensor(2.0)).item())  # parent
    assert bias[0, 0, 0, 0].item() == pytest.approx(-1.0)  # self: exp(0)


def test_zero_strengths_equal_the_plain_transformer():
    syntax, plain, tokens, parents = make_encoders()
    out = syntax(tokens, src_parents=parents)["encoder_out"][0]
    ref = plain(tokens)["encoder_out"][0]
    mask = tokens.ne(1).t().unsqueeze(-1)  # compare real tokens only
    torch.testing.assert_close(out * mask, ref * mask, atol=1e-5, rtol=1e-5)


def test_nonzero_strengths_change_the_output_and_gradients_reach_them():
    syntax, plain, tokens, parents = make_encoders()
    syntax.train()
    out = syntax(tokens, src_parents=parents)["encoder_out"][0]
    out.pow(2).sum().backward()
    grads = [layer.self_attn.strengths.grad for layer in syntax.layers]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)
    with torch.no_grad():
        syntax.layers[0].self_attn.strengths[:, relations.SELF] = 3.0
    syntax.eval()
    changed = syntax(tokens, src_parents=parents)["encoder_out"][0]
    assert not torch.allclose(changed, plain(tokens)["encoder_out"][0], atol=1e-4)


@pytest.mark.parametrize("value", [1e4, -1e4, 80.0, -80.0])
def test_extreme_strengths_stay_finite(value):
    syntax, _, tokens, parents = make_encoders()
    syntax.train()
    for layer in syntax.layers:
        with torch.no_grad():
            layer.self_attn.strengths.fill_(value)
    out = syntax(tokens, src_parents=parents)["encoder_out"][0]
    out.sum().backward()
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(layer.self_attn.strengths.grad).all() for layer in syntax.layers)
    # the explicit-softmax path (used for plotting) agrees with the fused kernel
    syntax.eval()
    with torch.no_grad():
        fused = syntax(tokens, src_parents=parents)["encoder_out"][0]
        explicit = syntax(tokens, src_parents=parents, return_attention=True)
    torch.testing.assert_close(fused, explicit["encoder_out"][0], atol=1e-5, rtol=1e-4)
    assert all(torch.isfinite(w).all() for w in explicit["encoder_attention"])


def test_penalty_is_capped():
    attn = RelationMaskAttention(8, 2, torch.nn.Parameter(torch.full((2, 9), 50.0)))
    assert attn.penalty_table().max().item() == pytest.approx(torch.exp(torch.tensor(MAX_LOG_PENALTY)).item())


def test_layer_selection_sharing_and_freezing():
    syntax, *_ = make_encoders(SyntaxMaskOptions(mask_layers="1"), layers=3)
    kinds = [type(layer.self_attn).__name__ for layer in syntax.layers]
    assert kinds == ["StructuredSelfAttention", "RelationMaskAttention", "StructuredSelfAttention"]
    shared, *_ = make_encoders(SyntaxMaskOptions(share_mask_strengths=True), layers=3)
    assert shared.layers[0].self_attn.strengths is shared.layers[2].self_attn.strengths
    assert shared.mask_strengths().shape == (3, 2, 9)
    frozen, *_ = make_encoders(SyntaxMaskOptions(freeze_mask_strengths=True))
    assert not any(layer.self_attn.strengths.requires_grad for layer in frozen.layers)
    with pytest.raises(ValueError, match="do not exist"):
        make_encoders(SyntaxMaskOptions(mask_layers="0,5"))
    with pytest.raises(ValueError, match="unknown relations"):
        make_encoders(SyntaxMaskOptions(mask_relations="parent,cousin"))


def test_model_registers_options_as_flags():
    parser = argparse.ArgumentParser()
    SyntaxMaskTransformerModel.add_args(parser)
    args = parser.parse_args(["--mask-layers", "0", "--share-mask-strengths"])
    options = SyntaxMaskTransformerModel.options_from_args(args)
    assert options.mask_layers == "0" and options.share_mask_strengths and options.mask_relations == "all"


def test_analysis_strengths_ranges_and_sentence_masks():
    from fairseq_syntax.core import trees
    from fairseq_syntax.methods.syntax_mask.analysis import (
        mask_strengths,
        sentence_masks,
        strength_ranges,
    )

    syntax, *_ = make_encoders()
    with torch.no_grad():
        syntax.layers[1].self_attn.strengths[1] = torch.arange(9, dtype=torch.float) / 4  # head 2 of layer 1
    strengths = mask_strengths(syntax)
    assert strengths.shape == (2, 2, 9)
    row = strength_ranges(strengths)[3]  # layer 1, head 2
    assert (row["layer"], row["head"], row["min"], row["max"], row["range"]) == (1, 1, 0.0, 2.0, 2.0)
    masks, tokens = sentence_masks(syntax, trees.parse_tree("(S (NP He) (VP is))"), layer=1)
    assert tokens == ["(S", "(NP", "He", "(VP", "is"]
    # head 2: query (S to key He is ANC (id 5): -exp(5/4); head 1 keeps strength 0: -1 everywhere
    assert masks[1, 0, 2] == pytest.approx(-np.exp(5 / 4), rel=1e-6)
    assert np.allclose(masks[0], -1.0)


def test_weights_by_hand_with_zero_queries_and_keys():
    # (S a b) without EOS; q = k = 0, so only the bias moves the softmax
    strengths = torch.zeros(1, 9)
    strengths[0, relations.PARENT] = np.log(3.0)
    attn = RelationMaskAttention(4, 1, torch.nn.Parameter(strengths)).eval()
    for projection in (attn.q_proj, attn.k_proj):
        torch.nn.init.zeros_(projection.weight)
        torch.nn.init.zeros_(projection.bias)
    rel = relations.relation_ids(structure.collate_parents([[-1, 0, 0]], append_eos=False))
    _, weights, _ = attn(torch.randn(3, 1, 4), None, {"relations": rel}, need_weights=True)
    assert weights[0, 0, 0].tolist() == pytest.approx([0.7870, 0.1065, 0.1065], abs=1e-4)
    # row a: child of (S (-1), self (-1), left-sib of b (-1): uniform
    assert weights[0, 0, 1].tolist() == pytest.approx([1 / 3] * 3, abs=1e-6)


def test_one_hot_bias_equals_the_gathered_one_in_values_and_gradients():
    # the two computations of -exp(s[h, rel_ij]) (--mask-bias gather / one_hot), on a left-padded batch
    outputs, gradients = [], []
    for mask_bias in ("gather", "one_hot"):
        syntax, _, tokens, parents = make_encoders(SyntaxMaskOptions(mask_bias=mask_bias))
        with torch.no_grad():
            for layer in syntax.layers:
                layer.self_attn.strengths.copy_(torch.linspace(-1.0, 2.0, 18).view(2, 9))
        out = syntax(tokens, src_parents=parents)["encoder_out"][0]
        out.pow(2).sum().backward()
        outputs.append(out.detach())
        gradients.append(torch.stack([layer.self_attn.strengths.grad for layer in syntax.layers]))
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(gradients[1], gradients[0], rtol=1e-6, atol=1e-6)
    assert gradients[0].abs().sum() > 0


def test_the_default_mask_bias_is_the_one_hot_product_on_cuda_only():
    from fairseq_syntax.methods.syntax_mask.model import uses_one_hot

    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    assert SyntaxMaskOptions().mask_bias == "auto"
    assert [uses_one_hot("auto", cpu), uses_one_hot("auto", cuda)] == [False, True]
    assert [uses_one_hot("gather", cuda), uses_one_hot("one_hot", cpu)] == [False, True]
    syntax, _, tokens, parents = make_encoders(SyntaxMaskOptions())  # auto, on the CPU: the gather
    assert "relation_one_hot" not in syntax.build_structure(tokens, {"src_parents": parents})
    syntax, _, tokens, parents = make_encoders(SyntaxMaskOptions(mask_bias="one_hot"))
    assert syntax.build_structure(tokens, {"src_parents": parents})["relation_one_hot"].shape[-1] == 10
