"""Write examples/ptb_induction/RESULTS.md from the logs and JSON scores that run.sh leaves in logs/.

    python3 examples/ptb_induction/make_results.py --logs examples/ptb_induction/logs --out RESULTS.md

Every number in the output is read from a log or JSON file named next to it; a missing file is an error.
"""
import argparse
import datetime
import json
import os
import re
import statistics

SYSTEMS = {"tree_transformer_lm": "Tree Transformer", "roberta_prenorm": "Transformer (roberta_prenorm)"}
BASELINES = ("left-branching", "right-branching")
LABELS = ("NP", "VP", "PP", "ADJP", "SBAR", "ADVP")


def read(logs: str, name: str) -> str:
    path = os.path.join(logs, name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: run examples/ptb_induction/run.sh first")
    with open(path, encoding="utf-8") as text:
        return text.read()


def command(log: str) -> str:
    """The log's command; for a run resumed from its checkpoint, the last part's (the one that set --max-update)."""
    first = log.splitlines()[0]
    if not first.startswith("# command: "):
        raise ValueError(f"the log does not start with '# command: ': {first[:80]!r}")
    parts = [line[len("# command: "):] for line in log.splitlines() if line.startswith("# command: ")]
    return parts[-1] + (f"   # the last of {len(parts)} parts (resumed)" if len(parts) > 1 else "")


def one(pattern: str, text: str, what: str) -> re.Match:
    matches = list(re.finditer(pattern, text))
    if not matches:
        raise ValueError(f"no {what} in the log (pattern {pattern!r})")
    return matches[-1]


def wall_seconds(log: str) -> float:
    """Wall-clock time of a training log: first to last timestamp of each part (one per "# command:" line), summed.

    fairseq's own "wall" meter restarts at 0 when a run resumes from its checkpoint, so it cannot be used.
    """
    total = 0.0
    for part in log.split("# command: ")[1:]:
        stamps = re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \|", part, flags=re.MULTILINE)
        if stamps:
            first, last = (datetime.datetime.fromisoformat(stamp) for stamp in (stamps[0], stamps[-1]))
            total += (last - first).total_seconds()
    if total == 0:
        raise ValueError("no timestamped lines in the training log")
    return total


def median_words_per_second(log: str) -> float:
    """fairseq's logged training tokens/s, median over the longest part of a resumed run (parts may differ in
    precision or load, so they are not pooled)."""
    parts = [re.findall(r"train_inner .*? wps=([\d.]+)", part) for part in log.split("# command: ")[1:]]
    longest = max(parts, key=len)
    if not longest:
        raise ValueError("no train_inner lines in the training log")
    return statistics.median(float(wps) for wps in longest)


def training_summary(log: str) -> dict:
    pattern = (r"valid on 'valid' subset \| loss (?P<loss>[\d.]+) \| ppl (?P<ppl>[\d.]+) "
               r".*?\| num_updates (?P<updates>\d+)")
    valid = [match.groupdict() for match in re.finditer(pattern, log)]
    if not valid:
        raise ValueError("no validation line in the training log")
    best = min(valid, key=lambda row: float(row["loss"]))
    return {
        "params": one(r"num\. shared model params: ([\d,]+)", log, "parameter count").group(1),
        "updates": one(r"num_updates (\d+)", log, "update count").group(1),
        "seconds": wall_seconds(log),
        "words_per_second": median_words_per_second(log),
        "best_valid_loss": best["loss"], "best_valid_ppl": best["ppl"], "best_at": best["updates"],
    }


def tree_to_plain(values: dict) -> float:
    """Ratio of the Tree Transformer's value to the plain Transformer's (``values`` keyed by arch)."""
    tree, plain = (values[arch] for arch in SYSTEMS)
    return tree / plain


def variant_summary(logs: str) -> dict:
    """The settings and headline numbers of one run of the recipe (one logs directory)."""
    corpus_log = read(logs, "make_corpus.log")
    tree_command = command(read(logs, "train_tree_transformer_lm.log"))
    induction = json.loads(read(logs, "induce_paper.json"))["subsets"]
    perplexity = {arch: json.loads(read(logs, f"perplexity_{arch}.json"))["perplexity"] for arch in SYSTEMS}
    return {
        "logs": os.path.basename(os.path.normpath(logs)),
        "transductive": "train/ptb-sample" in corpus_log,  # trained on the evaluation sentences' words (EVAL_TEXT=1)
        "diagonal_zero": "--constituent-diagonal zero" in tree_command,  # C_ii = 0 as in the authors' code
        "authors_optimiser": "--lr-scheduler fixed" in tree_command,  # OPTIMISER=authors
        "bf16": "--cpu-bf16-autocast" in tree_command,
        "updates": one(r"--max-update (\d+)", tree_command, "update budget").group(1),
        "sentence_f1": [100 * scores["Tree Transformer"]["sentence_f1"] for scores in induction.values()],
        "perplexity_ratio": tree_to_plain(perplexity),
    }


def variants_table(logs: str, current: dict) -> list:
    """Markdown rows comparing every complete run of the recipe beside ``logs`` (directories ``logs*``);
    ``current`` is the summary of ``logs`` itself."""
    parent = os.path.dirname(os.path.abspath(logs))
    runs = [name for name in sorted(os.listdir(parent))
            if name.startswith("logs") and os.path.exists(os.path.join(parent, name, "perplexity_roberta_prenorm.json"))]
    lines = ["| logs | training text | C_ii | optimiser | precision | updates | sentence F1 all "
             "| sentence F1 <=10 words | perplexity ratio |", "|---|---|---:|---|---|---:|---:|---:|---:|"]
    for name in runs:
        row = current if name == current["logs"] else variant_summary(os.path.join(parent, name))
        text = "+ PTB sample words" if row["transductive"] else "without the PTB sample"
        optimiser = "authors'" if row["authors_optimiser"] else "recipe"
        lines.append(f"| `{name}/` | {text} | {0 if row['diagonal_zero'] else 1} | {optimiser} "
                     f"| {'bf16' if row['bf16'] else 'fp32'} | {row['updates']} | "
                     + " | ".join(f"{f1:.1f}" for f1 in row["sentence_f1"]) + f" | {row['perplexity_ratio']:.3f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    logs = args.logs

    corpus_log = read(logs, "make_corpus.log")
    corpus = json.loads(corpus_log[corpus_log.index("{"): corpus_log.rindex("}") + 1])
    summary = variant_summary(logs)
    transductive, diagonal_zero, bf16 = summary["transductive"], summary["diagonal_zero"], summary["bf16"]
    settings = (("EVAL_TEXT=1 " if transductive else "") + ("DIAGONAL=zero " if diagonal_zero else "")
                + ("OPTIMISER=authors " if summary["authors_optimiser"] else "")
                + f"PRECISION={'bf16' if bf16 else 'fp32'} UPDATES={summary['updates']} ")
    logs_name = os.path.basename(os.path.normpath(logs))
    preprocess = read(logs, "preprocess.log")
    vocabulary = one(r"Dictionary: (\d+) types", preprocess, "dictionary size").group(1)
    ptb_unk = one(r"ptb\.txt: \d+ sents, \d+ tokens, ([\d.]+)% replaced", preprocess, "PTB <unk> rate").group(1)
    training = {arch: training_summary(read(logs, f"train_{arch}.log")) for arch in SYSTEMS}
    induction = {variant: json.loads(read(logs, f"induce_{variant}.json")) for variant in ("paper", "released")}
    perplexity = {arch: json.loads(read(logs, f"perplexity_{arch}.json")) for arch in SYSTEMS}

    lines = [
        "# Tree Transformer: grammar induction on the PTB sample and masked-word perplexity",
        "",
        f"Generated by `examples/ptb_induction/make_results.py` from `examples/ptb_induction/{logs_name}/`; do not",
        f"edit by hand. Reproduce with `{settings}examples/ptb_induction/run.sh` "
        "(commands below). CPU only, one thread per process, on",
        "a machine whose 2 cores were shared with other jobs, so wall times are only indicative.",
        "",
        "## Data",
        "",
        "Training text (words only, never trees; punctuation removed, lowercased, digits -> `N`, as the PTB",
        "evaluation sentences): " + ", ".join(
            f"{name.split('/')[1]} {stats['sentences']:,} sentences / {stats['words']:,} words"
            for name, stats in corpus.items() if name.startswith("train/")) + ".",
        f"Validation: the Multi30k val, UD EWT dev and SST dev words. Vocabulary: {vocabulary} types (words seen",
        f"at least 3 times). Evaluation: the {corpus['eval/ptb-sample']['sentences']:,} trees of the PTB sample",
        f"wsj_0001-0159 ({corpus['eval/ptb-sample']['words']:,} words after removing punctuation and traces by POS "
        f"tag); {ptb_unk}% of its words are `<unk>` to the model"
        + (" (rare words: its text is in the training text)." if transductive else " (out-of-domain text)."),
        "",
        "## Training (masked LM, `sentence_masked_lm`, BERT masking 15% / 80-10-10)",
        "",
        ("Precision: bf16 autocast (`--cpu-bf16-autocast`, fp32 weights) for both systems." if bf16 else
         "Precision: fp32 for both systems."),
        "",
        "| system | parameters | updates | wall time | tokens/s (median) | best valid loss (bits) | at update |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for arch, name in SYSTEMS.items():
        row = training[arch]
        lines.append(f"| {name} | {row['params']} | {row['updates']} | {row['seconds'] / 60:.1f} min | "
                     f"{row['words_per_second']:.0f} | {row['best_valid_loss']} | {row['best_at']} |")
    speed = tree_to_plain({arch: row["words_per_second"] for arch, row in training.items()})
    lines += [
        "",
        f"Training throughput, Tree Transformer / Transformer: {speed:.2f} (median of fairseq's logged tokens/s;",
        "the two trained side by side on the same data, so both saw the same load).",
    ]

    subsets = list(induction["paper"]["subsets"])
    paper_systems = induction["paper"]["subsets"][subsets[0]]
    random_name = next(name for name in paper_systems if name.startswith("random"))
    rows = [("Tree Transformer, Algorithm 1 (m=2, threshold 0.8)", induction["paper"], "Tree Transformer"),
            ("Tree Transformer, released variant (descend above 0.7)", induction["released"], "Tree Transformer")]
    rows += [(name, induction["paper"], name) for name in (*BASELINES, random_name)]
    lines += [
        "",
        "## Grammar induction (unlabeled F1, %)",
        "",
        "Convention of `fairseq_syntax.evaluation.parseval` (PRPN / ON-LSTM): punctuation and traces removed by POS",
        "tag, single-word and whole-sentence spans discarded; *sentence F1* is the mean over sentences (the",
        "paper's number), *corpus F1* the micro average. All rows are scored by the same code.",
        "",
        "| trees | " + " | ".join(
            f"{subset} ({induction['paper']['subsets'][subset][random_name]['sentences']} sent.) sentence F1 | "
            f"{subset} corpus F1" for subset in subsets) + " |",
        "|---|" + "---:|---:|" * len(subsets),
    ]
    for label, result, system in rows:
        cells = " | ".join(
            f"{100 * result['subsets'][subset][system]['sentence_f1']:.1f} | "
            f"{100 * result['subsets'][subset][system]['corpus_f1']:.1f}" for subset in subsets)
        lines.append(f"| {label} | {cells} |")
    lines += [
        "",
        f"Recall by gold label (%, {subsets[0]} sentences; the paper's Table 3):",
        "",
        "| trees | " + " | ".join(LABELS) + " |",
        "|---|" + "---:|" * len(LABELS),
    ]
    for label, result, system in rows:
        recall = result["subsets"][subsets[0]][system]["label_recall"]
        cells = " | ".join(f"{100 * recall[l][0] / recall[l][1]:.1f}" if l in recall and recall[l][1] else "-"
                           for l in LABELS)
        lines.append(f"| {label} | {cells} |")

    analysis = [(f"Algorithm 1, minimum layer {m}", f"induce_min{m}.json") for m in (1, 2, 3)]
    analysis += [(f"greedy from layer {layer} alone", f"induce_layer{layer}.json")
                 for layer in range(induction["paper"]["layers"])]
    lines += [
        "",
        "Which layers hold the structure (the paper's Figure 4): Algorithm 1 with other minimum layers m, and",
        "top-down greedy parsing (split at the weakest link, no threshold) from one layer's links alone.",
        "",
        "| trees | " + " | ".join(f"{subset} sentence F1" for subset in subsets) + " |",
        "|---|" + "---:|" * len(subsets),
    ]
    for label, name in analysis:
        result = induction["paper"] if name == "induce_min2.json" else json.loads(read(logs, name))
        lines.append(f"| {label} | " + " | ".join(
            f"{100 * result['subsets'][subset]['Tree Transformer']['sentence_f1']:.1f}" for subset in subsets) + " |")
    agreement = induction["paper"].get("link_agreement")
    if agreement:
        lines += [
            "",
            "What the links learnt, before any parsing rule: per layer, Spearman's rho (all sentences, every pair of",
            "adjacent words) between the link a_k and minus the size of the smallest gold constituent holding both",
            "words (`fairseq_syntax/evaluation/link_agreement.py`): +1 = the gold ranking, 0 = none, < 0 = links",
            "that cut the gold constituents.",
            "",
            "| layer | " + " | ".join(str(layer) for layer in range(len(agreement))) + " |",
            "|---|" + "---:|" * len(agreement),
            "| rho | " + " | ".join(f"{rho:+.3f}" for rho in agreement) + " |",
        ]
        shifted = induction["paper"].get("link_agreement_shifted", {})
        for offset, label in (("-1", "rho of a_{k-1} (one pair left)"), ("+1", "rho of a_{k+1} (one pair right)")):
            if offset in shifted:
                lines.append(f"| {label} | " + " | ".join(f"{rho:+.3f}" for rho in shifted[offset]) + " |")
        if shifted:
            lines += ["", "The last two rows compare the pair k, k+1 with the link next to it: a model whose "
                      "links were aligned with", "the gold trees would score highest in the first row."]
    tag_pairs = induction["paper"].get("links_by_tag_pair")
    if tag_pairs:
        layers = len(tag_pairs[0]["mean_links"])
        lines += [
            "",
            "Which words the links join: the mean link a_k per layer of the most frequent POS tag pairs of adjacent",
            "words (by their mean over layers), beside the median size of the smallest gold constituent holding both words",
            "(2 = a two-word constituent such as `the board`).",
            "",
            "| tags | pairs | " + " | ".join(f"layer {layer}" for layer in range(layers)) + " | gold size |",
            "|---|---:|" + "---:|" * layers + "---:|",
        ] + [
            f"| {' '.join(row['tags'])} | {row['count']} | " + " | ".join(f"{v:.2f}" for v in row["mean_links"])
            + f" | {row['median_gold_size']:g} |" for row in tag_pairs
        ]
    figure = os.path.basename(one(r"--output (\S+\.png)", read(logs, "constituent_prior.log"), "figure path").group(1))
    lines += [
        "",
        "For scale, the paper (WSJ-test / WSJ-10, sentence F1): Tree Transformer L=10 trained on WSJ-train 49.5 /",
        "66.2 (median of runs), right-branching 39.8 / 56.6, left-branching 9.0 / 19.6, random 21.6 / 31.9.",
        "",
        "The constituent prior C of every layer for the first PTB sentence, as in the paper's Figure 5:",
        f"[`{figure}`]({figure}).",
        "",
        "## Masked-word perplexity (section 7.5: every word masked once, one at a time)",
        "",
        "| system | parameters | perplexity | words scored | `<unk>` words not scored |",
        "|---|---:|---:|---:|---:|",
    ]
    for arch, name in SYSTEMS.items():
        result = perplexity[arch]
        lines.append(f"| {name} | {training[arch]['params']} | {result['perplexity']:.1f} | "
                     f"{result['scored_words']:,} | {result['unknown_words']:,} |")
    ratio = tree_to_plain({arch: result["perplexity"] for arch, result in perplexity.items()})
    lines += [
        "",
        f"Tree Transformer / Transformer perplexity: {ratio:.3f}. For scale, the paper's Table 4 (WSJ, trained",
        "on WSJ-train, 10 layers): Tree-T 45.7 vs Transformer 48.5, a ratio of 0.942.",
    ]

    lines += [
        "",
        "## Every run of this recipe kept here",
        "",
        "Algorithm 1 (m=2, threshold 0.8) and Tree Transformer / Transformer masked-word perplexity of each",
        "`logs*` directory beside this one (each has its own RESULTS file); right-branching trees score "
        + " / ".join(f"{100 * induction['paper']['subsets'][subset]['right-branching']['sentence_f1']:.1f}"
                     for subset in subsets) + ":",
        "",
    ] + variants_table(logs, summary)
    lines += [
        "",
        "## How this differs from the paper",
        "",
    ] + ([
        "- Training text: Multi30k captions, UD EWT web text and SST movie reviews, plus the raw words of the PTB",
        "  sample itself (never its trees): the transductive setting, since WSJ-train is not at hand. The paper",
        "  trains on WSJ-train and parses WSJ-test, sentences it has not read.",
    ] if transductive else [
        "- Training text: Multi30k captions, UD EWT web text and SST movie reviews (raw words), not WSJ, because",
        "  only the PTB sample is at hand and it is the evaluation set; so the PTB sentences are out of domain",
        "  (`EVAL_TEXT=1 run.sh` adds their words to the training text: RESULTS-eval-text.md).",
    ]) + [
        "- Size and budget: 6 layers, d_model 128, 4 heads, FFN 512, word-level vocabulary, trained for the",
        "  number of updates above on a shared CPU (the paper: 10 layers, d_model 512, 8 heads, WordPiece 16k,",
        "  trained to convergence on a GPU). Both systems here have the same size, data, schedule and seed.",
        "- Evaluation set: the PTB sample (WSJ files 0001-0159, from sections 00-01), not WSJ-test (section 23);",
        "  the sentence-level mean F1 and its rules are the paper's (ON-LSTM's evaluation).",
    ] + ([
        "- The constituent prior has C_ii = 0, as in the authors' code (about 3e-5 there): a word attends only to",
        "  the others. Eq. 3 gives C_ii = 1 (an empty product), this recipe's default. The link scores are scaled",
        "  by d_model / 2 as in the paper.",
    ] if diagonal_zero else [
        "- The constituent prior has C_ii = 1 (eq. 3, an empty product); the authors' code leaves the diagonal",
        "  near 0 (`DIAGONAL=zero run.sh`). The link scores are scaled by d_model / 2 as in the paper.",
    ]) + [
        "- Masked-word perplexity leaves out words that are `<unk>` to the model (counted above); both systems",
        "  share the dictionary, so they are scored on the same words.",
    ]

    lines += ["", "## Commands", ""]
    sweep = [f"induce_min{m}.log" for m in (1, 3)] + [
        f"induce_layer{layer}.log" for layer in range(induction["paper"]["layers"])]
    for log in ("make_corpus.log", "preprocess.log", *(f"train_{arch}.log" for arch in SYSTEMS),
                "induce_paper.log", "induce_released.log", *sweep, "constituent_prior.log",
                *(f"perplexity_{arch}.log" for arch in SYSTEMS)):
        lines += [f"`{logs_name}/{log}`:", "```", command(read(logs, log)), "```"]
    with open(args.out, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
