"""Criterion ``label_smoothed_cross_entropy_with_dependency``: fairseq's label-smoothed cross-entropy plus the
dependency loss of Deguchi et al. (2019), eq. 9, as their code weighs it:

    L = L_translation + lambda * (sample_size / n) * sum_t -log A_dep[t, parent(t)]

``A_dep``: the supervised heads' attention (``encoder_out["dependency_attention"]``, :mod:`.model`); ``parent(t)``:
:func:`.targets.parent_targets`, over the ``n`` source tokens that have one (words' pieces; not EOS or padding);
``lambda`` is ``--dependency-weight`` (default 0.5, the authors'). The per-token mean times ``sample_size`` keeps
the two terms on the same scale whatever the batch. Logged: ``dependency_loss`` (base 2, per supervised token) and
``dependency_accuracy`` (% of tokens whose most-attended key is their parent).
"""
import math
from dataclasses import dataclass

import torch
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)

from fairseq_syntax.core.command_help import option
from fairseq_syntax.methods.dependency_supervision.targets import IGNORE, parent_targets
from fairseq_syntax.methods.ldd.distributions import FirstBatchCheck


@dataclass
class DependencyLossConfig(LabelSmoothedCrossEntropyCriterionConfig):
    dependency_weight: float = option(0.5, "lambda: weight of the dependency loss")


def dependency_loss(attention: torch.Tensor, targets: torch.Tensor):
    """(summed -log attention at the parent, tokens with a parent, tokens whose argmax is the parent);
    ``attention`` ``B x T x T``, ``targets`` ``B x T`` (``IGNORE`` where none)."""
    supervised = targets.ne(IGNORE)
    log_attention = attention.float().clamp(min=torch.finfo(torch.float32).tiny).log()
    picked = log_attention.gather(2, targets.clamp(min=0)[:, :, None]).squeeze(2)
    correct = attention.argmax(dim=2).eq(targets) & supervised
    # zeros where there is no parent, not a boolean selection (whose size the host would read from the device)
    return -picked.masked_fill(~supervised, 0.0).sum(), supervised.sum(), correct.sum()


@register_criterion("label_smoothed_cross_entropy_with_dependency", dataclass=DependencyLossConfig)
class LabelSmoothedCrossEntropyWithDependency(LabelSmoothedCrossEntropyCriterion):
    #: the side data it trains on: syntax_translation refuses a model or data directory without it
    supervision_inputs = ("src_ldd",)

    def __init__(self, task, sentence_avg, label_smoothing, dependency_weight, ignore_prefix_size=0,
                 report_accuracy=False):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        self.dependency_weight = dependency_weight
        self.one_best_check = FirstBatchCheck()  # the refusal of side data without the parser's 1-best tree

    def forward(self, model, sample, reduce=True):
        net_input = sample["net_input"]
        if "src_ldd" not in net_input:
            raise ValueError("label_smoothed_cross_entropy_with_dependency needs the parser's trees: the data "
                             "directory lacks src_ldd (made by fairseq-syntax-preprocess-dependencies)")
        net_output = model(**net_input)
        loss, nll_loss = self.compute_loss(model, net_output, sample, reduce=reduce)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        word_pairs, token_words = net_input["src_ldd"]
        src_tokens = net_input["src_tokens"]
        not_dependent = src_tokens.eq(self.padding_idx) | src_tokens.eq(model.encoder.dictionary.eos())
        attention = net_output[1]["encoder_out"]["dependency_attention"][0]
        targets = parent_targets(word_pairs, token_words, not_dependent, self.one_best_check.due())
        summed, tokens, correct = dependency_loss(attention, targets)
        loss = loss + self.dependency_weight * summed * sample_size / tokens.clamp(min=1)
        logging_output = {
            "loss": loss.data, "nll_loss": nll_loss.data, "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0), "sample_size": sample_size,
            "dependency_loss": summed.data, "dependency_tokens": tokens.data, "dependency_correct": correct.data,
        }
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, net_output, sample)
            logging_output["n_correct"], logging_output["total"] = utils.item(n_correct.data), utils.item(total.data)
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        """fairseq's metrics, and ``dependency_loss`` and ``dependency_accuracy`` from the logged sums, as tensors:
        the sums are kept in meters named ``_...`` (not shown, so not read back from the device each step)."""
        super().reduce_metrics(logging_outputs)
        if not any("dependency_tokens" in log for log in logging_outputs):
            return
        for key in DEPENDENCY_SUMS:
            metrics.log_scalar_sum(f"_{key}", sum(log.get(key, 0) for log in logging_outputs))
        metrics.log_derived("dependency_loss", lambda meters: per_token(meters, "dependency_loss", 1 / math.log(2), 3),
                            priority=10)
        metrics.log_derived("dependency_accuracy", lambda meters: per_token(meters, "dependency_correct", 100, 2),
                            priority=10)


#: what each batch logs, summed over the batches of a logging interval
DEPENDENCY_SUMS = ("dependency_loss", "dependency_tokens", "dependency_correct")


def per_token(meters, key: str, scale: float, digits: int) -> torch.Tensor:
    """The logged sum ``key`` per supervised token, times ``scale``, rounded to ``digits`` (float64, on the device
    it was logged on; NaN when no token was supervised, as fairseq's accuracy)."""
    tokens = torch.as_tensor(meters["_dependency_tokens"].sum, dtype=torch.float64)
    value = torch.as_tensor(meters[f"_{key}"].sum, dtype=torch.float64, device=tokens.device) * scale / tokens
    return torch.round(value, decimals=digits)
