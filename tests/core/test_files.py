"""fairseq_syntax.core.files: a file is written whole or not at all; a lock is held by one holder at a time."""
import pytest

from fairseq_syntax.core.files import atomic_path, held_lock, is_locked, write_atomically


def test_a_file_is_written_whole_or_not_at_all(tmp_path):
    path = tmp_path / "RESULTS.json"
    path.write_text("old\n")
    write_atomically(path, "new ü\n")
    assert path.read_bytes() == "new ü\n".encode() and [p.name for p in tmp_path.iterdir()] == ["RESULTS.json"]
    with pytest.raises(KeyboardInterrupt), atomic_path(path, sync=True) as temporary:
        open(temporary, "w").write("cut short")
        raise KeyboardInterrupt
    assert path.read_text() == "new ü\n" and [p.name for p in tmp_path.iterdir()] == ["RESULTS.json"]


def test_a_lock_has_one_holder_and_a_waiter_is_told(tmp_path):
    lock, told = tmp_path / "x.lock", []
    assert not is_locked(lock) and not lock.exists()  # asking makes no file
    with held_lock(lock) as held:
        assert held is not None and is_locked(lock)
        with held_lock(lock, wait=False) as second:  # another open file: flock refuses it as another process
            assert second is None
    assert not is_locked(lock)
    with held_lock(lock, shared=True), held_lock(lock, shared=True, waiting=lambda: told.append(1)) as reader:
        assert reader is not None and told == []  # shared holders do not wait on each other
    with held_lock(tmp_path) as folder:  # a folder's own lock (opened read-only)
        assert folder is not None and is_locked(tmp_path)
