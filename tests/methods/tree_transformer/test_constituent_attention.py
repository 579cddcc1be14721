"""Constituent attention (Tree Transformer, eqs. 2-8) and the two models built on it."""
import argparse
import math

import pytest
import torch

import fairseq_syntax.methods.tree_transformer.model as tree_transformer
from fairseq_syntax.core.model import tiny_architecture
from fairseq_syntax.methods.tree_transformer.attention import (
    MIN_LINK,
    ConstituentAttention,
    constituent_prior,
    hierarchical_links,
    neighbour_link_probabilities,
)
from conftest import WordTask

torch.set_num_threads(1)


# --- prior (eqs. 3-4)
@pytest.mark.parametrize("links, diagonal, expected", [
    ([0.5, 0.25, 1.0], 1.0, [[1.0, 0.5, 0.125, 0.125], [0.5, 1.0, 0.25, 0.25], [0.125, 0.25, 1.0, 1.0],
                             [0.125, 0.25, 1.0, 1.0]]),
    ([0.5, 0.25], 0.0, [[0.0, 0.5, 0.125], [0.5, 0.0, 0.25], [0.125, 0.25, 0.0]]),  # every other product kept
])
def test_prior_is_the_product_of_the_links_between_two_words(links, diagonal, expected):
    prior = constituent_prior(torch.tensor([links]), diagonal=diagonal)[0]
    assert torch.allclose(prior, torch.tensor(expected), atol=1e-6)


def test_prior_of_a_zero_link_is_tiny_and_finite_with_finite_gradients():
    links = torch.tensor([[0.0, 0.5]], requires_grad=True)
    prior = constituent_prior(links)[0]
    prior.sum().backward()
    prior = prior.detach()
    assert prior[0, 1] <= MIN_LINK and prior[0, 2] <= MIN_LINK and float(prior[1, 2]) == pytest.approx(0.5)
    assert torch.isfinite(links.grad).all()


def test_prior_is_zero_at_padding_and_unchanged_for_the_real_words():
    links = torch.tensor([[0.5, 0.25, 0.0], [0.5, 0.25, 0.8]])  # sentence 0 has 3 words and one padding position
    token_mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    prior = constituent_prior(links, token_mask)
    assert torch.equal(prior[0, 3], torch.zeros(4)) and torch.equal(prior[0, :, 3], torch.zeros(4))
    assert torch.allclose(prior[0, :3, :3], constituent_prior(links[:1, :2])[0])


def test_prior_of_one_token_is_one():
    assert torch.equal(constituent_prior(torch.zeros(2, 0)), torch.ones(2, 1, 1))


# --- neighbours (eqs. 5-7)
def test_neighbour_links_from_hand_set_scores():
    # d = 1 and scale 1, so s_{i,j} = q_i k_j
    query = torch.tensor([[[5.0], [1.0], [-2.0]]])
    key = torch.tensor([[[0.0], [7.0], [math.log(3.0)]]])
    a_hat = neighbour_link_probabilities(query, key, None, scale=1.0)
    assert torch.allclose(a_hat, torch.tensor([[math.sqrt(0.25), math.sqrt(0.75)]]))


def test_neighbour_links_match_the_equations_in_a_loop():
    torch.manual_seed(0)
    query, key = torch.randn(1, 6, 4), torch.randn(1, 6, 4)
    scale = 2.0
    score = lambda i, j: float(query[0, i] @ key[0, j]) / scale  # noqa: E731

    def p(i, j):  # eq. 6: softmax over the existing neighbours of word i
        neighbours = [n for n in (i - 1, i + 1) if 0 <= n < 6]
        return math.exp(score(i, j)) / sum(math.exp(score(i, n)) for n in neighbours)

    expected = [math.sqrt(p(k, k + 1) * p(k + 1, k)) for k in range(5)]
    assert torch.allclose(neighbour_link_probabilities(query, key, None, scale)[0], torch.tensor(expected), atol=1e-6)


def test_neighbour_links_of_a_padded_sentence_equal_those_of_the_sentence_alone():
    torch.manual_seed(0)
    query, key = torch.randn(1, 4, 3), torch.randn(1, 4, 3)
    alone = neighbour_link_probabilities(query, key, None, 1.5)
    pad = torch.randn(1, 2, 3) * 100  # whatever padding positions hold must not matter
    for padded_q, padded_k, mask, real in (
        (torch.cat([query, pad], 1), torch.cat([key, pad], 1), torch.tensor([[1, 1, 1, 1, 0, 0]]).bool(), slice(0, 3)),
        (torch.cat([pad, query], 1), torch.cat([pad, key], 1), torch.tensor([[0, 0, 1, 1, 1, 1]]).bool(), slice(2, 5)),
    ):
        links = neighbour_link_probabilities(padded_q, padded_k, mask, 1.5)
        assert torch.allclose(links[:, real], alone, atol=1e-6)
        outside = torch.ones(5, dtype=torch.bool)
        outside[real] = False
        assert torch.equal(links[0, outside], torch.zeros(2))


def test_two_words_link_with_probability_one():
    query, key = torch.randn(1, 2, 3), torch.randn(1, 2, 3)
    assert torch.allclose(neighbour_link_probabilities(query, key, None, 1.0), torch.ones(1, 1))


# --- hierarchy (eq. 8)
def test_hierarchical_constraint_by_hand():
    assert hierarchical_links(torch.tensor([0.3]), None).tolist() == pytest.approx([0.3])
    assert hierarchical_links(torch.tensor([0.5, 0.0, 1.0]), torch.tensor([0.5, 0.4, 0.2])).tolist() == \
        pytest.approx([0.75, 0.4, 1.0])


def _tiny_lm(layers: int = 4) -> torch.nn.Module:
    args = argparse.Namespace(encoder_layers=layers)
    tree_transformer.tree_transformer_lm_tiny_architecture(args)
    torch.manual_seed(1)
    return tree_transformer.TreeTransformerLMModel.build_model(args, WordTask()).eval()


def test_links_grow_from_layer_to_layer_and_are_zero_at_padding():
    model = _tiny_lm(layers=4)
    tokens = torch.tensor([[0, 4, 5, 6, 7, 8, 2], [0, 9, 5, 2, 1, 1, 1]])  # 1 = padding
    links = tree_transformer.tree_encoder(model).link_probabilities(tokens)  # L x B x (T-1)
    assert links.shape == (4, 2, 6)
    assert (links[1:] >= links[:-1]).all() and (links[1:, 0] > links[:-1, 0]).all()
    assert ((links >= 0) & (links <= 1)).all()
    assert torch.equal(links[:, 1, 3:], torch.zeros(4, 3))
    # padding does not change the links of the shorter sentence
    alone = tree_transformer.tree_encoder(model).link_probabilities(tokens[1:, :4])
    assert torch.allclose(links[:, 1, :3], alone[:, 0], atol=1e-5)


def test_attention_is_the_prior_times_the_softmax_shared_by_all_heads():
    torch.manual_seed(0)
    attention = ConstituentAttention(embed_dim=8, num_heads=2).eval()
    x = torch.randn(5, 1, 8)  # T x B x C
    previous = torch.full((1, 4), 0.5)
    _, weights, passed_on = attention(x, None, {}, need_weights=True, carry=previous)
    links, prior = attention.links_and_prior(x, None, previous)
    assert torch.equal(passed_on, links)  # the next layer's a^{l-1}
    q = attention.q_proj(x[:, 0]).view(5, 2, 4).transpose(0, 1)
    k = attention.k_proj(x[:, 0]).view(5, 2, 4).transpose(0, 1)
    softmax = torch.softmax(q @ k.transpose(1, 2) / 2.0, dim=-1)  # sqrt(d_k) = 2
    assert torch.allclose(weights[0], prior[0] * softmax, atol=1e-6)
    assert (links >= previous).all()


def test_first_layer_without_carry_passes_on_its_own_neighbour_links():
    attention = ConstituentAttention(8, 2).eval()
    x = torch.randn(3, 1, 8)
    _, _, links = attention(x, None, {})
    batch_major = x.transpose(0, 1)
    a_hat = neighbour_link_probabilities(attention.link_query(batch_major), attention.link_key(batch_major),
                                         None, attention.link_scale)
    assert torch.equal(links, a_hat)  # eq. 8 with a^{-1} = 0


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


def test_gradients_stay_finite_when_links_saturate():
    model = _tiny_lm(layers=3).train()
    for module in model.modules():
        if isinstance(module, ConstituentAttention):
            module.link_query.weight.data.mul_(1000.0)  # scores in the thousands: p in {0, 1}, links 0 or 1
            module.link_key.weight.data.mul_(1000.0)
    tokens = torch.tensor([[0, 4, 5, 6, 7, 8, 9, 2]])
    links = torch.stack(tree_transformer.tree_encoder(model)(tokens)["link_probabilities"])
    assert (links < 1e-6).any() and (links > 1 - 1e-6).any()
    model(tokens)[0].sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_lm_and_translation_models_run_share_the_encoder_and_take_the_constituent_diagonal():
    parser = argparse.ArgumentParser()
    tree_transformer.TreeTransformerLMModel.add_args(parser)
    assert parser.parse_args(["--constituent-diagonal", "zero"]).constituent_diagonal == "zero"
    assert parser.parse_args([]).constituent_diagonal == "one"
    args = argparse.Namespace(constituent_diagonal="zero")
    tree_transformer.tree_transformer_lm_tiny_architecture(args)
    lm = tree_transformer.TreeTransformerLMModel.build_model(args, WordTask())
    args = argparse.Namespace(constituent_diagonal="zero")
    tiny_architecture(args)
    translation = tree_transformer.ConstituentTransformerModel.build_model(args, WordTask())
    tokens = torch.tensor([[0, 4, 5, 6, 2], [0, 7, 8, 2, 1]])
    assert lm(tokens)[0].shape == (2, 5, len(lm.encoder.dictionary))
    assert tree_transformer.tree_encoder(translation) is translation.encoder
    out, _ = translation(tokens, torch.tensor([5, 4]), tokens)
    assert out.shape == (2, 5, len(WordTask().target_dictionary))
    assert len(translation.encoder(tokens)["link_probabilities"]) == args.encoder_layers
    # C_ii in every layer of both models; 1 by default
    for model, diagonal in ((lm, 0.0), (translation, 0.0), (_tiny_lm(layers=2), 1.0)):
        assert {m.diagonal for m in model.modules() if isinstance(m, ConstituentAttention)} == {diagonal}
