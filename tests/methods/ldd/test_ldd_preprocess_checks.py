"""fairseq-syntax-preprocess-dependencies on bad settings and on data directories it must not trust: a floor that
keeps nothing, a directory made with --skip-invalid (its skipped lines are left out of the arcs too), side data
tied to the token data it was made for (issue 35)."""
import pytest

from fairseq_syntax.methods.ldd import preprocess as preprocess_dependencies


def dependencies_error(raw, dest, *extra) -> str:
    with pytest.raises(SystemExit) as error:
        preprocess_dependencies.main(["--destdir", str(dest), "-s", "en", "-t", "de", "--labels", "stanford",
                                      "--trainpref", f"{raw}/train", *extra])
    return str(error.value)


def test_a_floor_above_one_is_refused(small_corpus, tmp_path):
    assert dependencies_error(small_corpus, tmp_path, "--floor", "1.5") == (
        "error: --floor 1.5 is above 1: no probability reaches it, so nothing would be kept")
