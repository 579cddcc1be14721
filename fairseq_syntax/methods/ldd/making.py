"""How ``src_ldd`` is made into a ``sequence`` data directory: the maker the method declares
(:class:`~fairseq_syntax.core.side_data.SideData`), running ``fairseq-syntax-preprocess-dependencies``
(:mod:`.preprocess`) with the label groups of the parses' scheme (``stanford``, Appendix A, or ``universal``).
Imports neither torch nor fairseq until it makes something."""
import os
from collections.abc import Mapping

from fairseq_syntax.core.side_data import SideDataJob


def settings(parses: Mapping[str, str]) -> dict:
    """The label scheme of the dependency parses (their record's, else the one their labels tell): the label
    groups the distributions are summed into."""
    from fairseq_syntax.parsing.parse_records import labels_of

    return {"labels": labels_of(parses["arcs"])}


def make(job: SideDataJob) -> None:
    """``fairseq-syntax-preprocess-dependencies`` over every split of ``job`` (its prefixes: the split's BPE'd
    source beside its arcs file, linked in the scratch folder)."""
    from fairseq_syntax.methods.ldd import preprocess

    prefixes, suffix = [], "arcs.jsonl.gz" if job.splits[0].parses["arcs"].endswith(".gz") else "arcs.jsonl"
    for split in job.splits:
        prefix = os.path.join(job.scratch, split.split)
        os.symlink(os.path.abspath(split.source), f"{prefix}.{job.source_lang}")
        os.symlink(os.path.abspath(split.parses["arcs"]), f"{prefix}.{suffix}")
        prefixes += [f"--{split.split}pref", prefix]
    preprocess.main(["--source-lang", job.source_lang, "--target-lang", job.target_lang, *prefixes,
                     "--arcs-suffix", suffix, "--labels", str(job.settings["labels"]), "--destdir", job.destdir])
