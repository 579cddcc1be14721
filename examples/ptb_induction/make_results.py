"""Write examples/ptb_induction/RESULTS.md and RESULTS.json: every run of the recipe kept here, in one table.

    python3 examples/ptb_induction/make_results.py                   # RESULTS.md + RESULTS.json from the runs
    python3 examples/ptb_induction/make_results.py --compress LOGS   # run.sh, after a run: compress its folder

A run of ``run.sh`` leaves ``logs<SUFFIX>/``: each step's log (``NAME.log[.gz]``, the command on its first line)
and JSON scores (``NAME.json``, or all in ``scores.json.gz``), then packed into ``packed.tar.xz`` (``packed_runs``)
and read from there. Runs made by hand are rows too (``EXPLORATORY``). A missing file is an error."""
import argparse
import collections
import datetime
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # this checkout's package
from fairseq_syntax.evaluation import packed_runs  # noqa: E402
from fairseq_syntax.evaluation.kept_files import compress, open_text, read_text  # noqa: E402
from fairseq_syntax.evaluation.records import make_log_portable, portable_paths  # noqa: E402
from fairseq_syntax.evaluation.tables import Cell, Table, number_cell, table_json, write_results  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SYSTEMS = {"tree_transformer_lm": "Tree Transformer", "roberta_prenorm": "Transformer (roberta_prenorm)"}
BASELINES = ("left-branching", "right-branching")
LABELS = ("NP", "VP", "PP", "ADJP", "SBAR", "ADVP")
SCORES = "scores.json.gz"
HEADLINE_RUN = "logs-ptb-text-diagonal-zero-authors-optimiser"  # its figure is constituent_prior.png
# logged by sentence_masked_lm when its masks are fresh every epoch (without it, and with workers: epoch 1's masks)
FRESH_MASKS_LINE = "with the epoch in shared memory: fresh every epoch"
# The random trees by induce's RANDOM_DRAWS: its JSON's "random, DRAW (N seeds)"
RANDOM_LABELS = {"uniform split": "random, uniform split point at every node (mean of {seeds} seeds)",
                 "shift-reduce": "random, shift-reduce coin flips as in Kim et al.'s code (mean of {seeds} seeds)"}
FIGURE = "constituent_prior.png"
# Runs made by hand (commands in their folder's README.md), Tree Transformers only: training log, parses scored.
EXPLORATORY = {
    "logs-authors-optimiser": [
        {"train": "train_tree_transformer_lm_diagonal_one.log", "parses": {"m=2": "induce_diagonal_one.json"}},
        {"train": "train_tree_transformer_lm_diagonal_zero.log",
         "parses": {"m=2": "induce_diagonal_zero.json", "m=1": "induce_diagonal_zero_minlayer1.json",
                    "layer 1": "induce_diagonal_zero_layer1.json"}},
    ],
}
# The parses of a run.sh run: label -> induce's JSON score file; LATER_PARSES: none in older runs ("–").
LATER_PARSES = {"chosen on dev": ("induce_dev.json", "Tree Transformer (rule chosen on dev)"),
                "m=2 on the same 90%": ("induce_dev.json", "Tree Transformer"),
                "m=2 without </s>": ("induce_noeos.json", "Tree Transformer")}
PARSES = {"m=1": "induce_min1.json", "m=2": "induce_paper.json", "m=3": "induce_min3.json",
          "released": "induce_released.json"}  # and "layer L": induce_layerL.json for every layer of the run
# Modules the logged commands ran that have moved since.
MOVED_MODULES = {"fairseq_syntax.cli.induce": "fairseq_syntax.methods.tree_transformer.induce",
                 "fairseq_syntax.evaluation.masked_lm": "fairseq_syntax.methods.tree_transformer.masked_lm"}


# --- reading a run folder

def missing(what: str) -> FileNotFoundError:
    return FileNotFoundError(f"{what} is missing: run examples/ptb_induction/run.sh first")


def read(logs: str, name: str) -> str:
    """The text of ``logs/name``, ``logs/name.gz`` or its packed copy."""
    path = os.path.join(logs, name)
    if not packed_runs.has(path):
        raise missing(f"{path} (or .gz, or packed)")
    return read_text(path)


def scores(logs: str) -> dict:
    """Every JSON score file of a run folder by name: ``scores.json.gz``'s, then the plain ``*.json`` over them."""
    found = {}
    bundle = os.path.join(logs, SCORES)
    if packed_runs.has(bundle):
        found.update(json.loads(read_text(bundle)))
    for path in packed_runs.glob(os.path.join(logs, "*.json")):
        if os.path.basename(path) != packed_runs.member_name(SCORES):  # the bundle, packed
            found[os.path.basename(path)] = json.loads(read_text(path))
    return found


def score(run_scores: dict, logs: str, name: str) -> dict:
    if name not in run_scores:
        raise missing(f"{os.path.join(logs, name)} (or in {SCORES})")
    return run_scores[name]


def command(log: str) -> str:
    """The log's command; for a run resumed from its checkpoint, the last part's (the one that set --max-update)."""
    if not log.startswith("# command: "):
        raise ValueError(f"the log does not start with '# command: ': {log.splitlines()[0][:80]!r}")
    parts = log_parts(log)
    return parts[-1].split("\n", 1)[0] + (f"   # the last of {len(parts)} parts (resumed)" if len(parts) > 1 else "")


def current(command_line: str) -> str:
    """A logged command with the modules that have moved since renamed (MOVED_MODULES)."""
    for old, new in MOVED_MODULES.items():
        command_line = re.sub(rf"-m {re.escape(old)}\b", f"-m {new}", command_line)
    return command_line


def one(pattern: str, text: str, what: str) -> str:
    """The group of ``pattern``'s last match in ``text``."""
    matches = re.findall(pattern, text)
    if not matches:
        raise ValueError(f"no {what} in the log (pattern {pattern!r})")
    return matches[-1]


def log_parts(log: str) -> list:
    """The parts of a log, one per "# command:" line (a resumed run has several); one without (by hand): one."""
    return log.split("# command: ")[1:] or [log]


def wall_seconds(log: str) -> float:
    """Wall-clock time of a training log: first to last timestamp of each part, summed."""
    total = 0.0
    for part in log_parts(log):
        stamps = re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \|", part, flags=re.MULTILINE)
        if stamps:
            first, last = (datetime.datetime.fromisoformat(stamp) for stamp in (stamps[0], stamps[-1]))
            total += (last - first).total_seconds()
    if total == 0:
        raise ValueError("no timestamped lines in the training log")
    return total


def median_words_per_second(log: str) -> float | None:
    """fairseq's logged training tokens/s, median over the longest part; None without a ``train_inner`` line."""
    parts = [re.findall(r"train_inner .*? wps=([\d.]+)", part) for part in log_parts(log)]
    longest = max(parts, key=len)
    return statistics.median(float(wps) for wps in longest) if longest else None


def speeds_by_minute(log: str) -> dict:
    """fairseq's logged training tokens/s (``train_inner`` lines) by the minute of their timestamp."""
    minutes = collections.defaultdict(list)
    for stamp, wps in re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d):\d\d \| INFO \| train_inner \| .*? wps=([\d.]+)", log,
                                 flags=re.MULTILINE):
        minutes[stamp].append(float(wps))
    return minutes


def side_by_side_throughput(tree_log: str, plain_log: str):
    """Tree Transformer / Transformer training throughput while both trained at once: medians of their logged
    tokens/s over the minutes both logged, and the number of those minutes; None under 10."""
    tree, plain = speeds_by_minute(tree_log), speeds_by_minute(plain_log)
    both = sorted(set(tree) & set(plain))
    if len(both) < 10:
        return None
    median = {name: statistics.median(wps for minute in both for wps in speeds[minute])
              for name, speeds in (("tree", tree), ("plain", plain))}
    return {"ratio": median["tree"] / median["plain"], "minutes": len(both)}


def config_setting(log: str, name: str, default: str | None = None) -> str:
    """A value of fairseq's logged configuration (``name='value'`` or ``'name': 'value'``); ``default`` for a log
    without it (an option added since)."""
    match = re.search(rf"(?:\b{name}=|'{name}': )('[^']*'|[\w.\-]+)", log)
    if not match and default is None:
        raise ValueError(f"no '{name}' in the training log's configuration")
    return match.group(1).strip("'") if match else default


def model_settings(log: str) -> dict:
    """The Tree Transformer's settings, from its training log's configuration."""
    return {"diagonal_zero": config_setting(log, "constituent_diagonal", "one") == "zero",
            "authors_optimiser": config_setting(log, "lr_scheduler") == "fixed",
            "precision": "bf16" if config_setting(log, "cpu_bf16_autocast") == "True" else "fp32",
            "size": (int(config_setting(log, "encoder_layers")), int(config_setting(log, "encoder_embed_dim"))),
            # "repeated": epoch 1's masks in every epoch (no FRESH_MASKS_LINE, batches loaded in a worker)
            "masks": "fresh" if FRESH_MASKS_LINE in log or config_setting(log, "num_workers") == "0" else "repeated"}


def training_summary(log: str) -> dict:
    pattern = (r"valid on 'valid' subset \| loss (?P<loss>[\d.]+) \| ppl [\d.]+ "
               r".*?\| num_updates (?P<updates>\d+)")
    valid = [match.groupdict() for match in re.finditer(pattern, log)]
    if not valid:
        raise ValueError("no validation line in the training log")
    best = min(valid, key=lambda row: float(row["loss"]))
    return {
        "params": one(r"num\. shared model params: ([\d,]+)", log, "parameter count"),
        "updates": one(r"num_updates (\d+)", log, "update count"),
        "seconds": wall_seconds(log),
        "words_per_second": median_words_per_second(log),
        "best_valid_loss": best["loss"], "best_at": best["updates"],
        "seed": int(config_setting(log, "seed")),
    }


def random_draws(subset_scores: dict) -> dict:
    """The random trees of one subset of an induce JSON, by draw (RANDOM_LABELS), those it holds."""
    return {draw: name for draw in RANDOM_LABELS for name in subset_scores if name.startswith(f"random, {draw} (")}


def recipe_run(logs: str) -> dict:
    """One run of run.sh (one logs folder): its settings, logs' numbers and scores."""
    name = os.path.basename(os.path.normpath(logs))
    run_scores = scores(logs)
    corpus_log = read(logs, "make_corpus.log")
    tree_log = read(logs, "train_tree_transformer_lm.log")
    settings = {
        "text": "ptb" if "train/ptb-lm" in corpus_log else "mixed",
        "transductive": "train/ptb-sample" in corpus_log,  # trained on the evaluation sentences' words
        "updates": int(one(r"--max-update (\d+)", command(tree_log), "update budget")),  # the last part's
        **model_settings(tree_log),
    }
    layers = settings["size"][0]
    seed = int(config_setting(tree_log, "seed"))
    reproduce = ("examples/ptb_induction/run.sh" + (" --text ptb" if settings["text"] == "ptb" else " --text mixed")
                 + ({8: " --model-size medium", 10: " --model-size paper"}.get(layers, ""))
                 + (" --eval-text" if settings["transductive"] and settings["text"] == "mixed" else "")
                 + (" --diagonal zero" if settings["diagonal_zero"] else "")
                 + (" --optimiser authors" if settings["authors_optimiser"] else "")
                 + (f" --seed {seed}" if seed != 1 else "")
                 + f" --precision {settings['precision']} --updates {settings['updates']}")
    preprocess = read(logs, "preprocess.log")
    parses = {label: score(run_scores, logs, file) for label, file in PARSES.items()}
    parses.update({f"layer {layer}": score(run_scores, logs, f"induce_layer{layer}.json") for layer in range(layers)})
    later = {label: run_scores.get(file) for label, (file, _) in LATER_PARSES.items()}
    commands = [current(command(read(logs, log))) for log in (
        "make_corpus.log", "preprocess.log", *(f"train_{arch}.log" for arch in SYSTEMS), "induce_paper.log",
        "induce_released.log", *(f"induce_min{m}.log" for m in (1, 3)),
        *(f"induce_layer{layer}.log" for layer in range(parses["m=2"]["layers"])), "constituent_prior.log",
        *(f"perplexity_{arch}.log" for arch in SYSTEMS))]
    return {
        "name": name, "label": f"`{name}/`", "by_hand": False, "settings": settings, "reproduce": reproduce,
        "corpus": json.loads(corpus_log[corpus_log.index("{"): corpus_log.rindex("}") + 1]),
        "vocabulary": int(one(r"Dictionary: (\d+) types", preprocess, "dictionary size")),
        "ptb_unk_replaced": float(one(r"ptb\.txt: \d+ sents, \d+ tokens, ([\d.]+)% replaced", preprocess,
                                      "PTB <unk> rate")),
        "training": {arch: training_summary(tree_log if arch == "tree_transformer_lm"
                                            else read(logs, f"train_{arch}.log")) for arch in SYSTEMS},
        "side_by_side": side_by_side_throughput(tree_log, read(logs, "train_roberta_prenorm.log")),
        "parses": parses,
        "later_parses": later,
        "perplexity": {arch: score(run_scores, logs, f"perplexity_{arch}.json") for arch in SYSTEMS},
        "commands": commands,
    }


def exploratory_runs(logs: str, specs: list) -> list:
    """The runs made by hand in one folder (EXPLORATORY)."""
    name = os.path.basename(os.path.normpath(logs))
    run_scores = scores(logs)
    runs = []
    for spec in specs:
        log = read(logs, spec["train"])
        training = training_summary(log)
        settings = {
            # the binarized corpus of run.sh --text mixed --eval-text (work-eval-text*/bin) holds the sample's words
            "transductive": "work-eval-text" in config_setting(log, "data"),
            "updates": int(training["updates"]),  # a time limit (--stop-time-hours) ended these runs
            **model_settings(log),
        }
        runs.append({
            "name": f"{name}#{spec['train'][len('train_'):-len('.log')]}", "by_hand": True,
            "label": f"`{name}/` C_ii = {0 if settings['diagonal_zero'] else 1} (by hand)", "settings": settings,
            "reproduce": f"by hand: `{name}/README.md`", "folder": name,
            "training": {"tree_transformer_lm": training},
            "parses": {label: score(run_scores, logs, file) for label, file in spec["parses"].items()},
            "perplexity": None, "readme_command": readme_command(logs),
            "commands": [current(command(read(logs, file[:-len(".json")] + ".log"))) for file in spec["parses"].values()],
        })
    return runs


def readme_command(logs: str) -> str:
    """The training command of the exploratory runs: the first fenced block of their folder's README.md."""
    text = read(logs, "README.md")
    match = re.search(r"^```\n(.*?)\n```", text, flags=re.MULTILINE | re.DOTALL)
    if not match:
        raise ValueError(f"{logs}/README.md has no fenced command block")
    return match.group(1)


# --- cells

def f1_cell(parse: dict, key: str = "sentence_f1", system: str = "Tree Transformer") -> Cell:
    """"all / <=10 words" F1 in % of one parse (``parse`` an induce JSON, or None: "–")."""
    if parse is None:
        return Cell(None, "–")
    values = [100 * subset[system][key] for subset in parse["subsets"].values()]
    return Cell(values, " / ".join(f"{value:.1f}" for value in values))


def kept(tables: dict, key: str, table: Table) -> list[str]:
    """``table``'s Markdown lines; its RESULTS.json form kept as ``tables[key]``."""
    tables[key] = table.json(lists=True)
    return table.lines()


def settings_cells(run: dict) -> list:
    s = run["settings"]
    text = "WSJ (ptb-lm)" if s.get("text") == "ptb" else "mixed"
    layers, width = s["size"]
    return [f"{text} " + ("+ PTB sample words" if s["transductive"] else "without the PTB sample"),
            Cell(layers * 10000 + width, f"{layers} x {width}"), 0 if s["diagonal_zero"] else 1,
            "authors'" if s["authors_optimiser"] else "recipe", s["precision"], s["updates"],
            "fresh" if s["masks"] == "fresh" else "**repeated**"]


def perplexity_ratio(run: dict):
    if not run["perplexity"]:
        return None
    tree, plain = (run["perplexity"][arch]["perplexity"] for arch in SYSTEMS)
    return tree / plain


def throughput_ratio(run: dict):
    """side_by_side_throughput's ratio; None for a run without it (made by hand, or not side by side)."""
    return (run.get("side_by_side") or {}).get("ratio")


def throughput_sentence(run: dict) -> str:
    side_by_side = run.get("side_by_side")
    if side_by_side is None:
        return ("Training throughput, Tree Transformer / Transformer: not measured (the two did not train at the "
                "same time for 10 minutes).")
    return (f"Training throughput, Tree Transformer / Transformer: {side_by_side['ratio']:.2f} (medians of fairseq's "
            f"logged tokens/s in the {side_by_side['minutes']} minutes in which both trained, one core each, so "
            "both saw the same load).")


SUMMARY = ["setting", "text", "transductive", "diagonal_zero", "authors_optimiser", "precision", "updates", "size",
           "masks", "seeds", "sentence_f1_all", "sentence_f1_le10", "corpus_f1_all", "perplexity_ratio",
           "throughput_ratio", "reproduce"]


def summary_row(run: dict) -> list:
    """One run as a machine-readable row (``SUMMARY``'s columns; a setting not logged: None): Algorithm 1 (m=2, the
    paper's rule), F1 in %."""
    tree = {subset: scores["Tree Transformer"] for subset, scores in run["parses"]["m=2"]["subsets"].items()}
    return [run["name"], *(run["settings"].get(key) for key in SUMMARY[1:9]),
            [run["training"]["tree_transformer_lm"]["seed"]], 100 * tree["all"]["sentence_f1"],
            100 * tree["<=10 words"]["sentence_f1"], 100 * tree["all"]["corpus_f1"], perplexity_ratio(run),
            throughput_ratio(run), run["reproduce"]]


# --- the document

def runs_table(runs: list) -> Table:
    table = Table(["run", "training text", "layers x d_model", "C_ii", "optimiser", "precision", "updates", "masks",
                   "Algorithm 1, m=2", "perplexity ratio", "throughput ratio"], "llrrllrlrrr")
    for run in runs:
        label = f"{run['key']}: " + (f"**{run['label']} (headline)**" if run is runs[0] else run["label"])
        table.add(Cell(run["name"], label), *settings_cells(run), f1_cell(run["parses"]["m=2"]),
                  number_cell(perplexity_ratio(run), ".3f"), number_cell(throughput_ratio(run), ".2f"))
    return table


def run_commands_section(runs: list) -> list[str]:
    """The command of each run (RESULTS.json: each row's ``reproduce``), a list: too long for a cell."""
    return ["Made by:", ""] + [f"- {run['key']}: " + (run["reproduce"].removeprefix("by hand: ") if run["by_hand"]
                                                     else f"`{run['reproduce']}`") for run in runs] + [""]


def training_table(runs: list) -> Table:
    table = Table(["run", "system", "parameters", "updates", "wall time", "tokens/s (median)", "best valid loss (bits)",
                   "at update"], "llrrrrrr")
    for run in runs:
        for arch, row in run["training"].items():
            table.add(run["key"], SYSTEMS[arch], Cell(int(row["params"].replace(",", "")), row["params"]),
                      int(row["updates"]), Cell(row["seconds"], f"{row['seconds'] / 60:.1f} min"),
                      number_cell(row["words_per_second"], ".0f"),
                      Cell(float(row["best_valid_loss"]), row["best_valid_loss"]), int(row["best_at"]))
    return table


def layers_table(runs: list) -> Table:
    layers = max(run["settings"]["size"][0] for run in runs)
    labels = list(PARSES) + [f"layer {layer}" for layer in range(layers)]
    table = Table(["run"] + labels + list(LATER_PARSES), "l" + "r" * (len(labels) + len(LATER_PARSES)))
    for run in runs:
        later = run.get("later_parses", {})
        table.add(run["key"], *(f1_cell(run["parses"].get(label)) for label in labels),
                  *(f1_cell(later.get(label), system=system) for label, (_, system) in LATER_PARSES.items()))
    return table


def agreement_table(runs: list) -> Table:
    layers = max(len(run["parses"]["m=2"]["link_agreement"]) for run in runs)
    table = Table(["run", "links"] + [f"layer {layer}" for layer in range(layers)], "ll" + "r" * layers)
    for run in runs:
        paper = run["parses"]["m=2"]
        shifted = paper.get("link_agreement_shifted", {})
        rows = [("a_k", paper["link_agreement"])]
        rows += [(f"a_{{k{offset}}}", shifted[offset]) for offset in ("-1", "+1") if offset in shifted]
        for label, values in rows:
            table.add(run["key"], label, *(Cell(rho, f"{rho:+.3f}") for rho in values),
                      *[Cell(None, "–")] * (layers - len(values)))
    return table


def perplexity_table(runs: list) -> Table:
    table = Table(["run", "system", "perplexity", "words scored", "`<unk>` words not scored"], "llrrr")
    for run in runs:
        for arch, name in SYSTEMS.items():
            result = run["perplexity"][arch]
            table.add(run["key"], name, Cell(result["perplexity"], f"{result['perplexity']:.1f}"),
                      *(number_cell(result[key], ",") for key in ("scored_words", "unknown_words")))
    return table


def unknown_words(run: dict) -> dict:
    """The PTB sample's words ``<unk>`` to the model: all, those the corpus writes ``<unk>``, the rest."""
    evaluation = run["corpus"]["eval/ptb-sample"]
    total = run["perplexity"]["tree_transformer_lm"]["unknown_words"]
    written = evaluation.get("unk", 0 if run["settings"]["text"] == "mixed" else None)
    if written is None:
        raise ValueError(f"{run['name']}/make_corpus.log: no <unk> count of eval/ptb-sample for the ptb text")
    return {"words": evaluation["words"], "total": total, "written": written, "under_threshold": total - written,
            "rate": 100 * total / evaluation["words"]}


def data_table(runs: list) -> Table:
    table = Table(["run", "training sentences", "training words", "vocabulary (types seen 3 times or more)",
                   "PTB sample words `<unk>` to the model", "written `<unk>` in the corpus",
                   "seen under 3 times in training", "fairseq's \"% replaced\" (the rate given before)"], "lrrrrrrr")
    for run in runs:
        train = [stats for name, stats in run["corpus"].items() if name.startswith("train/")]
        sentences, words = sum(s["sentences"] for s in train), sum(s["words"] for s in train)
        unknown = unknown_words(run)
        table.add(run["key"], Cell(sentences, f"{sentences:,}"), Cell(words, f"{words:,}"),
                  run["vocabulary"], Cell(unknown["rate"], f"{unknown['rate']:.2f}% ({unknown['total']:,})"),
                  Cell(unknown["written"], f"{unknown['written']:,}"),
                  Cell(unknown["under_threshold"], f"{unknown['under_threshold']:,}"),
                  Cell(run["ptb_unk_replaced"], f"{run['ptb_unk_replaced']:g}%"))
    return table


def headline_sections(run: dict, tables: dict) -> list:
    """The headline run: its data, trees (F1 and recall by label) and links; its training and perplexity are the
    first rows of the tables of every run."""
    corpus, s = run["corpus"], run["settings"]
    paper, released = run["parses"]["m=2"], run["parses"]["released"]
    data = (
        "Training text (words only; punctuation removed, lowercased, digits -> `N`, as the evaluation sentences): "
        + ", ".join(f"{name.split('/')[1]} {stats['sentences']:,} sentences / {stats['words']:,} words"
                    for name, stats in corpus.items() if name.startswith("train/"))
        + (". Validation: every 20th line of the ptb-lm text." if s["text"] == "ptb" else
           ". Validation: the Multi30k val, UD EWT dev and SST dev words.")
        + f" Evaluation: the {corpus['eval/ptb-sample']['sentences']:,} trees of the PTB sample wsj_0001-0159 "
        f"({unknown_words(run)['words']:,} words without punctuation and traces).")
    parts = {}
    subsets = list(paper["subsets"])
    draws = random_draws(paper["subsets"][subsets[0]])
    random_name = draws["uniform split"]
    rows = [("Tree Transformer, Algorithm 1 (m=2, threshold 0.8)", paper, "Tree Transformer"),
            ("Tree Transformer, released variant (descend above 0.7)", released, "Tree Transformer")]
    rows += [(name, paper, name) for name in BASELINES]
    rows += [(RANDOM_LABELS[draw].format(seeds=name[name.index("(") + 1:-len(" seeds)")]), paper, name)
             for draw, name in draws.items()]
    header = ["trees"]
    for subset in subsets:
        header += [f"{subset} ({paper['subsets'][subset][random_name]['sentences']} sent.) sentence F1",
                   f"{subset} corpus F1"]
    table = Table(header, "l" + "r" * (len(header) - 1))
    for label, result, system in rows:
        cells = []
        for subset in subsets:
            scores_ = result["subsets"][subset][system]
            cells += [Cell(100 * scores_[key], f"{100 * scores_[key]:.1f}") for key in ("sentence_f1", "corpus_f1")]
        table.add(label, *cells)
    parts["induction"] = "\n".join(kept(tables, "headline_induction", table))
    table = Table(["trees", *LABELS], "l" + "r" * len(LABELS))
    for label, result, system in rows:
        recall = result["subsets"][subsets[0]][system]["label_recall"]
        shares = [100 * recall[tag][0] / recall[tag][1] if tag in recall and recall[tag][1] else None
                  for tag in LABELS]
        table.add(label, *(Cell(share, f"{share:.1f}") if share is not None else Cell(None, "-") for share in shares))
    parts["recall"] = "\n".join(kept(tables, "headline_recall", table))
    tag_pairs = paper.get("links_by_tag_pair")
    if tag_pairs:
        layers = len(tag_pairs[0]["mean_links"])
        table = Table(["tags", "pairs", *(f"layer {layer}" for layer in range(layers)), "gold size"],
                      "lr" + "r" * layers + "r")
        for row in tag_pairs:
            table.add(" ".join(row["tags"]), row["count"], *(Cell(v, f"{v:.2f}") for v in row["mean_links"]),
                      Cell(row["median_gold_size"], f"{row['median_gold_size']:g}"))
        parts["recall"] += TAG_PAIRS + "\n".join(kept(tables, "headline_tag_pairs", table))
    precision = "bf16 autocast (`--cpu-bf16-autocast`, fp32 weights)" if s["precision"] == "bf16" else "fp32"
    return HEADLINE.format(**parts, data=data, precision=precision, throughput=throughput_sentence(run),
                           subset=subsets[0], figure=FIGURE, name=run["name"]).split("\n")


def differences(headline: dict) -> list:
    s = headline["settings"]
    text = ("the WSJ text at hand (`ptb-lm`, Mikolov's preprocessing) and the PTB sample's words (never its trees, "
            "the transductive setting); the paper trains on WSJ-train (about 40k sentences, 900k words) and parses "
            "WSJ-test, sentences it has not read"
            if s["text"] == "ptb" else
            "Multi30k captions, UD EWT web text and SST movie reviews" + (
                ", with the PTB sample's words (never its trees, the transductive setting)" if s["transductive"]
                else ", not WSJ: the PTB sentences are out of domain") + "; the paper trains on WSJ-train")
    diagonal = ("C_ii = 0 as in the authors' code (about 3e-5 there): a word attends only to the others; eq. 3 gives "
                "1 (an empty product), this recipe's default" if s["diagonal_zero"] else
                "C_ii = 1 (eq. 3, an empty product); the authors' code leaves it near 0 (`run.sh --diagonal zero`)")
    return DIFFERENCES.format(text=text, layers=s["size"][0], width=s["size"][1], ffn=4 * s["size"][1],
                              diagonal=diagonal).split("\n")


GOLD = "../shared/data/ptb-sample/wsj_0001-0159.mrg.gz"


def with_variables(lines: list, variables: dict) -> list:
    """Shell ``lines`` with each value of ``variables`` (in order) written ``$NAME``, after the lines that set them."""
    for name, value in variables.items():
        lines = [line.replace(value, f"${name}") for line in lines]
    return ["```", *(f"{name}={value}" for name, value in variables.items()), *lines, "```"]


def commands_section(headline: dict, runs: list) -> list:
    """The headline run's logged commands, then those of the runs made by hand, their folders, checkpoint and gold
    trees as shell variables."""
    lines = [
        "## Commands",
        "",
        f"The headline run's, the first line of each log (`{headline['name']}/NAME.log.gz`; modules by their "
        "current names: make_results.py's MOVED_MODULES):",
    ] + with_variables(headline["commands"], {
        "W": f"examples/ptb_induction/work{headline['name'][len('logs'):]}",
        "L": f"examples/ptb_induction/{headline['name']}",
        "T": "$W/checkpoints/tree_transformer_lm/checkpoint_best.pt", "G": GOLD})
    by_hand = [run for run in runs if run["by_hand"]]
    for folder in dict.fromkeys(run["folder"] for run in by_hand):
        in_folder = [run for run in by_hand if run["folder"] == folder]
        lines += ["", f"The runs made by hand in `{folder}/` (its README.md): training, `DIAG` = `one` or `zero`, and "
                  "the scoring of their trees:"]
        lines += with_variables([in_folder[0]["readme_command"]]
                                + [line for run in in_folder for line in run["commands"]],
                                {"W": "examples/ptb_induction/work-eval-text-diagonal-zero",
                                 "L": f"examples/ptb_induction/{folder}", "G": GOLD})
    return lines


def runs_of(here: str) -> list:
    """Every run kept beside this script: the headline, run.sh's others by folder, the ones made by hand."""
    folders = [path for path in packed_runs.glob(os.path.join(here, "logs*"))
               if not os.path.isfile(path) and os.path.basename(path) not in EXPLORATORY]
    complete = [path for path in folders if "perplexity_roberta_prenorm.json" in scores(path)]
    for path in sorted(set(folders) - set(complete)):
        print(f"make_results.py: {path} left out: no perplexity_roberta_prenorm.json (a run not finished)",
              file=sys.stderr)
    recipe = []
    for path in complete:
        try:
            recipe.append(recipe_run(path))
        except (ValueError, FileNotFoundError) as error:
            raise ValueError(f"{path}: {error}") from None
    if HEADLINE_RUN not in {run["name"] for run in recipe}:
        raise FileNotFoundError(f"the headline run {HEADLINE_RUN} is not kept in {here}")
    recipe.sort(key=lambda run: (run["name"] != HEADLINE_RUN, run["name"]))
    by_hand = [run for folder, specs in EXPLORATORY.items()
               for run in exploratory_runs(os.path.join(here, folder), specs)]
    return recipe + by_hand


# RESULTS.md's text around the tables (in these, a backslash ends a line of the code, not of the text)
INTRO = """\
# Tree Transformer: grammar induction on the PTB sample and masked-word perplexity

Generated by `python3 examples/ptb_induction/make_results.py` from the runs' logs and scores in `packed.tar.xz`
(`python3 fairseq_syntax/evaluation/packed_runs.py cat FILE` shows one); RESULTS.json: the tables, unrounded.
CPU only, one thread per process on 2 shared cores: wall times are indicative.

## Every run

Each run trains a Tree Transformer (Wang, Lee & Chen 2019) as a masked LM on raw text and a plain Transformer
(roberta_prenorm) of the same size beside it, then parses the PTB sample from the Tree Transformer's links.
Algorithm 1 (threshold 0.8, minimum layer m=2): sentence F1, %, all / <=10-word sentences; ratios: Tree
Transformer / Transformer masked-word perplexity and training tokens/s. Masks **repeated**: the run saw epoch 1's
masks in every epoch (fairseq-train's data-loader worker, kept across epochs, never got the epoch number;
`sentence_masked_lm` now keeps it in shared memory, so the commands below draw fresh masks).
"""
HEADLINE = """\
## The headline run (1)

{data} Masked LM (`sentence_masked_lm`, BERT masking 15% / 80-10-10), {precision} for both systems. {throughput}

### Grammar induction (unlabeled F1, %)

Scored by `fairseq_syntax.methods.tree_transformer.parseval` (PRPN / ON-LSTM): punctuation and traces removed by \
POS tag, single-word and whole-sentence spans discarded; sentence F1 is the mean over sentences (the paper's),
corpus F1 the micro average.

{induction}

Recall by gold label (%, {subset} sentences; the paper's Table 3):

{recall}

The paper (WSJ-test / WSJ-10, sentence F1): Tree Transformer L=10 trained on WSJ-train 49.5 / 66.2 (median of
runs), right-branching 39.8 / 56.6, left-branching 9.0 / 19.6, random 21.6 / 31.9; masked-word perplexity
(Table 4, 10 layers): Tree-T 45.7, Transformer 48.5, a ratio of 0.942.

Figure 5, the constituent prior C of every layer for the first PTB sentence: [`{figure}`]({figure})
(the command of `{name}/constituent_prior.log.gz`)."""
TAG_PAIRS = """

Mean link a_k per layer of the most frequent POS tag pairs of adjacent words (by their mean over layers), and the
median size of the smallest gold constituent holding both (2: a two-word constituent such as `the board`):

"""
DETAIL = """
## Every run in detail (numbered as above)

### Training

{training}

### Which layers hold the structure (the paper's Figure 4)

Sentence F1 (%, all / <=10 words): Algorithm 1 from minimum layer m, the released variant (descend above 0.7),
top-down greedy parsing from one layer's links (split at the weakest link), the rule chosen on every 10th sentence
and m=2, both scored on the other 90%, m=2 without `</s>`; –: not scored so.

{parses}

### What the links learnt

Spearman's rho (all sentences, every pair of adjacent words) between link a_k and minus the size of the smallest
gold constituent holding both words (`fairseq_syntax/methods/tree_transformer/link_agreement.py`): +1 = the gold
ranking, < 0 = links that cut gold constituents; a_{{k-1}}, a_{{k+1}}: the link one pair left or right.

{link_agreement}

### Masked-word perplexity (section 7.5: every word masked once, one at a time)

Words `<unk>` to the model are not scored; both systems of a run share the dictionary.

{perplexity}

### Data

`<unk>` to the model: written `<unk>` by the corpus (Mikolov's 10k vocabulary; none in the mixed text) or seen
under 3 times in training; fairseq-preprocess's "% replaced" counts only the latter, over tokens with `</s>`. The
runs made by hand used the data of `run.sh --text mixed --eval-text --diagonal zero`.

{data}
"""
DIFFERENCES = """\
## How this differs from the paper

- Training text: {text}.
- Size: {layers} layers, d_model {width}, 4 heads, FFN {ffn}, word-level vocabulary, the updates above on a shared
  CPU (the paper: 10 layers, d_model 512, 8 heads, WordPiece 16k, to convergence on a GPU).
- Evaluation: the PTB sample (WSJ files 0001-0159, sections 00-01), not WSJ-test (section 23); the paper's
  sentence-level F1 and rules (ON-LSTM's).
- {diagonal}. Link scores are scaled by d_model / 2 as in the paper.
"""


def render(runs: list) -> tuple:
    headline = runs[0]
    for number, run in enumerate(runs, 1):
        run["key"] = number
    recipe = [run for run in runs if not run["by_hand"]]
    tables = {}
    lines = INTRO.split("\n") + runs_table(runs).lines() + [""]  # its values: RESULTS.json's rows
    lines += run_commands_section(runs) + headline_sections(headline, tables)
    detail = {key: "\n".join(kept(tables, key, table)) for key, table in (
        ("training", training_table(runs)), ("parses", layers_table(runs)), ("link_agreement", agreement_table(runs)),
        ("perplexity", perplexity_table(recipe)), ("data", data_table(recipe)))}
    lines += DETAIL.format(**detail).split("\n") + differences(headline) + commands_section(headline, runs)
    data = {
        "generated_by": "examples/ptb_induction/make_results.py (tables by fairseq_syntax.evaluation.tables)",
        "units": "as in RESULTS.md, unrounded, except: wall time in seconds; an \"a / b\" F1 cell is [all, <=10 "
                 "words]; a table's run: its number, its row of rows counted from 1",
        "headline": headline["name"],
        "figure": FIGURE,
        "tables": tables,
        "rows": table_json(SUMMARY, map(summary_row, runs), lists=True),
    }
    return "\n".join(lines) + "\n", data


# --- compressing a run folder

def compress_run(logs: str) -> None:
    """What run.sh does once a run is scored: gzip every ``*.log`` of ``logs`` and move every ``*.json`` into
    ``scores.json.gz`` (merged with those there), with paths made portable (``portable_paths``)."""
    bundle = os.path.join(logs, SCORES)
    found = portable_paths(scores(logs), root=REPO)
    if found:
        with open_text(bundle, "w") as handle:
            json.dump(dict(sorted(found.items())), handle, indent=1, ensure_ascii=False)
            handle.write("\n")
    for path in glob.glob(os.path.join(logs, "*.json")):
        os.remove(path)
    for path in glob.glob(os.path.join(logs, "*.log")):
        make_log_portable(path, root=REPO)
        compress(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--here", default=HERE, help="the folder of the runs (logs*/) and of RESULTS.md")
    parser.add_argument("--out", help="RESULTS.md to write, RESULTS.json beside it (default: HERE/RESULTS.md)")
    parser.add_argument("--compress", metavar="LOGS", help="only compress the run folder LOGS (see compress_run)")
    args = parser.parse_args()
    if args.compress:
        compress_run(args.compress)
        return
    try:
        markdown, data = render(runs_of(args.here))
    except (ValueError, FileNotFoundError) as error:
        sys.exit(f"make_results.py: error: {error}")
    write_results(args.out or os.path.join(args.here, "RESULTS.md"), markdown, data)


if __name__ == "__main__":
    main()
