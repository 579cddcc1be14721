"""Link queries and keys are the halves of one ``C -> 2C`` projection; old checkpoints (two layers) load. Links from
the halves against eqs. 5-8: test_constituent_attention.py."""
import argparse

import pytest
import torch

import fairseq_syntax.methods.tree_transformer.model as tree_transformer
from fairseq_syntax.core.model import tiny_architecture
from fairseq_syntax.methods.tree_transformer.attention import ConstituentAttention
from conftest import WordTask, assert_upgrade_keeps_a_new_state_dict, load_old_state_dict

torch.set_num_threads(1)


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
