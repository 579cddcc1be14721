"""Link queries and keys from one ``C -> 2C`` projection equal the old two layers'; old checkpoints load."""
import argparse

import pytest
import torch
from torch import nn

import fairseq_syntax.methods.tree_transformer.model as tree_transformer
from fairseq_syntax.core.model import tiny_architecture
from fairseq_syntax.methods.tree_transformer.attention import (
    ConstituentAttention,
    constituent_prior,
    hierarchical_links,
    link_masks,
    neighbour_link_probabilities,
)
from conftest import WordTask, assert_upgrade_keeps_a_new_state_dict, load_old_state_dict

torch.set_num_threads(1)


class TwoLinkProjections(ConstituentAttention):
    """Constituent attention as it was: ``link_query`` and ``link_key``, two ``C -> C`` layers applied to ``x``."""

    def __init__(self, merged: ConstituentAttention):
        super().__init__(merged.embed_dim, merged.num_heads, merged.dropout, diagonal=merged.diagonal)
        self.load_state_dict({k: v for k, v in merged.state_dict().items() if not k.startswith("link_proj.")},
                             strict=False)
        del self.link_proj
        dim = merged.embed_dim
        self.two = nn.ModuleDict({"query": nn.Linear(dim, dim), "key": nn.Linear(dim, dim)})
        with torch.no_grad():  # the halves of the merged layer, queries first
            for index, name in enumerate(("query", "key")):
                self.two[name].weight.copy_(merged.link_proj.weight[index * dim:(index + 1) * dim])
                self.two[name].bias.copy_(merged.link_proj.bias[index * dim:(index + 1) * dim])

    def links_and_prior(self, x, key_padding_mask, previous, masks=None):
        length, batch, _ = x.shape
        token_mask = None if key_padding_mask is None else ~key_padding_mask
        masks = masks or link_masks(token_mask, batch, length, x.device)
        batch_major = x.transpose(0, 1)
        a_hat = neighbour_link_probabilities(self.two["query"](batch_major), self.two["key"](batch_major), None,
                                             self.link_scale, masks)
        links = hierarchical_links(a_hat, previous)
        return links, constituent_prior(links, None, self.diagonal, masks)


def _padded_input():
    torch.manual_seed(3)
    x = torch.randn(6, 2, 8)  # T x B x C
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    previous = torch.rand(2, 5).masked_fill(torch.tensor([[False] * 5, [False] * 3 + [True] * 2]), 0.0)
    return x, padding, previous


@pytest.mark.parametrize("diagonal", [1.0, 0.0])
def test_merged_projection_gives_the_two_projections_links_prior_and_output(diagonal):
    torch.manual_seed(0)
    merged = ConstituentAttention(8, 2, diagonal=diagonal).eval()
    with torch.no_grad():
        merged.link_proj.bias.normal_()  # nn.Linear's biases are small; make the key half's matter too
    old = TwoLinkProjections(merged).eval()
    x, padding, previous = _padded_input()
    want_links, want_prior = old.links_and_prior(x, padding, previous)
    got_links, got_prior = merged.links_and_prior(x, padding, previous)
    assert torch.allclose(got_links, want_links, rtol=0, atol=1e-6)
    assert torch.allclose(got_prior, want_prior, rtol=0, atol=1e-6)
    assert (want_links[0] > 0).all() and (want_links[0] < 1).all()  # links of their own, not 0 or 1 everywhere
    want_out, want_weights, want_carry = old(x, padding, {}, need_weights=True, carry=previous)
    got_out, got_weights, got_carry = merged(x, padding, {}, need_weights=True, carry=previous)
    assert torch.allclose(got_out, want_out, rtol=0, atol=1e-6)
    assert torch.allclose(got_weights, want_weights, rtol=0, atol=1e-6)
    assert torch.allclose(got_carry, want_carry, rtol=0, atol=1e-6)


def test_merged_projection_gradient_is_the_two_projections_gradients_stacked():
    torch.manual_seed(1)
    merged = ConstituentAttention(8, 2)
    old = TwoLinkProjections(merged)
    x, padding, previous = _padded_input()
    upstream = torch.randn(6, 2, 8)
    for module in (merged, old):
        out, _, links = module(x, padding, {}, carry=previous)
        ((out * upstream).sum() + links.sum()).backward()
    want = torch.cat([old.two["query"].weight.grad, old.two["key"].weight.grad])
    assert want.abs().max() > 1e-3
    assert torch.allclose(merged.link_proj.weight.grad, want, rtol=0, atol=1e-6)
    want_bias = torch.cat([old.two["query"].bias.grad, old.two["key"].bias.grad])
    assert torch.allclose(merged.link_proj.bias.grad, want_bias, rtol=0, atol=1e-6)


def test_link_query_and_key_are_the_halves_of_the_merged_projection():
    attention = ConstituentAttention(8, 2)
    x = torch.randn(1, 5, 8)
    projected = attention.link_proj(x)
    # equal up to float32 rounding: a C x C product may sum in another order than the C x 2C one
    assert torch.allclose(attention.link_query(x), projected[..., :8], rtol=0, atol=1e-6)
    assert torch.allclose(attention.link_key(x), projected[..., 8:], rtol=0, atol=1e-6)
    with torch.no_grad():
        attention.link_key.weight.data.mul_(2.0)  # views: writing a half writes the merged layer
    assert torch.allclose(attention.link_proj(x)[..., 8:] - attention.link_proj.bias[8:],
                          2 * (projected[..., 8:] - attention.link_proj.bias[8:]), atol=1e-6)


# --- old checkpoints
def _translation(seed: int) -> torch.nn.Module:
    args = argparse.Namespace()
    tiny_architecture(args)
    torch.manual_seed(seed)
    return tree_transformer.ConstituentTransformerModel.build_model(args, WordTask()).eval()


def _lm(seed: int) -> torch.nn.Module:
    args = argparse.Namespace(encoder_layers=3)
    tree_transformer.tree_transformer_lm_tiny_architecture(args)
    torch.manual_seed(seed)
    return tree_transformer.TreeTransformerLMModel.build_model(args, WordTask()).eval()


def old_state_dict(state_dict: dict) -> dict:
    """``state_dict`` as the two-layer version wrote it: ``link_proj.*`` split into ``link_query.*``, ``link_key.*``."""
    old = {}
    for name, value in state_dict.items():
        if ".link_proj." not in name:
            old[name] = value.clone()
            continue
        query, key = value.clone().chunk(2, dim=0)
        old[name.replace(".link_proj.", ".link_query.")] = query
        old[name.replace(".link_proj.", ".link_key.")] = key
    return old


TOKENS = torch.tensor([[0, 4, 5, 6, 7, 2], [0, 9, 8, 2, 1, 1]])  # 1 = padding


@pytest.mark.parametrize("build", [_translation, _lm], ids=["transformer_constituent", "tree_transformer_lm"])
def test_old_state_dict_loads_through_the_models_upgrade_and_gives_the_same_output(build):
    trained = build(seed=0)
    old = old_state_dict(trained.state_dict())
    layers = sum(isinstance(m, ConstituentAttention) for m in trained.modules())
    assert layers >= 2 and sum(".link_query." in name for name in old) == 2 * layers  # weight and bias each
    assert not any(".link_proj." in name for name in old)
    loaded = build(seed=1)  # other weights, so only the loading can make the outputs equal
    load_old_state_dict(trained, loaded, old, "link_proj")
    links = tree_transformer.tree_encoder(loaded).link_probabilities(TOKENS)
    assert torch.equal(links, tree_transformer.tree_encoder(trained).link_probabilities(TOKENS))
    if build is _translation:
        args = (TOKENS, torch.tensor([6, 4]), TOKENS)
    else:
        args = (TOKENS,)
    assert torch.equal(loaded(*args)[0], trained(*args)[0])


def test_upgrade_leaves_a_new_state_dict_as_it_is():
    assert_upgrade_keeps_a_new_state_dict(_translation(seed=0))
