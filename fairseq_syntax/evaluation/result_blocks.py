"""Result numbers in the README and the docs, generated: marked blocks of a Markdown file rewritten from a RESULTS.json.

``tests/core/test_result_blocks.py`` checks every committed block against its RESULTS.json, and that no result number
stands outside such a block. A block is its first line (:func:`begin_line`: the RESULTS.json as the Markdown file's
folder reaches it and, in brackets, the kind and its arguments), what ``python -m
fairseq_syntax.evaluation.result_blocks FILE`` writes, and :data:`END`. The kinds:

* ``comparisons [dataset=NAME] [SYSTEM ...]``: one line per comparison of a seeds table's answer
  (:mod:`~fairseq_syntax.evaluation.study_answer`) whose first system is listed (none: every one).
* ``runaway [SYSTEM ...]``: the study report's runaway hypotheses (:mod:`~fairseq_syntax.evaluation.runaway`).
* ``induction``: the Tree Transformer's grammar induction (``examples/ptb_induction/RESULTS.json``)."""
import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from fairseq_syntax.evaluation.runaway import source_lengths_text, system_runs
from fairseq_syntax.evaluation.seed_systems import seeds_dataset
from fairseq_syntax.evaluation.study_answer import p_text, verdict_text
from fairseq_syntax.evaluation.tables import load_results_json, markdown_table, table_rows

MODULE = "fairseq_syntax.evaluation.result_blocks"
BEGIN = "<!-- results: generated from "
END = "<!-- end of the generated results -->"
#: the first line of a block: the RESULTS.json, then the kind and its arguments in brackets
BEGIN_LINE = re.compile(r"<!-- results: generated from (?P<path>\S+) \((?P<spec>[^()]*)\) by .* -->")


def begin_line(path: str, spec: str) -> str:
    """A block's first line for the RESULTS.json at ``path`` and ``spec`` (e.g. ``comparisons dbsa``)."""
    return (f"{BEGIN}{path} ({spec}) by `python -m {MODULE} FILE`; tests/core/test_result_blocks.py checks it -->")


def _signed_interval(interval: Sequence[float] | None) -> str:
    return f"{interval[0]:+.2f} to {interval[1]:+.2f}; " if interval else ""


def _comparison_line(system: str, found: dict | None, metrics: Sequence[str], against: str | None = None) -> str:
    """``- **dbsa** vs sequence (5 vs 5 seeds): BLEU +1.12 (+0.29 to +1.95; p 0.011±0.001, t 0.006), ...:
    **better**`` of one comparison of the answer's JSON; ``against`` names the other system while there is none."""
    if not found:
        return f"- **{system}** vs {against}: not compared yet (waiting for the seeds of one side)"
    parts = [f"{metric} {found[metric]['delta']:+.2f} ({_signed_interval(found[metric]['delta_ci'])}"
             f"{p_text(found[metric])})" for metric in metrics]
    seeds = " vs ".join(map(str, found["seeds"]))
    return f"- **{system}** vs {found['against']} ({seeds} seeds): {', '.join(parts)}: {verdict_text(found, bold=True)}"


def comparison_lines(results: dict[str, Any], systems: Sequence[str] = (), dataset: str | None = None) -> list[str]:
    """The ``comparisons`` block (module docstring) of a seeds table of ``results`` (RESULTS.json's object)."""
    dataset, entry = seeds_dataset(results, dataset)
    answer = entry.get("answer")
    if not isinstance(answer, dict) or "systems" not in answer or "comparisons" not in entry:
        raise ValueError(f"no answer for dataset {dataset!r} (written by fairseq-syntax-results of this version)")
    metrics = entry["comparisons"].get("metrics") or ["BLEU", "chrF"]
    known = [method["system"] for method in answer["systems"]] + [control["system"] for control in answer["controls"]]
    unknown = [system for system in systems if system not in known]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: no row of dataset {dataset!r} (its rows: {', '.join(known)})")
    wanted = set(systems or known)
    baseline = entry["comparisons"].get("baseline")
    lines = [f"Each comparison of {dataset}: per metric, the difference of the means over seeds (first system minus "
             "second) with its 95% interval, the seed-aware bootstrap's p ± its Monte-Carlo error and Welch's t-test's "
             "p (t); then the verdict.", ""]
    for method in answer["systems"]:
        if method["system"] not in wanted:
            continue
        if baseline:
            lines.append(_comparison_line(method["system"], method["vs_baseline"], metrics, baseline))
        for control in method["controls"]:
            if control["control"] in answer["no_run_finished"]:
                lines.append(f"- **{method['system']}** vs {control['control']}: no run of {control['control']} yet")
            else:
                lines.append(_comparison_line(method["system"], control["comparison"], metrics, control["control"]))
    lines += [_comparison_line(control["system"], control["vs_baseline"], metrics, baseline)
              for control in answer["controls"] if control["system"] in wanted and baseline]
    return lines


def runaway_lines(results: dict[str, Any], systems: Sequence[str] = ()) -> list[str]:
    """The ``runaway`` block (module docstring) of ``results`` (RESULTS.json's object of a study report)."""
    info = results.get("runaway_hypotheses")
    if not isinstance(info, dict) or "runs" not in info:
        raise ValueError("no runaway_hypotheses in these results (written by fairseq-syntax-study report)")
    unknown = [system for system in systems if system not in info["runs"]]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: no runs in runaway_hypotheses (its systems: "
                         f"{', '.join(info['runs'])})")
    looping, repeated = len(info["sentences"]), len(info["shared_in_two_or_more"])
    text = (f"{looping} test sentence{'' if looping == 1 else 's'} ran away (looped up to the length cap) in some run, "
            f"{repeated} of them in two runs or more; over all pairs of runs, {info['pairs_shared']} runaway "
            f"sentences are shared, where runs that loop independently of their inputs would share "
            f"{info['pairs_expected_by_chance']:.1f}.")
    lengths = info.get("source_lengths")
    if lengths:
        text += f" {source_lengths_text(lengths)}"
    lines = [text]
    if systems:
        lines.append("")
    for system in systems:
        runs = system_runs(info, system)
        counts = " / ".join(str(run["count"]) for run in runs.values())
        bleu = ", ".join(f"{run['BLEU']:.2f} -> {run['BLEU_cut']:.2f}" for run in runs.values())
        ratios = ", ".join(f"{run['length_ratio']:.3f} -> {run['length_ratio_cut']:.3f}" for run in runs.values())
        lines.append(f"- **{system}**, seeds {' / '.join(runs)}: runaway hypotheses {counts}; BLEU as decoded -> "
                     f"with each runaway cut to its reference's length {bleu}; length ratio {ratios}")
    return lines


def induction_lines(results: dict[str, Any]) -> list[str]:
    """The ``induction`` block (module docstring) of ``results`` (examples/ptb_induction/RESULTS.json's object)."""
    try:
        headline, baselines = results["headline"], results["tables"]["headline_induction"]
        rows = table_rows(results["rows"])
    except (KeyError, TypeError):
        raise ValueError("not the results of examples/ptb_induction/make_results.py (no headline, rows and "
                         "tables.headline_induction)") from None
    columns = baselines["columns"]
    every, short = columns[1], columns[3]  # sentence F1 over all sentences, over those of <=10 words
    header = ["trees", every, short, "masked-word perplexity / the plain Transformer's"]
    table = []
    for row in rows:
        if row["masks"] != "fresh":
            continue
        layers, width = row["size"]
        name = (f"Tree Transformer {layers} x {width}, {row['updates']:,} updates (`{row['setting']}/`"
                f"{', the headline' if row['setting'] == headline else ''})")
        ratio = row.get("perplexity_ratio")
        table.append([name, f"{row['sentence_f1_all']:.1f}", f"{row['sentence_f1_le10']:.1f}",
                      "–" if ratio is None else f"{ratio:.3f}"])
    for row in table_rows(baselines):
        if not row["trees"].startswith("Tree Transformer"):
            table.append([row["trees"], f"{row[every]:.1f}", f"{row[short]:.1f}", "–"])
    return markdown_table(header, table, align="lrrr")


def _arguments(args: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """``dataset=NAME`` options and the systems of a block's arguments."""
    options = dict(arg.split("=", 1) for arg in args if "=" in arg)
    return options, [arg for arg in args if "=" not in arg]


def _comparisons(results: dict[str, Any], args: Sequence[str]) -> list[str]:
    options, systems = _arguments(args)
    unknown = set(options) - {"dataset"}
    if unknown:
        raise ValueError(f"comparisons takes dataset=NAME and system names, not {', '.join(sorted(unknown))}=")
    return comparison_lines(results, systems, options.get("dataset"))


def _runaway(results: dict[str, Any], args: Sequence[str]) -> list[str]:
    options, systems = _arguments(args)
    if options:
        raise ValueError(f"runaway takes system names only, not {', '.join(sorted(options))}=")
    return runaway_lines(results, systems)


def _induction(results: dict[str, Any], args: Sequence[str]) -> list[str]:
    if args:
        raise ValueError(f"induction takes no arguments, not {' '.join(args)}")
    return induction_lines(results)


#: each kind of block: what it writes from (RESULTS.json's object, the arguments of its first line)
KINDS: dict[str, Callable[[dict[str, Any], Sequence[str]], list[str]]] = {
    "comparisons": _comparisons, "runaway": _runaway, "induction": _induction}


class Block(NamedTuple):
    """One marked block of a Markdown file: its first and last line (0-based indices), RESULTS.json's path as the
    file reaches it, its kind and arguments."""
    begin: int
    end: int
    path: str
    kind: str
    args: tuple[str, ...]


def find_blocks(lines: Sequence[str], name: str) -> list[Block]:
    """The blocks of a Markdown file's ``lines`` (``name``: the file, for errors); a first line that does not parse,
    a kind not in :data:`KINDS`, a block without its last line or one inside another is a ValueError naming
    ``name`` and the line."""
    blocks, begin = [], None
    for index, line in enumerate(lines):
        if line.startswith(BEGIN):
            if begin is not None:
                raise ValueError(f"{name}:{index + 1}: a results block begins inside the one of line {begin + 1}")
            found = BEGIN_LINE.fullmatch(line)
            if not found:
                raise ValueError(f"{name}:{index + 1}: a results block's first line must read "
                                 f"{begin_line('RESULTS.json', 'KIND ARG ...')!r}")
            spec = found["spec"].split()
            if not spec or spec[0] not in KINDS:
                raise ValueError(f"{name}:{index + 1}: unknown kind of results block {found['spec']!r} (the kinds: "
                                 f"{', '.join(KINDS)})")
            begin, path, kind, args = index, found["path"], spec[0], tuple(spec[1:])
        elif line == END:
            if begin is None:
                raise ValueError(f"{name}:{index + 1}: {END} without its first line")
            blocks.append(Block(begin, index, path, kind, args))
            begin = None
    if begin is not None:
        raise ValueError(f"{name}:{begin + 1}: a results block without its last line {END!r}")
    return blocks


def block_lines(block: Block, folder: Path, name: str) -> list[str]:
    """What ``block`` holds between its markers, from its RESULTS.json (read from ``folder``); one that cannot be
    read or lacks what the kind needs is a ValueError naming ``name``, the block's line and the RESULTS.json."""
    where = f"{name}:{block.begin + 1}"
    try:
        results = load_results_json(folder / block.path, datasets=False)
    except OSError as error:
        raise ValueError(f"{where}: {folder / block.path}: {error.strerror or error}") from None
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    try:
        return KINDS[block.kind](results, block.args)
    except (KeyError, TypeError) as error:  # a RESULTS.json of another generator, or of another version
        raise ValueError(f"{where}: {folder / block.path}: not what a {block.kind} block reads ({error!r} "
                         "missing or of another type)") from None
    except ValueError as error:
        raise ValueError(f"{where}: {folder / block.path}: {error}") from None


def rewrite(text: str, folder: Path, name: str) -> str:
    """``text`` (a Markdown file in ``folder``; ``name``: it, for errors) with every block's lines regenerated."""
    lines = text.split("\n")
    out, start = [], 0
    for block in find_blocks(lines, name):
        out += lines[start:block.begin + 1] + block_lines(block, folder, name)
        start = block.end
    return "\n".join(out + lines[start:])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {MODULE}",
        description="Rewrite the generated results blocks of Markdown files from the RESULTS.json each names "
                    "(kinds: comparisons, runaway, induction; see the module's docstring).")
    parser.add_argument("files", nargs="+", help="Markdown files (README.md, docs/results.md, ...)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; name each file whose blocks differ from what their RESULTS.json gives "
                             "(exit status 1)")
    args = parser.parse_args(argv)
    try:
        texts = {name: Path(name).read_text(encoding="utf-8") for name in args.files}
        updated = {name: rewrite(text, Path(name).parent, name) for name, text in texts.items()}
    except (OSError, ValueError) as error:
        sys.exit(f"result_blocks: error: {error}")
    stale = [name for name in args.files if updated[name] != texts[name]]
    if args.check:
        for name in stale:
            print(f"{name}: results blocks differ from their RESULTS.json (python -m {MODULE} {name} rewrites them)")
        return 1 if stale else 0
    for name in args.files:
        if name in stale:
            Path(name).write_text(updated[name], encoding="utf-8")
        count = len(find_blocks(texts[name].split("\n"), name))
        print(f"{name}: {count} results block{'' if count == 1 else 's'} "
              f"{'rewritten' if name in stale else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
