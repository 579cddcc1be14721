"""Control characters other than tabs in input lines are ``FILE:LINE: ...``."""
import pytest
from conftest import run_preprocess

from fairseq_syntax.core.text_lines import TextLineError, decode_line

REST = "; a line may hold tabs but no other control character: remove it"


@pytest.mark.parametrize("raw, named, byte", [
    (b"the \x00cat", "U+0000 (NUL)", 5),
    (b"the cat\x1b[0m .", "U+001B (escape)", 8),
    (b"a\x0bb", "U+000B (vertical tab)", 2),
    (b"a\x0cb", "U+000C (form feed)", 2),
    (b"a\x08", "U+0008 (backspace)", 2),
    (b"\x7f", "U+007F (DEL)", 1),
    ("caf\u00e9 \u0085x".encode(), "U+0085", 7),  # a C1 control after a two-byte character: counted in bytes
    (b"\x01", "U+0001", 1),
])
def test_a_control_character_is_named_with_its_line_and_byte(raw, named, byte):
    with pytest.raises(TextLineError) as error:
        decode_line(raw, "F", 3)
    assert str(error.value) == f"F:3: a control character {named} at byte {byte} of the line{REST}"


def test_tabs_and_characters_outside_the_controls_are_text():
    line = "the\tcat \u00a0sees \u2028 caf\u00e9 \u00ad ."  # tab, no-break space, line separator, soft hyphen
    assert decode_line(line.encode(), "F", 1) == line


def put_on_line(path, number, old, new):
    lines = path.read_text().split("\n")
    assert old in lines[number - 1]
    lines[number - 1] = lines[number - 1].replace(old, new, 1)
    path.write_text("\n".join(lines))


def test_a_nul_in_the_target_is_refused_or_skipped_and_counted(small_corpus, tmp_path):
    target = small_corpus / "train.de"
    put_on_line(target, 3, "die ", "die \x00")
    with pytest.raises(SystemExit) as error:
        run_preprocess(small_corpus, tmp_path / "out", "sequence")
    assert str(error.value) == (f"error: {target}:3: a control character U+0000 (NUL) at byte 5 of the line{REST}\n"
                                "(use --skip-invalid to leave such pairs out and count them)")
    run_preprocess(small_corpus, tmp_path / "skip", "sequence", "--skip-invalid")
    assert (tmp_path / "skip" / "train.skipped.tsv").read_text() == (
        f"3\tunreadable line\t{target}:3: a control character U+0000 (NUL) at byte 5 of the line{REST}\n")
    for side in ("en", "de"):
        assert "\x00" not in (tmp_path / "skip" / f"dict.{side}.txt").read_text()


def test_a_nul_in_the_source_and_its_tree_alike_is_refused(small_corpus, tmp_path):
    """The same word with a NUL in source and tree: leaves and words agree, so only the reading can stop it."""
    source, tree = small_corpus / "valid.en", small_corpus / "valid.tree"
    put_on_line(source, 2, "the ", "w\x00a ")
    put_on_line(tree, 2, "(DT the)", "(DT w\x00a)")
    with pytest.raises(SystemExit) as error:
        run_preprocess(small_corpus, tmp_path / "out", "preorder")
    assert str(error.value).startswith(f"error: {source}:2: a control character U+0000 (NUL) at byte 2 of the line")

