"""The run records' results table (never typed by hand): ``render_markdown`` and ``render_json`` of the records,
written by :func:`fairseq_syntax.evaluation.tables.write_results`.

A dataset of several seeds gets one row per system (:mod:`fairseq_syntax.evaluation.seed_systems`), its answer
(:mod:`fairseq_syntax.evaluation.study_answer`) and each run's convergence; what it compares is a
:class:`~fairseq_syntax.evaluation.comparisons.Comparisons` (default: the method registry's), recorded in
RESULTS.json. Other datasets get one row per run. :func:`results_of_runs` is ``fairseq-syntax-results`` for a caller
in Python."""
import os
import re
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from fairseq_syntax.core.control_kinds import CONTROL_KEY
from fairseq_syntax.evaluation.comparisons import Comparisons, registry_comparisons
from fairseq_syntax.evaluation.convergence import replay
from fairseq_syntax.evaluation.packed_runs import find_member
from fairseq_syntax.evaluation.records import find_record_files, load_record
from fairseq_syntax.evaluation.run_commands import command_text, option_value, record_argv, with_seed_variable
from fairseq_syntax.evaluation.seed_systems import (
    SeedSystem,
    format_p,
    is_number,
    is_seeds_dataset,
    seed_systems,
    structure_read,
)
from fairseq_syntax.evaluation.study_answer import study_answer
from fairseq_syntax.evaluation.tables import Cell, Table

# Columns in this order when present; any other numeric metric follows alphabetically.
PREFERRED_METRICS = ("BLEU", "BLEU-1", "chrF", "TER", "RIBES")
SIGNIFICANCE_METRICS = ("BLEU", "chrF")
COLUMN_NAMES = {"n_sentences": "Sentences"}


def format_wall_time(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _format_metric(value) -> str:
    if not is_number(value):
        return "–"
    return str(value) if isinstance(value, int) else f"{value:.2f}"


def _p_cell(report: dict | None) -> Cell:
    """Per metric the p-value, or for a seed-aware test ``{"p_value", "p_mc_se", "welch_p_value"}``."""
    if not report:
        return Cell(None, "–")
    found = {metric: report[metric] for metric in SIGNIFICANCE_METRICS if metric in report}
    return Cell({metric: {"p_value": value["p_value"], "p_mc_se": value["p_mc_se"],
                          "welch_p_value": (value.get("welch") or {}).get("p_value")} if "p_mc_se" in value
                 else value["p_value"] for metric, value in found.items()},
                " / ".join(format_p(report[m]) if m in report else "–" for m in SIGNIFICANCE_METRICS))


def _runs_table(records: Sequence[dict], command: bool = False) -> Table:
    """The systems table of a dataset of single runs; ``command``: with the training command as its last column
    (RESULTS.json's; RESULTS.md lists the commands below the table)."""
    present = {key for record in records for key, value in record["metrics"].items() if is_number(value)}
    metrics = [name for name in PREFERRED_METRICS if name in present]
    metrics += sorted(present - set(metrics))
    baselines = list(dict.fromkeys(name for record in records for name in record["significance"]))
    show_tokenize = any("tokenize" in record["metrics"] for record in records)
    # the seed of a run and the device (a system over seeds has a table of its own, _seeds_table)
    run_fields = [(field, title) for field, title in (("seed", "Seed"), ("device", "Device"))
                  if any(field in record for record in records)]
    table = Table(["System", "Arch"] + [title for _, title in run_fields] + (["BLEU tok."] if show_tokenize else [])
                  + [COLUMN_NAMES.get(name, name) for name in metrics]
                  + [f"p vs {name} (BLEU / chrF)" for name in baselines]
                  + ["Updates", "Epochs", "Wall time"] + (["Command"] if command else []))
    for record in records:
        scores, seconds = record["metrics"], record["wall_time_s"]
        table.add(record["system"], record["arch"],
                  *[Cell(record.get(field), str(record.get(field, "–"))) for field, _ in run_fields],
                  *([Cell(scores.get("tokenize"), scores.get("tokenize", "–"))] if show_tokenize else []),
                  *[Cell(scores.get(name) if is_number(scores.get(name)) else None, _format_metric(scores.get(name)))
                    for name in metrics],
                  *[_p_cell(record["significance"].get(name)) for name in baselines],
                  record["updates"], record["epochs"], Cell(seconds, format_wall_time(seconds)),
                  *([record["command"]] if command else []))
    return table


def _run_commands_section(records: Sequence[dict]) -> list[str]:
    """Each row's training command, in the table's order, a line each (a run of one of several seeds named with its
    seed)."""
    lines = ["### Commands", "", "The training command of each row (paths as the record holds them):", ""]
    for record in records:
        name = record["system"] + (f" (seed {record['seed']})" if record.get("seed") is not None else "")
        lines.append(f"- **{name}**: `{record['command']}`")
    return lines + [""]


def _by_length_table(records: Sequence[dict]) -> Table | None:
    """Systems x reference-length intervals, for the records scored with the same intervals as the first one."""
    scored = [record for record in records if record.get("by_length")]
    if not scored:
        return None
    buckets = [(row["bucket"], row["n_sentences"]) for row in scored[0]["by_length"]]
    table = Table(["System"] + [f"{bucket} (n={count})" for bucket, count in buckets])
    for record in scored:
        if [(row["bucket"], row["n_sentences"]) for row in record["by_length"]] == buckets:
            bleu = [row["BLEU"] for row in record["by_length"]]
            table.add(record["system"], *[Cell(value, _format_metric(value)) for value in bleu])
    return table


def _test_notes(records: Sequence[dict], against: str = "the named baseline") -> list[str]:
    """One line per significance-test setting of the records' p-values."""
    reports = [report for record in records for report in record["significance"].values()]
    tests = dict.fromkeys(f"{report.get('test', 'paired test')}, {report.get('n_samples', '?')} samples, seed "
                          f"{report.get('seed', '?')}" for report in reports)
    return [f"- p: two-sided p-value of the row's system against {against} ({setting})." for setting in tests]


def _signature_notes(records: Sequence[dict]) -> list[str]:
    signatures = dict.fromkeys(pair for record in records for pair in record["metrics"].get("signatures", {}).items())
    return [f"- {metric} signature: `{signature}`" for metric, signature in signatures]


def _notes(records: Sequence[dict]) -> list[str]:
    """Test settings and sacrebleu signatures: what a reader needs to reproduce or compare the numbers."""
    return _test_notes(records) + _signature_notes(records) + _parses_notes(records)


def _parses_notes(records: Sequence[dict]) -> list[str]:
    """Which parsers made each row's syntax (a record's ``parsers``), in one line, the rows of each parser set
    together; a row on control structures says so. Nothing when no record names any."""
    if not any("parsers" in record for record in records):
        return []
    from fairseq_syntax.parsing.provenance import summary

    systems: dict[str, list[str]] = {}
    for record in records:
        parsers = dict(record.get("parsers") or {})
        control = parsers.pop(CONTROL_KEY, None)
        described = summary(parsers) if parsers else None
        key = f"`{described}`" if described else "not recorded (trained before the data named their parsers)"
        if control:
            key += f" under control {control.get('structure', '?')} structures (seed {control.get('seed', '?')})"
        systems.setdefault(key, []).append(record["system"])
    return ["- parses of the training data (systems that read no syntax ignore them): "
            + "; ".join(f"{key}: {', '.join(names)}" for key, names in systems.items())]


# ---- a dataset whose systems were trained with several seeds: one row per system ------------------------------

#: the seeds table's column of the epochs each row's runs trained
EPOCHS = "Epochs (mean)"
#: the line of a report on seeds that points to the notes every such report shares, written once there
READING = "What the columns and sections below mean: `docs/results.md`, Reading a study's RESULTS.md."


def _metric_cell(system: SeedSystem, metric: str) -> Cell:
    found = system.mean_sd(metric)
    if found is None:
        return Cell(None, "–")
    mean, sd = found
    per_seed = system.per_seed(metric)
    # one seed has no spread to show: "± 0.00" would read as runs that agree exactly
    shown = f"{mean:.2f} ± {sd:.2f}" if len(per_seed) != 1 else f"{mean:.2f} (one seed)"
    return Cell({"mean": mean, "sd": sd, "per_seed": per_seed}, shown)


def _seeds_cell(system: SeedSystem) -> Cell:
    seeds, later = system.seeds, system.unscored_seeds
    if not seeds:  # a run that recorded no seed: "–"
        return Cell(seeds, str((system.over_seeds or {}).get("seeds", "–")))
    text = f"{len(seeds)}: {', '.join(map(str, seeds))}"
    if later:
        text += f" ({', '.join(map(str, later))} trained since, not yet scored over)"
    return Cell(seeds, text)


def run_convergence(run: dict) -> dict | None:
    """:func:`~fairseq_syntax.evaluation.convergence.replay` of a run record's validation curve under its training
    command's ``--patience`` (and ``--maximize-best-checkpoint-metric``); None without a curve."""
    curve = run.get("valid", {}).get("curve")
    if not curve:
        return None
    argv = record_argv(run) or []
    return replay(curve, int(option_value(argv, "--patience") or 0), "--maximize-best-checkpoint-metric" in argv)


def _epochs_cell(system: SeedSystem) -> Cell:
    """The mean over the row's runs of the epochs trained up to the patience stop (the protocol's), and, beside it,
    the mean of those a resumed run trained past it."""
    runs = system.scored_runs
    if not runs:
        epochs = system.over_seeds["epochs"]
        return Cell({"to_patience_stop": epochs, "past_patience": None}, f"{epochs:.1f}")
    protocol, past = [], []
    for run in runs:
        replayed = run_convergence(run)
        protocol.append(replayed["protocol_epochs"] if replayed else run["epochs"])
        past.append(len(replayed["past_patience"]) if replayed else 0)
    mean, extra = statistics.fmean(protocol), statistics.fmean(past)
    return Cell({"to_patience_stop": mean, "past_patience": extra},
                f"{mean:.1f}" + (f" (+{extra:.1f} past patience)" if extra else ""))


def _seeds_table(systems: Sequence[SeedSystem], comparisons: Comparisons) -> Table:
    """The seeds table: a row per system, its scores over its seeds and, on a control's row, its method (the tests
    between them are the answer's table, :mod:`~fairseq_syntax.evaluation.study_answer`)."""
    names = {system.name for system in systems}
    table = Table(["System", "Structure read", "Seeds"] + [f"{m} (mean ± sd)" for m in comparisons.metrics]
                  + ["Control of", EPOCHS])
    for system in systems:
        method = comparisons.method_of(system.name)
        method = method if method in names else None
        table.add(system.name, structure_read(system, comparisons), _seeds_cell(system),
                  *[_metric_cell(system, metric) for metric in comparisons.metrics],
                  Cell(method, method or "–"), _epochs_cell(system))
    return table


#: a path of one seed's file: ``DIR/NAME.seed3.gen.gz`` -> (``DIR/NAME.seed``, ``3``, ``.gen.gz``)
_SEED_PATH = re.compile(r"^(.*\.seed)(\d+)(\.[^/]*)$")


def braced(paths: Sequence[str]) -> list[str]:
    """``paths`` with each run of consecutive paths that differ only in their seed written once,
    ``DIR/NAME.seed{1,2,3}.gen.gz``."""
    shown: list[tuple[str, list[str], str]] = []
    for path in paths:
        found = _SEED_PATH.match(path)
        prefix, seed, suffix = found.groups() if found else (path, None, None)
        if seed is not None and shown and shown[-1][0] == prefix and shown[-1][2] == suffix:
            shown[-1][1].append(seed)
        else:
            shown.append((prefix, [seed] if seed is not None else [], suffix or ""))
    return [prefix + (seeds[0] if len(seeds) == 1 else "{" + ",".join(seeds) + "}" if seeds else "") + suffix
            for prefix, seeds, suffix in shown]


def _row_commands(system: SeedSystem) -> dict[str, list[str]]:
    """The words of a row's commands: its first seed's training and decoding with the seed as ``$SEED``, and the
    scoring over its seeds (each where recorded)."""
    first = system.runs[0] if system.runs else system.over_seeds
    seed = first.get("seed", (system.seeds or [None])[0])
    commands = {}
    for step, field in (("train", "command"), ("decode", "decode_command")):
        words = record_argv(first, field)
        if words:
            commands[step] = words if seed is None else with_seed_variable(words, seed)
    over_seeds, one_run = record_argv(system.over_seeds or {}, "score_command"), record_argv(first, "score_command")
    if over_seeds:
        commands["score"] = [",".join(braced(word.split(","))) for word in over_seeds]  # a list of seeds' files
    elif one_run:
        commands["score"] = one_run if seed is None else with_seed_variable(one_run, seed)
    return commands


def _as_changes(base: list[str], words: list[str]) -> str:
    """``words`` shown as the stretches in which they differ from ``base`` (```OLD``` -> ```NEW```, a value with its
    option), or whole where that is no shorter."""
    from difflib import SequenceMatcher

    whole = f"`{command_text(words)}`"
    changes = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=base, b=words, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if i1 and i1 < len(base) and base[i1 - 1].startswith("-") and not base[i1].startswith("-") and \
                j1 and words[j1 - 1] == base[i1 - 1]:
            i1, j1 = i1 - 1, j1 - 1  # the option whose value changed
        old, new = command_text(base[i1:i2]), command_text(words[j1:j2])
        changes.append(f"`{old}` -> `{new}`" if old and new else f"without `{old}`" if old else f"with `{new}`")
    shown = ", ".join(["the first row's"] + changes)
    return shown if len(shown) < len(whole) else whole


def _commands_section(systems: Sequence[SeedSystem]) -> list[str]:
    lines = ["### Commands", ""]
    first = _row_commands(systems[0]) if systems else {}
    for index, system in enumerate(systems):
        commands = _row_commands(system)
        # the first row's runs' names (its checkpoints' folders) as this row's: a difference every row has
        theirs, ours = f"{systems[0].name}.seed$SEED", f"{system.name}.seed$SEED"
        seeds = ", ".join(map(str, system.seeds)) or "?"
        lines += [f"**{system.name}** (seeds {seeds})", ""]
        lines += [f"- {step}: " + (_as_changes([word.replace(theirs, ours) for word in first[step]], commands[step])
                                   if index and step in first and step != "score" else
                                   f"`{command_text(commands[step])}`")
                  for step in ("train", "decode", "score") if step in commands]
        lines.append("")
    return lines


def _seeds_notes(systems: Sequence[SeedSystem]) -> list[str]:
    facts = [system.facts for system in systems]
    return (_test_notes([system.over_seeds for system in systems if system.over_seeds],
                        "the system it is tested against (the answer's table)")
            + _signature_notes(facts) + _parses_notes(facts))


def convergence_table(systems: Sequence[SeedSystem]) -> Table | None:
    """One row per run that recorded its validation curve (:func:`run_convergence`; the columns: docs/results.md,
    Reading a study's RESULTS.md); None when no run did."""
    runs = [(system.name, run) for system in systems for run in system.runs if run.get("valid", {}).get("curve")]
    if not runs:
        return None
    metrics = list(dict.fromkeys(run["valid"]["metric"] for _, run in runs))
    metric = metrics[0] if len(metrics) == 1 else "metric"
    table = Table(["System", "Seed", "Epochs trained", "Patience stop", "Past patience", "Checkpoint kept (epoch)",
                   f"Valid {metric} kept", "Change after it, to the stop: min", "max"])
    for name, run in runs:
        curve = run["valid"]["curve"]
        replayed = run_convergence(run)
        kept_epoch, kept = replayed["kept"]
        cap = int(option_value(record_argv(run) or [], "--max-epoch") or 0)
        last = curve[-1][0]
        stopped = str(replayed["stop"]) if replayed["stop"] else "– (epoch cap)" if cap and last >= cap else "–"
        past = len(replayed["past_patience"])
        kept_text = str(kept_epoch)
        if replayed["protocol_kept"] and replayed["protocol_kept"][0] != kept_epoch:
            kept_text += f" (past patience; to the stop: {replayed['protocol_kept'][0]})"
        # the epochs after the checkpoint an uninterrupted run keeps (the one kept, unless one past patience tied)
        protocol_epoch, protocol_value = replayed["protocol_kept"]
        after = [value - protocol_value for epoch, value in curve
                 if protocol_epoch < epoch <= replayed["protocol_epochs"]]
        spread = [Cell(value, f"{value:+.3f}") for value in (min(after), max(after))] if after else [
            Cell(None, "–")] * 2
        name_cell = name if len(metrics) == 1 else f"{name} ({run['valid']['metric']})"
        table.add(name_cell, run.get("seed", "–"), Cell(last, str(last)), Cell(replayed["stop"], stopped),
                  Cell(past, str(past) if past else "–"), Cell(kept_epoch, kept_text), Cell(kept, f"{kept:.3f}"),
                  *spread)
    return table


def _by_dataset(records: Sequence[dict]) -> dict[str, list[dict]]:
    """Records by dataset, in order of first appearance, the datasets of several seeds first (the study's)."""
    datasets: dict[str, list[dict]] = {}
    for record in records:
        datasets.setdefault(record["dataset"], []).append(record)
    return dict(sorted(datasets.items(), key=lambda item: not is_seeds_dataset(item[1])))


def _sections(records: Sequence[dict], comparisons: Comparisons | None, commands: bool = True,
              notes: str | None = None):
    """Each dataset of ``records`` (:func:`_by_dataset`'s order) with its RESULTS.md lines and RESULTS.json entry;
    ``notes``: where a seeds table's notes are written instead (:func:`seeds_notes`), named in their place."""
    comparisons = comparisons or registry_comparisons()
    for dataset, rows in _by_dataset(records).items():
        if is_seeds_dataset(rows):
            systems = seed_systems(rows, comparisons)
            table, found = _seeds_table(systems, comparisons), _seeds_notes(systems)
            convergence = convergence_table(systems)
            section, answer = study_answer(systems, comparisons)
            shown = found if notes is None else [f"- p, the signatures and the parses: {notes}."]
            lines = [READING, ""] + table.lines() + [""] + shown + [""] + section
            lines += ["### Convergence", ""] + convergence.lines() + [""] if convergence else []
            lines += _commands_section(systems) if commands else []
            entry = {"seeds": True, "comparisons": comparisons.to_json(), "table": table.json(),
                     **({"notes": [note[2:] for note in found]} if notes is None else {}), "answer": answer}
            if convergence:
                entry["convergence"] = convergence.json(lists=True)
        else:
            notes, by_length = _notes(rows), _by_length_table(rows)
            lines = _runs_table(rows).lines() + [""] + (notes + [""] if notes else [])
            entry = {"table": _runs_table(rows, command=True).json()}
            if by_length:
                lines += ["BLEU by reference length (tokens of the reference, sentences per interval in the header):",
                          ""] + by_length.lines() + [""]
                entry["bleu_by_length"] = by_length.json()
            lines += _run_commands_section(rows)
            entry["notes"] = [note[2:] for note in notes]
        yield dataset, [f"## {dataset}", ""] + lines, entry


def render_markdown(records: Sequence[dict], sources: Sequence = (), comparisons: Comparisons | None = None,
                    commands: bool = True, notes: str | None = None) -> str:
    """RESULTS.md: a table per dataset (:func:`_by_dataset`; rows as the module docstring says, tested as
    ``comparisons`` say, None: the registry's) with its test settings, signatures and commands (``commands=False``:
    a seeds table's left to the records; ``notes``: where its notes are, :func:`_sections`); ``sources`` (record
    paths) listed at the end."""
    lines = ["<!-- Generated by fairseq-syntax-results from run records; edit the records, not this file. -->",
             ""]
    for _, section, _ in _sections(records, comparisons, commands, notes):
        lines += section
    if sources:
        lines += ["Run records: " + "; ".join(f"`{folder}/`: " + ", ".join(f"`{name}`" for name in braced(names))
                                              for folder, names in _by_folder(sources).items()), ""]
        # no count: the table is written before its newest run is packed, and must read the same after
        if any(find_member(source) is not None for source in sources):
            lines += ["The records of finished runs are packed with their logs and decodes (`packed.tar.xz` beside "
                      "them): `python3 fairseq_syntax/evaluation/packed_runs.py cat RECORD` shows one.", ""]
    return "\n".join(lines)


def _by_folder(sources: Sequence) -> dict[str, list[str]]:
    """The file names of ``sources`` by folder, in order."""
    folders: dict[str, list[str]] = {}
    for source in sources:
        folders.setdefault(os.path.dirname(str(source)) or ".", []).append(os.path.basename(str(source)))
    return folders


def render_json(records: Sequence[dict], sources: Sequence = (), comparisons: Comparisons | None = None,
                notes: str | None = None) -> dict[str, Any]:
    """RESULTS.json of the run records: per dataset the table of ``render_markdown`` (``table_json``: numbers
    unrounded, "Wall time" in seconds, each "p vs" cell the p-values by metric), the BLEU-by-length table if any, the
    test settings and signatures. A dataset of several seeds has ``"seeds": true``, its ``comparisons``
    (:meth:`Comparisons.to_json`), each metric cell ``{"mean", "sd", "per_seed"}`` (in the row's "Seeds" order), its
    ``answer`` (``study_answer``) and ``convergence`` (``convergence_table``) when runs recorded validation curves.
    ``run_records``: the records' file names by folder. ``notes``: as :func:`render_markdown` takes it."""
    return {"generated_by": "fairseq-syntax-results (fairseq_syntax.evaluation.results.render_json)",
            "datasets": {dataset: entry for dataset, _, entry in _sections(records, comparisons, notes=notes)},
            "run_records": _by_folder(sources)}


def displayed_path(path) -> str:
    """``path`` relative to the working directory if under it, else as given."""
    relative = os.path.relpath(os.path.abspath(path))
    return str(path) if relative.startswith(os.pardir) else relative


def results_of_runs(inputs: Iterable, comparisons: Comparisons | None = None, commands: bool = True,
                    notes: str | None = None) -> tuple[str, dict[str, Any]]:
    """(RESULTS.md's text, RESULTS.json's object) of the run records in ``inputs`` (files or folders), listed by
    :func:`displayed_path`, seeds tables tested as ``comparisons`` say (None: the registry's), ``commands`` and
    ``notes`` as :func:`render_markdown` takes them."""
    paths = find_record_files(inputs)
    records = [load_record(path) for path in paths]
    sources = [displayed_path(path) for path in paths]
    return (render_markdown(records, sources, comparisons, commands, notes),
            render_json(records, sources, comparisons, notes))


def seeds_notes(inputs: Iterable, comparisons: Comparisons) -> list[str]:
    """The notes of the seeds table of the run records in ``inputs`` (test settings, signatures, parses): what
    :func:`results_of_runs` with ``notes`` leaves to another file."""
    records = [load_record(path) for path in find_record_files(inputs)]
    found = [rows for rows in _by_dataset(records).values() if is_seeds_dataset(rows)]
    return [note[2:] for note in _seeds_notes(seed_systems(found[0], comparisons))] if found else []
