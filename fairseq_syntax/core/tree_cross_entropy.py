"""Criterion ``tree_cross_entropy`` for ``--task tree_classification``: cross-entropy of the root class, plus, with
``--node-labels``, of every labelled node and word (Nguyen et al. 2020, Appendix 7.4: "we optimize every
sentiment label provided in the dataset"; Tai et al. 2015 do the same).

Model output: ``(sentence_logits B x C, token_logits B x T x C)``; sample: ``target`` ``B`` and ``token_labels``
``B x T`` (``-1`` where a token has no label). The loss is summed; ``sample_size`` is the number of predictions it
sums over (sentences, plus labelled tokens with ``--node-labels``). Logged: ``loss`` (base 2, per prediction),
``accuracy`` (root, %) and ``node_accuracy`` (labelled tokens, %, whether or not they are trained on).
"""
import math
from dataclasses import dataclass

import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass

from fairseq_syntax.core.command_help import option

NO_LABEL = -1


@dataclass
class TreeCrossEntropyConfig(FairseqDataclass):
    node_labels: bool = option(False, "also train on the label of every labelled node and word, not only the root")


@register_criterion("tree_cross_entropy", dataclass=TreeCrossEntropyConfig)
class TreeCrossEntropyCriterion(FairseqCriterion):
    def __init__(self, task, node_labels: bool = False):
        super().__init__(task)
        self.node_labels = node_labels

    def forward(self, model, sample, reduce=True):
        sentence_logits, token_logits = model(**sample["net_input"])
        target, token_labels = sample["target"], sample["token_labels"]
        loss = F.cross_entropy(sentence_logits.float(), target, reduction="sum")
        labelled = token_labels != NO_LABEL
        sample_size = target.numel()
        if self.node_labels:
            loss = loss + F.cross_entropy(
                token_logits.float().flatten(0, 1), token_labels.flatten(), ignore_index=NO_LABEL, reduction="sum"
            )
            sample_size += int(labelled.sum())
        node_correct = (token_logits.argmax(-1) == token_labels) & labelled
        logging_output = {
            "loss": loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": target.numel(),
            "sample_size": sample_size,
            "correct": int((sentence_logits.argmax(-1) == target).sum()),
            "node_correct": int(node_correct.sum()),
            "node_count": int(labelled.sum()),
        }
        return loss, sample_size, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return sum(log.get(key, 0) for log in logging_outputs)

        sample_size = total("sample_size")
        metrics.log_scalar("loss", total("loss") / max(sample_size, 1) / math.log(2), sample_size, round=3)
        metrics.log_scalar("nsentences", total("nsentences"))
        metrics.log_scalar("_correct", total("correct"))
        metrics.log_scalar("_nsent", total("nsentences"))
        metrics.log_derived(
            "accuracy", lambda meters: round(100 * meters["_correct"].sum / max(meters["_nsent"].sum, 1), 2)
        )
        if total("node_count"):
            metrics.log_scalar("_node_correct", total("node_correct"))
            metrics.log_scalar("_node_count", total("node_count"))
            metrics.log_derived(
                "node_accuracy",
                lambda meters: round(100 * meters["_node_correct"].sum / max(meters["_node_count"].sum, 1), 2),
            )

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
