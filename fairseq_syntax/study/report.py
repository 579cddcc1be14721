"""``fairseq-syntax-study report``: the study's answer from its run records (every one this study's, records over
seeds made again where stale): ``RESULTS.md`` / ``RESULTS.json`` tested as the file says (:func:`comparisons_of`),
a section on **runaway hypotheses** (:mod:`fairseq_syntax.evaluation.runaway`) on the test set the runs folder
keeps, else the data's, and ``seeds.png``; with ``--readme FILE``, the short answer between FILE's markers."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from fairseq_syntax.evaluation.comparisons import Comparisons
from fairseq_syntax.evaluation.runaway import overlap, runaway_cost, runs_json, source_lengths, source_lengths_text
from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study.grid import control_pairs, planned_seeds
from fairseq_syntax.study.over_seeds import finished_seeds, rescore_stale
from fairseq_syntax.study.records import StudyError, kept, kept_test_lines, kept_test_set, runs_dir, test_set


def comparisons_of(config: StudyConfig) -> Comparisons:
    """What the study's table tests, from its file (never from the systems' names)."""
    plan = planned_seeds(config)
    return Comparisons(baseline=config.baseline, controls=control_pairs(config), planned_seeds=plan,
                       expected=tuple(plan), alpha=config.test.alpha)


def own_records(config: StudyConfig) -> list[Path]:
    """The run records of the study's own runs folder, packed or not (a folder below it is another study's)."""
    from fairseq_syntax.evaluation import packed_runs

    runs = runs_dir(config)
    found = [path for path in packed_runs.rglob(runs, packed_runs.RECORD_SUFFIX) if path.parent == runs]
    if not found:
        raise StudyError(f"{runs}: no *{packed_runs.RECORD_SUFFIX} run records in this folder")
    return found


def runaway_section(config: StudyConfig) -> tuple[list[str], dict]:
    """The report's runaway-hypotheses section (module docstring) and its JSON; none without a test reference."""
    from fairseq_syntax.evaluation.scoring import detokenize, read_generate_output

    # the test reference the runs were scored against and the test source: the runs folder's copies, else the data's
    refs, sources = (kept_test_lines(copy, data) for copy, data in zip(kept_test_set(config), test_set(config)))
    if refs is None:
        return [], {}
    corpus = config.corpus
    rows, data, every_run = [], {}, {}
    for system in planned_seeds(config):
        runs = {}
        for seed in finished_seeds(config, system):
            hyps = read_generate_output(str(kept(runs_dir(config) / f"{system}.seed{seed}.gen")),
                                        expected_ids=len(refs), field="H")
            if corpus.text == "raw":  # as the runs are scored (runner.detokenizing)
                hyps = detokenize(hyps, corpus.target)
            runs[seed] = runaway_cost(hyps, refs)
            every_run[f"{system}.seed{seed}"] = runs[seed]["ids"]
        if not runs:
            continue
        data[system] = runs
        counts = " / ".join(str(found["count"]) for found in runs.values())
        costs = " / ".join(f"{found['cost']:.2f}" for found in runs.values())
        ratios = " / ".join(f"{found['length_ratio']:.3f} -> {found['length_ratio_cut']:.3f}"
                            for found in runs.values())
        rows.append([system, " ".join(map(str, runs)), counts, costs, ratios])
    if not rows:
        return [], {}
    from fairseq_syntax.evaluation.tables import markdown_table

    shared = overlap(every_run, len(refs))
    looping = sorted({index for ids in every_run.values() for index in ids})
    repeated = sorted({index for pair in shared for index in pair["shared"]})
    total_shared = sum(len(pair["shared"]) for pair in shared)
    expected = sum(pair["expected_by_chance"] for pair in shared)
    lines = ["", "## Runaway hypotheses", ""]  # the columns: docs/results.md, as the report's first lines say
    lines += markdown_table(["System", "Seeds", "Runaways per run", "BLEU cost per run", "Length ratio per run"], rows)
    lines += ["", f"{len(looping)} test sentences run away in some run; {len(repeated)} of them in two runs or more. "
                  f"Over all pairs of runs, {total_shared} runaway sentences are shared where runs independent of "
                  f"their inputs would share {expected:.1f}: the same inputs loop again, whatever the system."]
    info = {"sentences": looping, "shared_in_two_or_more": repeated, "pairs_shared": total_shared,
            "pairs_expected_by_chance": expected, **runs_json(data)}
    if looping and sources is not None and len(sources) == len(refs):  # no runaway: no mean length of theirs
        lengths = source_lengths(looping, sources)
        info["source_lengths"] = lengths
        lines.append(source_lengths_text(lengths))
    return lines, info


def write_report(config: StudyConfig, readme: str | None = None, out: str | None = None,
                 within: str | None = None) -> list[str]:
    """Write the report (module docstring) into ``out``, by default the study's report folder; the lines to print.
    ``within``: the report this one is part of, relative to ``out`` (a size of a study over sizes): the commands
    below the table are left to the records, its notes to that report (:func:`results.seeds_notes`), and no
    seeds.png is drawn (the curve is that report's figure; RESULTS.json's table has each seed's scores)."""
    from fairseq_syntax.evaluation.results import results_of_runs
    from fairseq_syntax.evaluation.tables import write_results
    from fairseq_syntax.study.commands import grid_states

    states = grid_states(config)  # every record of the runs folder this study's, or a line each and nothing written
    if not any(state.state == "done" for state in states):
        raise StudyError(f"{config.path}: no run of the study has finished yet ({len(states)} to do): nothing to "
                         f"report; fairseq-syntax-study run {config.path} trains them")
    rescore_stale(config)
    folder = Path(out) if out else config.folder("report")
    folder.mkdir(parents=True, exist_ok=True)
    out_md = folder / "RESULTS.md"
    markdown, data = results_of_runs(own_records(config), comparisons_of(config), commands=within is None,
                                     notes=within and f"in the report this one is part of (`{within}`)")
    extra, runaways = runaway_section(config)
    if extra:
        markdown = markdown.rstrip("\n") + "\n" + "\n".join(extra) + "\n"
        data["runaway_hypotheses"] = runaways
    md_path, json_path = write_results(out_md, markdown, data)
    lines = [f"wrote {md_path} and {json_path} ({sum(s.state == 'done' for s in states)} of {len(states)} runs)"]
    if not extra:
        reference, _ = kept_test_set(config)
        lines.append(f"no runaway section: no test reference ({reference}.gz kept with the runs, or the study's data)")
    try:
        from fairseq_syntax.evaluation.seeds_figure import plot_seeds

        if within is None:
            plot_seeds(str(json_path), str(folder / "seeds.png"))
            lines.append(f"wrote {folder / 'seeds.png'}")
    except ValueError as error:  # no system with two seeds yet
        lines.append(f"no figure yet: {error}")
    from fairseq_syntax.evaluation.study_answer import readme_block, replace_readme_block
    from fairseq_syntax.evaluation.tables import load_results_json

    try:  # the answer a person reads first, printed last: the verdict table (the README's block, its markers left out)
        lines += ["", *readme_block(load_results_json(json_path), os.path.relpath(md_path), dataset=config.name)[1:-1]]
    except ValueError as error:  # a table with no answer to give
        lines.append(f"no answer yet: {error}")
    if readme:
        write_readme(readme, lambda folder: readme_block(load_results_json(json_path),
                                                         os.path.relpath(md_path, folder), dataset=config.name),
                     replace_readme_block)
        lines.append(f"wrote the study answer into {readme}")
    return lines


def write_readme(readme: str, block: Callable[[Path], list[str]], replace: Callable[[str, list[str], str], str]):
    """``--readme FILE``: FILE's answer between its markers replaced (``replace``) by ``block(FILE's folder)``; a
    missing FILE or markers is a StudyError."""
    path = Path(readme)
    if not path.is_file():
        raise StudyError(f"--readme {readme}: no such file")
    try:
        text = replace(path.read_text(encoding="utf-8"), block(path.parent), readme)
    except ValueError as error:
        raise StudyError(str(error)) from None
    path.write_text(text, encoding="utf-8")
