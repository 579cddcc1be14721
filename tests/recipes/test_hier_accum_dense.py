"""bench/hier_accum_dense: the dense accumulation and model equal the factored ones (values, gradients, outputs)."""
import os
import random
import sys
from unittest import mock

import pytest
import torch
from conftest import (
    REPO,
    TRANSLATION,
    accumulation_cases,
    assert_close_with_gradients,
    build_on_cpu,
    parents_batch,
    random_accumulation_inputs,
)
from fairseq.models import ARCH_MODEL_REGISTRY

from fairseq_syntax.methods.hier_accum import model
from fairseq_syntax.methods.hier_accum.accumulation import (
    HierarchicalEmbeddings,
    accumulation_structure,
    hierarchical_accumulation,
)

sys.path.insert(0, os.path.join(REPO, "bench"))
from hier_accum_dense import dense  # noqa: E402  (registers transformer_hier_accum_dense)

torch.set_num_threads(1)


@accumulation_cases
def test_dense_accumulation_equals_the_factored_one(average, embedding_size, left_pad):
    rng = random.Random(f"dense-{average}-{embedding_size}-{left_pad}")
    torch.manual_seed(rng.randrange(1000))
    for _ in range(4):
        parents, embeddings, values, weights, structure = random_accumulation_inputs(
            rng, 12, embedding_size, average, left_pad)
        fast = hierarchical_accumulation(values, weights, structure, embeddings)
        naive = hierarchical_accumulation(values, weights, structure, embeddings, dense.dense_node_accumulation)
        assert_close_with_gradients(naive, fast, values, weights, embeddings)  # a float32 structure: a tolerance


def test_dense_embeddings_index_the_tables_by_depth_and_rank_under_each_node():
    # (root (a b (c d))): leaves a, b, d at positions 1, 2, 4; node c at 3 over d
    parents = parents_batch([-1, 0, 0, 0, 3], append_eos=False)
    structure = accumulation_structure(parents, 2)
    embeddings = HierarchicalEmbeddings(2, 4)
    rows = dense.dense_embeddings(structure, embeddings, torch.float32)[0]  # m x n x d, nodes root, c
    v, h = embeddings.vertical.detach(), embeddings.horizontal.detach()
    # root over a, b, d: vertical 1, 1, 2; horizontal 1, 2, 3 (capped at 2)
    torch.testing.assert_close(rows[0], torch.stack([torch.cat([v[0], h[0]]), torch.cat([v[0], h[1]]),
                                                     torch.cat([v[1], h[1]])]))
    # c over d only: vertical 1, horizontal 1; zero where the leaf is not under it
    torch.testing.assert_close(rows[1], torch.stack([torch.zeros(4), torch.zeros(4), torch.cat([v[0], h[0]])]))


# --- the model

def build(data_dir, arch, *extra):
    """The model (seed 1) and a batch of 8 test sentences."""
    _, built, _, sample, _ = build_on_cpu([data_dir, *TRANSLATION, "--arch", arch, "--hier-embed-size", "4", *extra])
    return built, sample


@pytest.mark.parametrize("extra", [(), ("--cumulative-average", "official", "--no-subtree-mask")])
def test_the_dense_model_gives_the_fast_models_outputs(hier_accum_data, extra):
    fast, sample = build(hier_accum_data, "transformer_hier_accum_tiny", *extra)
    naive, _ = build(hier_accum_data, "transformer_hier_accum_dense_tiny", *extra)  # same seed: same parameters
    assert ARCH_MODEL_REGISTRY["transformer_hier_accum_dense"] is type(naive) is dense.DenseHierAccumTransformerModel
    assert isinstance(naive, model.HierAccumTransformerModel)
    fast_parameters, naive_parameters = fast.state_dict(), naive.state_dict()
    assert fast_parameters.keys() == naive_parameters.keys()
    assert all(torch.equal(fast_parameters[name], naive_parameters[name]) for name in fast_parameters)
    net_input = sample["net_input"]
    encoder_input = {name: value for name, value in net_input.items() if name != "prev_output_tokens"}
    calls = mock.Mock(wraps=dense.dense_node_accumulation)
    counting = [mock.patch.object(cls, "node_accumulation", staticmethod(calls))
                for cls in (dense.DenseHierarchicalSelfAttention, dense.DenseHierarchicalCrossAttention)]
    with torch.no_grad(), counting[0], counting[1]:
        fast_states = fast.encoder(**encoder_input)["encoder_out"][0]
        naive_states = naive.encoder(**encoder_input)["encoder_out"][0]
        assert calls.call_count == len(naive.encoder.layers)  # the fast model never calls it
        fast_logits, _ = fast(**net_input)
        naive_logits, _ = naive(**net_input)
    # then once per encoder layer and once per decoder cross-attention
    assert calls.call_count == 2 * len(naive.encoder.layers) + len(naive.decoder.layers)
    torch.testing.assert_close(naive_states, fast_states, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(naive_logits, fast_logits, rtol=1e-5, atol=1e-5)
