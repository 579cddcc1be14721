"""Translation scores and paired significance, computed by sacrebleu and nltk (no metric is re-implemented).

Metrics as the methods' papers report them: BLEU-4 and BLEU-1 (Papineni et al. 2002; Pu & Sima'an 2022, Tables 3-6),
chrF and TER (sacrebleu), RIBES (Isozaki et al. 2010, nltk's ``corpus_ribes``), BLEU per reference-length interval
(Pu & Sima'an 2022, Figure 4), sacrebleu's paired bootstrap (Koehn 2004) between two runs, and a paired bootstrap
over test sentences and each system's seeds (:func:`seed_bootstrap`).

Inputs are lists of strings, one segment per sentence, hypotheses and references in the same order. Scores are on a
0-100 scale (RIBES is nltk's 0-1 value times 100, as Pu & Sima'an 2022 report it)."""
import contextlib
import functools
import io
import os
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
from nltk.translate.ribes_score import corpus_ribes
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest
from sacremoses import MosesDetokenizer

from fairseq_syntax.core import text_lines
from fairseq_syntax.core.data_dir import read_skipped_lines
from fairseq_syntax.evaluation.packed_runs import existing_path, find_member
from fairseq_syntax.evaluation.kept_files import open_text
from fairseq_syntax.evaluation.seed_systems import SEED_BOOTSTRAP_TEST, mc_standard_error, seed_means, welch_test

# `S-12\t...`, `T-12\t...`, `H-12\t<score>\t...`, `D-12\t<score>\t...`, `P-12\t...` as printed by
# fairseq_cli/generate.py; other lines (logging, the final "Generate test with beam=5" line) are not data.
GENERATE_LINE = re.compile(r"^([STHDP])-(\d+)\t")
FIELDS_WITH_SCORE = ("H", "D")
DEFAULT_LENGTH_EDGES = (10, 20, 30, 40, 50)


class ScoringInputError(ValueError):
    """An input file cannot be scored as it is (missing ids, wrong line count, malformed line)."""


def read_lines(path) -> list[str]:
    """One segment per line; only the line break is removed (a blank line is an empty segment). A gzipped file is
    read the same way; ``path`` may name the file without its ``.gz`` or be packed (``packed_runs``). A line that is
    not UTF-8 raises :class:`ScoringInputError` naming file and line."""
    found = existing_path(path)
    try:
        try:
            return text_lines.read_lines(str(found))
        except FileNotFoundError:  # not on disk, or packed since existing_path looked: the archive holds it then
            packed = find_member(found)
            if packed is None:
                raise
            return text_lines.read_stream_lines(io.BytesIO(packed.data), packed.label)
    except text_lines.TextLineError as error:
        raise ScoringInputError(str(error)) from None


def skipped_line_numbers(path: str) -> list[int]:
    """The 1-based line numbers of a ``{split}.skipped.tsv`` of fairseq-syntax-preprocess (``LINE<TAB>reason<TAB>
    message``): the pairs it left out, which fairseq-generate's ids do not count."""
    try:
        return read_skipped_lines(str(existing_path(path)))
    except ValueError as error:  # a malformed line or one that is not UTF-8: FILE:LINE
        raise ScoringInputError(str(error)) from None


def drop_skipped(references: list[str], skipped: Sequence[int], path: str) -> list[str]:
    """The references of the pairs fairseq-syntax-preprocess kept, in order: generate's id k is kept line k."""
    beyond = [number for number in skipped if not 1 <= number <= len(references)]
    if beyond:
        raise ScoringInputError(f"{path} names lines {format_ids(beyond)}, beyond the {len(references)} references")
    left_out = set(skipped)
    return [reference for number, reference in enumerate(references, 1) if number not in left_out]


def format_ids(ids: Sequence[int]) -> str:
    """`[3, 4, 5, 9]` -> `"3-5, 9"`: names every id while keeping long runs short."""
    runs = []
    for index in sorted(ids):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _parse_generate_lines(path, lines: list[str], field: str, expected_ids: int | None,
                          expected_from: str) -> list[str]:
    by_id: dict[int, str] = {}
    line_of_id: dict[int, int] = {}
    largest_id = -1
    n_columns = 3 if field in FIELDS_WITH_SCORE else 2
    column_names = "an id, a score and a text" if field in FIELDS_WITH_SCORE else "an id and a text"
    for line_number, line in enumerate(lines, 1):
        match = GENERATE_LINE.match(line)
        if not match:
            continue
        kind, sample_id = match.group(1), int(match.group(2))
        largest_id = max(largest_id, sample_id)
        if kind != field:
            continue
        parts = line.split("\t", n_columns - 1)
        if len(parts) != n_columns:
            raise ScoringInputError(f"{path}:{line_number}: a {field}- line needs {column_names} separated by "
                                    f"tabs, got {line!r}")
        if sample_id in by_id:
            raise ScoringInputError(
                f"{path}:{line_number}: second {field}- line for id {sample_id} (first on line "
                f"{line_of_id[sample_id]}); score output generated with --nbest 1"
            )
        by_id[sample_id] = parts[-1]
        line_of_id[sample_id] = line_number
    if not by_id:
        raise ScoringInputError(f"{path}: fairseq-generate output without any {field}- line")
    n_ids = expected_ids if expected_ids is not None else largest_id + 1
    expected = f"{n_ids} expected ids 0-{n_ids - 1}{expected_from}"
    extra = [i for i in by_id if i >= n_ids]
    if extra:
        raise ScoringInputError(f"{path}: {field}- lines for ids {format_ids(extra)} beyond the {expected}")
    missing = [i for i in range(n_ids) if i not in by_id]
    if missing:
        # a dropped final batch, or lines preprocessing skipped
        hints = []
        if missing == list(range(n_ids - len(missing), n_ids)):
            if len(missing) < 8:
                hints.append("fairseq drops a final batch whose size is not a multiple of "
                             "--required-batch-size-multiple, default 8: rerun fairseq-generate with "
                             "--required-batch-size-multiple 1")
            hints.append("if fairseq-syntax-preprocess --skip-invalid left lines of this split out, the ids count "
                         "the kept lines only: give its {split}.skipped.tsv with --skipped")
        raise ScoringInputError(
            f"{path}: no {field}- line for {len(missing)} of the {expected}: {format_ids(missing)} "
            f"(nothing was scored{''.join('; ' + hint for hint in hints)})"
        )
    return [by_id[i] for i in range(n_ids)]


def kept_decode(lines: Sequence[str]) -> list[str]:
    """What a recipe keeps of fairseq-generate's output (``lines``, without line breaks) as its decode:

    * H- lines with their score column left empty (so ``cut -f3`` still gives the hypotheses);
    * D- lines only when one differs from its H- line; otherwise :func:`read_generate_output` reads H- lines for "D";
    * not S-, T- or P- lines;
    * every other line, after the hypotheses, in its order."""
    kept_lines: dict[str, dict[int, list[str]]] = {"H": {}, "D": {}}  # kind -> id -> its lines, as kept
    texts: dict[str, dict[int, list[str]]] = {"H": {}, "D": {}}  # kind -> id -> the hypotheses of those lines
    others = []
    for line in lines:
        match = GENERATE_LINE.match(line)
        if match is None:
            others.append(line)
            continue
        kind, sample_id = match.group(1), int(match.group(2))
        if kind not in kept_lines:
            continue
        parts = line.split("\t", 2)
        if len(parts) == 3:  # a line without a score column stays as generate wrote it
            parts[1] = ""
        kept_lines[kind].setdefault(sample_id, []).append("\t".join(parts))
        texts[kind].setdefault(sample_id, []).append(parts[-1])
    kinds = "H" if kept_lines["H"] and texts["D"] == texts["H"] else "HD"
    ids = sorted(kept_lines["H"].keys() | kept_lines["D"].keys())
    return [line for i in ids for kind in kinds for line in kept_lines[kind].get(i, [])] + others


def write_kept_decode(generate_output, kept_path) -> None:
    """Write :func:`kept_decode` of ``generate_output`` to ``kept_path`` (gzipped when it ends in ``.gz``, the same
    bytes for the same text)."""
    with open_text(kept_path, "w", newline="\n") as out:
        out.writelines(line + "\n" for line in kept_decode(read_lines(generate_output)))


def read_generate_output(path, expected_ids: int | None = None, field: str = "D",
                         expected_from: str | None = None) -> list[str]:
    """Segments ordered by input id, from fairseq-generate stdout or plain text (a segment a line).

    field: "D" (detokenized), "H" (after --remove-bpe), "T" (reference) or "S" (source); a kept decode without D-
    lines gives H- lines for "D". expected_ids: the number of inputs N, every id 0..N-1 required (without it, ids
    missing from the end go unseen). Raises ScoringInputError naming the file and the missing, duplicated or surplus
    ids (or a plain file's line count); expected_from says where N came from."""
    if field not in ("S", "T", "H", "D"):
        raise ValueError(f"field must be one of S, T, H, D; got {field!r}")
    source = f" (as in {expected_from})" if expected_from else ""
    lines = read_lines(path)
    kinds = {found.group(1) for found in map(GENERATE_LINE.match, lines) if found}
    if kinds:
        if field == "D" and kinds & {"D", "H"} == {"H"}:
            field = "H"  # a kept decode whose D- lines were its H- lines (kept_decode)
        return _parse_generate_lines(path, lines, field, expected_ids, source)
    if expected_ids is not None and len(lines) != expected_ids:
        raise ScoringInputError(f"{path}: {len(lines)} lines of plain text, expected {expected_ids}{source}")
    return lines


def detokenize(lines: Iterable[str], lang: str) -> list[str]:
    """Moses-detokenize whitespace-tokenized segments, as generate's D- lines with ``--tokenizer moses``."""
    detokenizer = MosesDetokenizer(lang=lang)
    return [detokenizer.detokenize(line.split()) for line in lines]


def check_same_length(hyps: Sequence[str], refs: Sequence[str], hyp_name: str = "hypotheses",
                      ref_name: str = "references") -> None:
    if len(hyps) != len(refs):
        raise ScoringInputError(
            f"{hyp_name} has {len(hyps)} segments but {ref_name} has {len(refs)}; nothing was scored"
        )


def ribes(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> float:
    """nltk's corpus RIBES x 100 on the tokens BLEU sees (sacrebleu's ``tokenize``, then whitespace)."""
    tokenizer = BLEU(tokenize=tokenize).tokenizer
    hyp_tokens = [tokenizer(h.rstrip()).split() for h in hyps]
    ref_tokens = [[tokenizer(r.rstrip()).split()] for r in refs]
    return 100.0 * corpus_ribes(ref_tokens, hyp_tokens)


def corpus_scores(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> dict:
    """BLEU (= BLEU-4), BLEU-1, chrF, TER (sacrebleu) and RIBES (nltk) of one system against one reference.

    tokenize: sacrebleu's BLEU tokenizer; "13a" for detokenized text, "none" for tokenized BLEU on tokenized text.
    chrF and TER use sacrebleu's defaults. Returns the scores plus "tokenize", "n_sentences" and the sacrebleu
    "signatures"."""
    check_same_length(hyps, refs)
    metrics = {"BLEU": BLEU(tokenize=tokenize), "BLEU-1": BLEU(tokenize=tokenize, max_ngram_order=1), "chrF": CHRF(),
               "TER": TER()}
    scores = {name: metric.corpus_score(hyps, [list(refs)]).score for name, metric in metrics.items()}
    signatures = {name: str(metric.get_signature()) for name, metric in metrics.items()}
    signatures["BLEU-1"] += "|max_ngram_order:1"  # sacrebleu's signature has no field for the n-gram order
    return {**scores, "RIBES": ribes(hyps, refs, tokenize), "tokenize": tokenize, "n_sentences": len(hyps),
            "signatures": signatures}


@contextlib.contextmanager
def _sacrebleu_seed(seed: int):
    """sacrebleu's PairedTest takes its seed only from the SACREBLEU_SEED environment variable."""
    previous = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = previous


def seed_scores(hyps_by_seed: Sequence[Sequence[str]], refs: Sequence[str], tokenize: str = "13a") -> dict:
    """Every seed's :func:`corpus_scores` (``"per_seed"``) and per metric the mean and sample standard deviation over
    seeds (``"mean"``, ``"sd"``; sd 0 for one seed)."""
    per_seed = [corpus_scores(hyps, refs, tokenize) for hyps in hyps_by_seed]
    mean, sd = seed_means(per_seed)  # tokenize, signatures: the same for every seed
    return {"per_seed": per_seed, "mean": mean, "sd": sd}


#: the seed-aware bootstrap's default rounds: p moves by about +-0.003 at 0.05 between draws (mc_standard_error)
SEED_BOOTSTRAP_ROUNDS = 10_000
#: rounds are drawn and scored this many at a time (a block of sentence counts is rounds x sentences floats)
ROUND_BLOCK = 1000


class SeedDraws(NamedTuple):
    """What each round of :func:`seed_bootstrap` resamples: ``sentences`` ``n x m`` test sentence ids (one row a
    round, the same for both systems), ``seeds_a`` ``n x k_a`` and ``seeds_b`` ``n x k_b`` indices into each system's
    seeds."""
    sentences: np.ndarray
    seeds_a: np.ndarray
    seeds_b: np.ndarray


def seed_draws(n_samples: int, n_sentences: int, n_seeds_a: int, n_seeds_b: int, seed: int) -> SeedDraws:
    """The draws of :func:`seed_bootstrap`, with replacement, from ``numpy.random.default_rng(seed)``: every round's
    seeds first (A's, then B's), then the sentences, :data:`ROUND_BLOCK` rounds at a time."""
    rng = np.random.default_rng(seed)
    seeds_a = rng.integers(0, n_seeds_a, (n_samples, n_seeds_a))
    seeds_b = rng.integers(0, n_seeds_b, (n_samples, n_seeds_b))
    sentences = np.concatenate([rng.integers(0, n_sentences, (min(ROUND_BLOCK, n_samples - start), n_sentences))
                                for start in range(0, n_samples, ROUND_BLOCK)] or [np.zeros((0, n_sentences), int)])
    return SeedDraws(sentences, seeds_a, seeds_b)


def two_sided_bootstrap_p(deltas: Sequence[float]) -> float:
    """Two-sided p of "no difference" from bootstrap differences B - A: ``2 (1 + min(#{delta <= 0}, #{delta >= 0})) /
    (n + 1)``, at most 1."""
    deltas = np.asarray(deltas, dtype=float)
    tail = min(int((deltas <= 0).sum()), int((deltas >= 0).sum()))
    return min(1.0, 2 * (tail + 1) / (len(deltas) + 1))


def seed_scale(n_seeds: int) -> float:
    """``sqrt(k / (k - 1))``, the factor :func:`seed_bootstrap` scales a round's resampled seeds' deviation by: the
    mean of k values resampled with replacement has variance ``(k - 1) / k * s^2 / k`` (Efron & Tibshirani 1993;
    Hesterberg 2015), scaled it is ``s^2 / k``. One seed: 1."""
    return float(np.sqrt(n_seeds / (n_seeds - 1))) if n_seeds > 1 else 1.0


def bleu_from_statistics(stats: np.ndarray, metric: BLEU) -> np.ndarray:
    """sacrebleu's ``BLEU._compute_score_from_stats`` of every row of ``stats`` (``n x (2 + 2N)``: hypothesis length,
    reference length, N matches, N totals), vectorised, with ``exp`` smoothing and no effective order (sacreBLEU's
    corpus BLEU); 0 for a row without any match."""
    if metric.smooth_method != "exp" or metric.effective_order:
        raise ValueError("bleu_from_statistics computes corpus BLEU with exp smoothing and no effective order only")
    order = metric.max_ngram_order
    stats = np.asarray(stats, dtype=np.float64)
    hyp_len, ref_len = stats[:, 0], stats[:, 1]
    correct, total = stats[:, 2:2 + order], stats[:, 2 + order:2 + 2 * order]
    with np.errstate(divide="ignore", invalid="ignore"):
        penalty = np.where(hyp_len < ref_len, np.where(hyp_len > 0, np.exp(1 - ref_len / hyp_len), 0.0), 1.0)
        alive = np.cumprod(total > 0, axis=1).astype(bool)  # orders before the first without n-grams
        unmatched = np.cumsum((correct == 0) & alive, axis=1)  # exp smoothing's count so far
        precision = np.where(correct > 0, 100.0 * correct / total, 100.0 / (2.0 ** unmatched * total))
        precision = np.where(alive, precision, 0.0)
        logs = np.where(precision > 0, np.log(np.where(precision > 0, precision, 1.0)), -9999999999.0)  # my_log
    score = penalty * np.exp(logs.sum(axis=1) / order)
    return np.where(correct.any(axis=1), score, 0.0)


def chrf_from_statistics(stats: np.ndarray, metric: CHRF) -> np.ndarray:
    """sacrebleu's ``CHRF._compute_f_score`` of every row of ``stats`` (``n x 3 (char order + word order)``:
    hypothesis n-grams, reference n-grams, matches per order), vectorised with effective order; 0 where no order has
    n-grams."""
    if metric.eps_smoothing:
        raise ValueError("chrf_from_statistics computes chrF without eps smoothing (sacreBLEU's default) only")
    stats = np.asarray(stats, dtype=np.float64).reshape(len(stats), -1, 3)
    hyp, ref, match = stats[..., 0], stats[..., 1], stats[..., 2]
    counted = (hyp > 0) & (ref > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(counted, match / np.where(hyp > 0, hyp, 1.0), 0.0).sum(axis=1)
        recall = np.where(counted, match / np.where(ref > 0, ref, 1.0), 0.0).sum(axis=1)
        orders = counted.sum(axis=1)
        precision, recall = precision / np.maximum(orders, 1), recall / np.maximum(orders, 1)
        factor = metric.beta ** 2
        score = 100 * (1 + factor) * precision * recall / (factor * precision + recall)
    return np.where((orders > 0) & (precision + recall > 0), score, 0.0)


def scores_from_statistics(metric, stats: np.ndarray) -> np.ndarray:
    """The corpus score of each row of summed sentence statistics: vectorised for BLEU and chrF, sacrebleu's own
    function row by row otherwise."""
    if isinstance(metric, BLEU) and metric.smooth_method == "exp" and not metric.effective_order:
        return bleu_from_statistics(stats, metric)
    if isinstance(metric, CHRF) and not metric.eps_smoothing:
        return chrf_from_statistics(stats, metric)
    return np.array([metric._compute_score_from_stats(list(row)).score for row in stats])


@functools.lru_cache(maxsize=4)
def _metrics_with_references(tokenize: str, refs: tuple[str, ...]) -> dict:
    """:func:`_test_metrics` with ``refs`` cached (sacrebleu reads a reference set once)."""
    return {name: type(metric)(**({"tokenize": tokenize} if name == "BLEU" else {}), references=[list(refs)])
            for name, metric in _test_metrics(tokenize).items()}


@functools.lru_cache(maxsize=64)
def _cached_statistics(name: str, tokenize: str, refs: tuple[str, ...], hyps: tuple[str, ...]) -> np.ndarray:
    metric = _metrics_with_references(tokenize, refs)[name]
    stats = np.array(metric._extract_corpus_statistics(list(hyps), None), dtype=np.float64)
    stats.flags.writeable = False  # shared by every comparison of these hypotheses
    return stats


def sentence_statistics(name: str, hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> np.ndarray:
    """sacrebleu's per-sentence statistics (``m x d``) of metric ``name`` (BLEU, chrF), cached for the process."""
    check_same_length(hyps, refs, "a seed's hypotheses", "references")
    return _cached_statistics(name, tokenize, tuple(refs), tuple(hyps))


def _round_counts(sentences: np.ndarray, n_sentences: int) -> np.ndarray:
    """How often each round (a row of ``sentences``) drew each sentence: ``rounds x m``."""
    rounds = len(sentences)
    flat = (np.arange(rounds)[:, None] * n_sentences + sentences).ravel()
    return np.bincount(flat, minlength=rounds * n_sentences).reshape(rounds, n_sentences).astype(np.float64)


def resampled_seed_means(round_scores: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """Each round's mean over its drawn seeds, its deviation from the mean over all seeds scaled by
    :func:`seed_scale`: ``round_scores`` ``n x k``, ``drawn`` ``n x k`` seed indices."""
    full = round_scores.mean(axis=1)
    drawn_mean = np.take_along_axis(round_scores, drawn, axis=1).mean(axis=1)
    return full + seed_scale(round_scores.shape[1]) * (drawn_mean - full)


def seed_bootstrap(hyps_a_by_seed: Sequence[Sequence[str]], hyps_b_by_seed: Sequence[Sequence[str]],
                   refs: Sequence[str], n_samples: int = SEED_BOOTSTRAP_ROUNDS, seed: int = 12345,
                   tokenize: str = "13a", draws: SeedDraws | None = None) -> dict:
    """System B (``k_b`` seeds) against baseline A (``k_a`` seeds), for BLEU and chrF, by the seed-aware paired
    bootstrap of docs/results.md ('The table'): its spread includes the variance between training runs (Clark et al.
    2011). A system's round score is its mean over all seeds on the round's sentences plus :func:`seed_scale` times
    the drawn seeds' deviation from it. Seeds are not paired across systems; one seed each is a paired bootstrap over
    sentences.

    p: :func:`two_sided_bootstrap_p` with :func:`mc_standard_error`, beside :func:`welch_test`. ``draws`` (default
    :func:`seed_draws` of ``seed``) fixes the resampling. Returns ``{"test", "n_samples", "seed", "seeds_a",
    "seeds_b", "BLEU": {...}, "chrF": {...}}``, each metric with ``p_value``, ``p_mc_se``, means ``a`` and ``b``,
    ``delta``, its 95% percentile interval ``delta_ci`` and ``welch`` (None with one seed or no spread)."""
    n_seeds_a, n_seeds_b = len(hyps_a_by_seed), len(hyps_b_by_seed)
    if not n_seeds_a or not n_seeds_b:
        raise ScoringInputError("each system needs the outputs of at least one seed")
    if draws is None:
        draws = seed_draws(n_samples, len(refs), n_seeds_a, n_seeds_b, seed)
    rounds = len(draws.sentences)
    report = {"test": SEED_BOOTSTRAP_TEST, "n_samples": rounds, "seed": seed, "seeds_a": n_seeds_a,
              "seeds_b": n_seeds_b}
    for name, metric in _test_metrics(tokenize).items():
        stats_a = [sentence_statistics(name, hyps, refs, tokenize) for hyps in hyps_a_by_seed]
        stats_b = [sentence_statistics(name, hyps, refs, tokenize) for hyps in hyps_b_by_seed]
        full_a = scores_from_statistics(metric, np.array([stats.sum(axis=0) for stats in stats_a]))
        full_b = scores_from_statistics(metric, np.array([stats.sum(axis=0) for stats in stats_b]))
        deltas = np.empty(rounds)
        for start in range(0, rounds, ROUND_BLOCK):
            block = slice(start, min(start + ROUND_BLOCK, rounds))
            counts = _round_counts(draws.sentences[block], len(refs))
            round_a = np.stack([scores_from_statistics(metric, counts @ stats) for stats in stats_a], axis=1)
            round_b = np.stack([scores_from_statistics(metric, counts @ stats) for stats in stats_b], axis=1)
            deltas[block] = (resampled_seed_means(round_b, draws.seeds_b[block])
                             - resampled_seed_means(round_a, draws.seeds_a[block]))
        p_value = two_sided_bootstrap_p(deltas)
        report[name] = {"p_value": p_value, "p_mc_se": mc_standard_error(p_value, rounds), "a": float(full_a.mean()),
                        "b": float(full_b.mean()), "delta": float(full_b.mean() - full_a.mean()),
                        "delta_ci": [float(q) for q in np.percentile(deltas, [2.5, 97.5])],
                        "welch": welch_test(full_a, full_b)}
    return report


def _test_metrics(tokenize: str) -> dict:
    """The metrics the significance tests report, by the name the tables use."""
    return {"BLEU": BLEU(tokenize=tokenize), "chrF": CHRF()}


def paired_bootstrap(hyps_a: Sequence[str], hyps_b: Sequence[str], refs: Sequence[str], n_samples: int = 1000,
                     seed: int = 12345, tokenize: str = "13a") -> dict:
    """sacrebleu's paired bootstrap test of system B against baseline A, for BLEU and chrF.

    Returns {"BLEU": {...}, "chrF": {...}, "test", "n_samples", "seed"}, each metric with two-sided "p_value", the
    scores "a" and "b", and the bootstrap means "a_mean"/"b_mean" with 95% half-widths "a_ci"/"b_ci"."""
    check_same_length(hyps_a, refs, "system A", "references")
    check_same_length(hyps_b, refs, "system B", "references")
    if seed == 0:
        # PairedTest treats a seed of 0 as "no seed" and would draw from the OS.
        raise ValueError("seed must be a positive integer (sacrebleu treats 0 as unseeded)")
    metrics = _test_metrics(tokenize)
    with _sacrebleu_seed(seed):
        test = PairedTest([("A", list(hyps_a)), ("B", list(hyps_b))], metrics, references=[list(refs)],
                          test_type="bs", n_samples=n_samples)
        _, results = test()
    # PairedTest keys results by sacrebleu's score names ("BLEU", "chrF2") in the order of `metrics`.
    result_columns = [name for name in results if name != "System"]
    report = {"test": "paired bootstrap resampling (sacrebleu)", "n_samples": n_samples, "seed": seed}
    identical_outputs = list(hyps_a) == list(hyps_b)
    for name, column in zip(metrics, result_columns):
        baseline, system = results[column]
        report[name] = {
            # identical outputs: sacrebleu would report its minimum p, 1/(n+1)
            "p_value": 1.0 if identical_outputs else float(system.p_value),
            "a": float(baseline.score), "a_mean": float(baseline.mean), "a_ci": float(baseline.ci),
            "b": float(system.score), "b_mean": float(system.mean), "b_ci": float(system.ci),
        }
    return report


def check_length_edges(edges: Sequence[int]) -> None:
    if not edges or list(edges) != sorted(set(edges)) or edges[0] <= 0:
        raise ValueError(f"length edges must be positive and strictly increasing, got {list(edges)}")


def bleu_by_length(hyps: Sequence[str], refs: Sequence[str], edges: Sequence[int] = DEFAULT_LENGTH_EDGES,
                   tokenize: str = "13a") -> list[dict]:
    """Corpus BLEU per reference-length interval (Pu & Sima'an 2022, Figure 4).

    Length is the reference's whitespace tokens. edges (10, 20) give (0,10], (10,20], (20,inf); length 0 falls in the
    first. Returns per interval "bucket", "low", "high" (None for the last), "n_sentences" and "BLEU" (None when
    empty)."""
    check_same_length(hyps, refs)
    check_length_edges(edges)
    intervals = list(zip([0, *edges], [*edges, None]))
    members = {interval: [] for interval in intervals}
    for index, ref in enumerate(refs):
        length = len(ref.split())
        members[next(iv for iv in intervals if iv[1] is None or length <= iv[1])].append(index)
    rows = []
    for (low, high), chosen in members.items():
        hyps_in, refs_in = [hyps[i] for i in chosen], [refs[i] for i in chosen]
        score = BLEU(tokenize=tokenize).corpus_score(hyps_in, [refs_in]).score if chosen else None
        rows.append({"bucket": f"({low},{high}]" if high is not None else f"({low},inf)", "low": low, "high": high,
                     "n_sentences": len(chosen), "BLEU": score})
    return rows
