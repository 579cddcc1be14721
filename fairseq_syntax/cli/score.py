"""fairseq-syntax-score: BLEU-4/BLEU-1/chrF/TER/RIBES of fairseq-generate output, with paired bootstrap p-values.

Every reference needs its hypothesis (missing ids are named and nothing is scored). Comma-separated files are one a
seed: the scores are then the mean and sd over seeds, the p-values the paired bootstrap's over sentences and seeds
(scoring.seed_bootstrap) with Welch's t-test beside it. A record names no folder of this machine: paths under
``--out-dir`` are written ``OUT_DIR/...``, those under ``--repo-root`` relative to it."""
import argparse
import json
import logging
import os
import re
import sys
from pathlib import Path

from fairseq_syntax.evaluation import packed_runs
from fairseq_syntax.evaluation.kept_files import RecordError
from fairseq_syntax.evaluation.records import load_record, record_run
from fairseq_syntax.evaluation.run_commands import command_fields
from fairseq_syntax.evaluation.scoring import (
    SEED_BOOTSTRAP_ROUNDS,
    ScoringInputError,
    bleu_by_length,
    check_length_edges,
    corpus_scores,
    detokenize,
    drop_skipped,
    paired_bootstrap,
    read_generate_output,
    seed_bootstrap,
    seed_scores,
    skipped_line_numbers,
)
from fairseq_syntax.parsing.text import write_json

TABLE_METRICS = ("BLEU", "BLEU-1", "chrF", "TER", "RIBES")
ONE_RUN_BOOTSTRAP_ROUNDS = 1000  # sacrebleu's paired bootstrap of one run against another
RECORD_OPTIONS = ("dataset", "system", "arch", "train_log")


def source_checkout() -> str | None:
    """The repository this package runs from (an editable install or the checkout itself), else None."""
    root = Path(__file__).resolve().parents[2]
    return str(root) if (root / "setup.py").is_file() and (root / "fairseq_syntax").is_dir() else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fairseq-syntax-score", description=__doc__.split("\n\n")[0])
    parser.add_argument("hyp", help="system output: fairseq-generate stdout or plain text")
    parser.add_argument("ref", help="references: plain text, or fairseq-generate stdout (its T- lines)")
    parser.add_argument("baselines", nargs="*", metavar="BASELINE",
                        help="other systems (e.g. the baselines); p-values are of HYP against each")
    parser.add_argument("--tok", action="store_true",
                        help="tokenized BLEU: take H- lines (tokenized, BPE removed) and score with sacrebleu's "
                             "'none' tokenizer against an already tokenized REF")
    parser.add_argument("--lang", help="Moses-detokenize the hypotheses (H- lines or plain text) in this language "
                                       "first, for output generated without --tokenizer moses")
    parser.add_argument("--json", dest="json_out", help="write all scores (and p-values) to this JSON file")
    parser.add_argument("--bootstrap", type=int, metavar="N",
                        help="paired bootstrap resamples when BASELINE is given (default: 1000 for one run, "
                             f"{SEED_BOOTSTRAP_ROUNDS} over several seeds: scoring.SEED_BOOTSTRAP_ROUNDS)")
    parser.add_argument("--seed", type=int, default=12345, help="bootstrap seed (default 12345)")
    parser.add_argument("--skipped", metavar="SKIPPED_TSV",
                        help="the {split}.skipped.tsv fairseq-syntax-preprocess --skip-invalid wrote for this split: "
                             "its lines are left out of REF, whose other lines then align with the generated ids")
    parser.add_argument("--by-length", metavar="EDGES",
                        help="also BLEU per reference-length interval, e.g. 10,20,30,40,50 for "
                             "(0,10], ..., (50,inf)")
    record = parser.add_argument_group("run record (see fairseq_syntax.evaluation.records)")
    record.add_argument("--record", metavar="RUN_JSON", help="write a run record for HYP to this file")
    record.add_argument("--dataset")
    record.add_argument("--system", help="name of HYP's system in the results table")
    record.add_argument("--arch")
    record.add_argument("--train-log", help="fairseq-train log of HYP's system (updates, wall time)")
    record.add_argument("--train-command", metavar="ARGV_JSON",
                        help="the training command as it was run: a JSON file holding its words, program first "
                             "(over --run-seeds: the first seed's record's)")
    record.add_argument("--baseline-name", dest="baseline_names", action="append", default=[],
                        help="name of each BASELINE's system, in order (default: its path)")
    record.add_argument("--run-seed", type=int, help="the training seed of HYP's run")
    record.add_argument("--run-seeds", help="the training seeds of comma-separated HYP files, in their order, e.g. "
                                            "1,2,3")
    record.add_argument("--decode-command", metavar="ARGV_JSON",
                        help="the command that decoded HYP (one seed's, for several): a JSON file holding its words")
    record.add_argument("--out-dir",
                        help="the run's output folder (data, checkpoints): written as OUT_DIR in the record")
    record.add_argument("--repo-root", default=source_checkout(),
                        help="the repository: paths under it are written relative to it in the record (default: "
                             "the checkout this package runs from)")
    record.add_argument("--device", help="what HYP's system was trained on, e.g. 'NVIDIA H100' or 'cpu'")
    record.add_argument("--parsers", metavar="PARSERS_JSON",
                        help="the parsers that made the source-side syntax of HYP's training data (DATA/parsers.json "
                             "of a study's data, see fairseq_syntax.parsing.provenance)")
    return parser


def _read_system(path: str, n_refs: int, ref_path: str, args) -> list[str]:
    field = "H" if (args.tok or args.lang) else "D"
    hyps = read_generate_output(path, expected_ids=n_refs, field=field, expected_from=ref_path)
    return detokenize(hyps, args.lang) if args.lang else hyps


def _read_seeds(paths: str, n_refs: int, ref_path: str, args) -> list[list[str]]:
    """The outputs of one system, one per seed: ``paths`` is one file or comma-separated files."""
    return [_read_system(path, n_refs, ref_path, args) for path in paths.split(",")]


def _main_over_seeds(args, refs: list[str], tokenize: str, names: list[str]) -> dict:
    """Mean and sd over seeds; p-values of the bootstrap over sentences and seeds against each baseline's seeds."""
    hyps = _read_seeds(args.hyp, len(refs), args.ref, args)
    scores = seed_scores(hyps, refs, tokenize)
    per_seed_metrics = {name: [seed[name] for seed in scores["per_seed"]] for name in scores["sd"]}
    report = {"hyp": args.hyp, "ref": args.ref, "seeds": len(hyps), "metrics": scores["mean"],
              "metrics_sd": scores["sd"], "per_seed": scores["per_seed"], "per_seed_metrics": per_seed_metrics,
              "baselines": {}, "significance": {}}
    if args.run_seeds:
        report["seed_list"] = [int(seed) for seed in args.run_seeds.split(",")]
    rows = [(args.system or args.hyp, scores["mean"])]
    for name, paths in zip(names, args.baselines):
        baseline = _read_seeds(paths, len(refs), args.ref, args)
        baseline_scores = seed_scores(baseline, refs, tokenize)
        report["baselines"][name] = {"hyp": paths, "metrics": baseline_scores["mean"],
                                     "metrics_sd": baseline_scores["sd"]}
        rows.append((name, baseline_scores["mean"]))
        report["significance"][name] = seed_bootstrap(baseline, hyps, refs, n_samples=args.bootstrap,
                                                      seed=args.seed, tokenize=tokenize)
    print(f"mean over {len(hyps)} seeds (sd: " + ", ".join(f"{m} {scores['sd'][m]:.2f}" for m in TABLE_METRICS)
          + ")")
    _print_table(rows, report["significance"], None)
    return report


def _print_table(rows, significance: dict, by_length) -> None:
    width = max(len(name) for name, _ in rows)
    print(" " * width + "".join(f"{name:>9}" for name in TABLE_METRICS))
    for name, scores in rows:
        print(f"{name:<{width}}" + "".join(f"{scores[m]:9.2f}" for m in TABLE_METRICS))
    first = rows[0][1]
    print(f"tokenize: {first['tokenize']}, {first['n_sentences']} sentences")
    for baseline, test in significance.items():
        print(f"p-value of {rows[0][0]} vs {baseline} ({test['test']}, {test['n_samples']} "
              f"samples): BLEU {test['BLEU']['p_value']:.4f}, chrF {test['chrF']['p_value']:.4f}")
    if by_length:
        print("BLEU by reference length: " + ", ".join(
            f"{row['bucket']} {'-' if row['BLEU'] is None else format(row['BLEU'], '.2f')} (n={row['n_sentences']})"
            for row in by_length["hyp"]))


def main(argv: list[str] | None = None) -> dict:
    """Score, print the table, write --json / --record; returns the JSON report."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # sacrebleu logs every bootstrap step at INFO; the table below reports the result.
    logging.getLogger("sacrebleu").setLevel(logging.WARNING)
    if args.tok and args.lang:
        parser.error("--tok scores tokenized text; --lang detokenizes it: use one")
    # over --run-seeds, the seeds' commands, device and parsers are the first seed's record's (records.SEED_FACTS)
    needed = RECORD_OPTIONS + (() if args.run_seeds else ("train_command",))
    if args.record and not all(getattr(args, option) for option in needed):
        parser.error("--record needs " + ", ".join("--" + o.replace("_", "-") for o in needed))
    if args.record and not os.path.exists(args.record) and (packed := packed_runs.find_member(args.record)):
        # a rescore of a packed run would leave two records of it, the new one beside the stale packed one
        parser.error(f"--record {args.record}: its run is packed ({packed.label}): unpack it first (python3 "
                     "examples/pack_runs.py unpack RUNS_DIR NAME)")
    if args.record:  # the commands a record holds, read before anything is scored
        args.train_argv = read_argv(args.train_command) if args.train_command else None
        args.decode_argv = read_argv(args.decode_command) if args.decode_command else None
    if len(args.baseline_names) > len(args.baselines):
        parser.error("more --baseline-name than BASELINE files")
    if args.run_seeds and (not re.fullmatch(r"\d+(,\d+)*", args.run_seeds)
                           or args.run_seeds.count(",") != args.hyp.count(",")):
        parser.error(f"--run-seeds takes one seed per HYP file, comma-separated like HYP, got {args.run_seeds!r}")
    # over seeds when any side has several, or --run-seeds names HYP's
    over_seeds = any("," in paths for paths in (args.hyp, *args.baselines)) or bool(args.run_seeds)
    if args.bootstrap is None:  # the seed-aware test's p-values need more rounds to hold (mc_standard_error)
        args.bootstrap = SEED_BOOTSTRAP_ROUNDS if over_seeds else ONE_RUN_BOOTSTRAP_ROUNDS
    if args.baselines and (args.bootstrap <= 0 or args.seed <= 0):
        parser.error("--bootstrap and --seed must be positive (sacrebleu treats seed 0 as unseeded)")
    edges = None
    if args.by_length:
        try:
            edges = [int(edge) for edge in args.by_length.split(",")]
            check_length_edges(edges)
        except ValueError:
            parser.error(f"--by-length takes increasing positive integers like 10,20,30, got {args.by_length!r}")

    refs = read_generate_output(args.ref, field="T")
    names = args.baseline_names + args.baselines[len(args.baseline_names):]
    if args.skipped:
        skipped = skipped_line_numbers(args.skipped)
        refs = drop_skipped(refs, skipped, args.skipped)
        print(f"{len(skipped)} reference lines that fairseq-syntax-preprocess skipped ({args.skipped}) are left out; "
              f"{len(refs)} scored")
    if not refs:  # sacrebleu has no score of zero segments (an IndexError)
        raise ScoringInputError(f"{args.ref}: no references to score" + (
            f": all of them are left out by --skipped {args.skipped}" if args.skipped else " (an empty file)"))
    tokenize = "none" if args.tok else "13a"
    if over_seeds:
        if edges:
            parser.error("--by-length scores one run of each system; give one HYP file and one of each BASELINE")
        report = _main_over_seeds(args, refs, tokenize, names)
        _write_outputs(args, report)
        return report
    hyps = _read_system(args.hyp, len(refs), args.ref, args)
    report = {"hyp": args.hyp, "ref": args.ref, "metrics": corpus_scores(hyps, refs, tokenize)}
    rows = [(args.system or args.hyp, report["metrics"])]
    significance, report["baselines"] = {}, {}
    if edges:
        report["by_length"] = {"hyp": bleu_by_length(hyps, refs, edges, tokenize)}
    for name, path in zip(names, args.baselines):
        baseline_hyps = _read_system(path, len(refs), args.ref, args)
        report["baselines"][name] = {"hyp": path, "metrics": corpus_scores(baseline_hyps, refs, tokenize)}
        rows.append((name, report["baselines"][name]["metrics"]))
        significance[name] = paired_bootstrap(baseline_hyps, hyps, refs, n_samples=args.bootstrap, seed=args.seed,
                                              tokenize=tokenize)
        if edges:
            report["by_length"][name] = bleu_by_length(baseline_hyps, refs, edges, tokenize)
    report["significance"] = significance

    _print_table(rows, significance, report.get("by_length"))
    _write_outputs(args, report)
    return report


def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise RecordError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None


def read_argv(path: str) -> list[str]:
    """The command a JSON file holds: a list of its words (strings), program first."""
    words = _read_json(path)
    if not (isinstance(words, list) and words and all(isinstance(word, str) for word in words)):
        raise RecordError(f"{path}: a command is a JSON list of its words (strings), program first")
    return words


def _write_outputs(args, report: dict) -> None:
    """--json and --record of a report (one run, or a system over seeds)."""
    if args.json_out:
        write_json(args.json_out, report, indent=2, ensure_ascii=False)
    if args.record:
        facts = {"device": args.device, "parsers": _read_json(args.parsers) if args.parsers else None}
        if os.path.exists(args.record) and not args.run_seeds:  # a rescore: the training's facts stay unless given
            previous = load_record(args.record)
            facts = {key: previous.get(key) if value is None else value for key, value in facts.items()}
        commands = {**(command_fields("decode_command", args.decode_argv) if args.decode_argv else {}),
                    **command_fields("score_command", score_command(args))}
        extra = {key: value for key, value in (("seed", args.run_seed), *facts.items(), *commands.items(),
                                                ("seeds", report.get("seeds")), ("seed_list", report.get("seed_list")),
                                                ("metrics_sd", report.get("metrics_sd")),
                                                ("per_seed_metrics", report.get("per_seed_metrics")))
                 if value is not None}
        record_run(args.record, dataset=args.dataset, system=args.system, arch=args.arch,
                   command=args.train_argv, train_log=args.train_log, metrics=report["metrics"],
                   significance=report["significance"], by_length=report.get("by_length", {}).get("hyp"),
                   out_dir=args.out_dir, root=args.repo_root, **extra)


def score_command(args) -> list[str]:
    """The scoring as a command's words: the inputs and the options that change a score or a p-value."""
    words = ["fairseq-syntax-score", args.hyp, args.ref, *args.baselines]
    words += [option for option, on in (("--tok", args.tok),) if on]
    for option, value in (("--lang", args.lang), ("--skipped", args.skipped), ("--by-length", args.by_length),
                          ("--bootstrap", args.bootstrap if args.baselines else None),
                          ("--seed", args.seed if args.baselines else None)):
        if value is not None:
            words += [option, str(value)]
    for name in args.baseline_names:
        words += ["--baseline-name", name]
    return words


def cli_main() -> None:
    try:
        main()
    except (ScoringInputError, RecordError, packed_runs.PackedRunsError, OSError) as error:
        sys.exit(f"fairseq-syntax-score: error: {error}")


if __name__ == "__main__":
    cli_main()
