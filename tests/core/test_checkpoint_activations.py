"""``--checkpoint-activations`` wraps every encoder layer and changes no loss or gradient beyond float rounding."""
import pytest
import torch
from conftest import TRANSLATION, build_on_cpu, loss_and_gradients

from fairseq_syntax.methods import METHODS


def wrapped(layer) -> bool:
    return hasattr(layer, "precheckpoint_forward")  # what fairseq's checkpoint_wrapper leaves on a module


TRANSLATION_SYSTEMS = [system for method in METHODS for system in method.systems if system.task == "translation"]


@pytest.mark.parametrize("system", TRANSLATION_SYSTEMS, ids=lambda system: system.name)
def test_checkpointed_layers_compute_the_same_loss_and_gradients(translation_data, system):
    argv = [translation_data(system), *TRANSLATION, "--arch", system.tiny_arch, *system.model_args]
    _, plain, criterion, sample, _ = build_on_cpu(argv)
    _, checkpointed, _, _, _ = build_on_cpu([*argv, "--checkpoint-activations"])
    assert not any(wrapped(layer) for layer in plain.encoder.layers)
    assert all(wrapped(layer) for layer in checkpointed.encoder.layers)
    decoder_layers = checkpointed.decoder.layers
    assert all(wrapped(layer) for layer in decoder_layers)
    checkpointed.load_state_dict(plain.state_dict())
    # training mode, dropout 0; PASCAL's one random draw starts from the same seed and is replayed
    plain.train()
    checkpointed.train()
    torch.manual_seed(1)
    loss, gradients = loss_and_gradients(plain, criterion, sample)
    torch.manual_seed(1)
    loss_checkpointed, gradients_checkpointed = loss_and_gradients(checkpointed, criterion, sample)
    # the checkpointed forward may pick another fused kernel: equal up to float rounding (1 ulp measured)
    torch.testing.assert_close(loss_checkpointed, loss, rtol=1e-6, atol=0)
    assert gradients and gradients_checkpointed.keys() == gradients.keys()
    for name, gradient in gradients.items():
        # the recomputed backward pass sums in another order: equal up to float rounding
        torch.testing.assert_close(gradients_checkpointed[name], gradient, rtol=1e-4, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")
