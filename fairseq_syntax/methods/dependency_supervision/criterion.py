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
from dataclasses import dataclass, field

import torch
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)

from fairseq_syntax.methods.dependency_supervision.targets import IGNORE, parent_targets


@dataclass
class DependencyLossConfig(LabelSmoothedCrossEntropyCriterionConfig):
    dependency_weight: float = field(default=0.5, metadata={"help": "lambda: weight of the dependency loss"})


def dependency_loss(attention: torch.Tensor, targets: torch.Tensor):
    """(summed -log attention at the parent, tokens with a parent, tokens whose argmax is the parent);
    ``attention`` ``B x T x T``, ``targets`` ``B x T`` (``IGNORE`` where none)."""
    supervised = targets.ne(IGNORE)
    log_attention = attention.float().clamp(min=torch.finfo(torch.float32).tiny).log()
    picked = log_attention.gather(2, targets.clamp(min=0)[:, :, None]).squeeze(2)
    correct = attention.argmax(dim=2).eq(targets) & supervised
    return -picked[supervised].sum(), supervised.sum(), correct.sum()


@register_criterion("label_smoothed_cross_entropy_with_dependency", dataclass=DependencyLossConfig)
class LabelSmoothedCrossEntropyWithDependency(LabelSmoothedCrossEntropyCriterion):
    #: the side data it trains on: syntax_translation refuses a model or data directory without it
    supervision_inputs = ("src_ldd",)

    def __init__(self, task, sentence_avg, label_smoothing, dependency_weight, ignore_prefix_size=0,
                 report_accuracy=False):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        self.dependency_weight = dependency_weight

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
        summed, tokens, correct = dependency_loss(attention, parent_targets(word_pairs, token_words, not_dependent))
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
        super().reduce_metrics(logging_outputs)
        tokens = sum(log.get("dependency_tokens", 0) for log in logging_outputs)
        if tokens:
            summed = sum(log.get("dependency_loss", 0) for log in logging_outputs)
            correct = sum(log.get("dependency_correct", 0) for log in logging_outputs)
            metrics.log_scalar("dependency_loss", summed / tokens / math.log(2), tokens, round=3)
            metrics.log_scalar("dependency_accuracy", 100 * correct / tokens, tokens, round=2)
