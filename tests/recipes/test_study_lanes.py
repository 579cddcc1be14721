"""examples/multi30k/study.sh, the study's lanes, with run.sh replaced by a stand-in that records what it was asked
to run: two lanes started together take every run exactly once, all seeds of a system before the next, each system
scored over its seeds once (a run whose record is packed is not run again); a run whose lane is gone is taken over;
a system whose data is not made is passed over by name; and each finished run is packed and committed with the
regenerated table and the seeds figure."""
import contextlib
import functools
import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import REPO

# The stand-in for run.sh: appends "NAME.seedK" (or "NAME.seeds SEEDS" for the scoring over seeds) to OUT/asked, writes
# the run's kept files and then its record where study.sh looks for them, and adds a line to RESULTS.md where run.sh
# regenerates it (the table's RESULTS.json is the test's).
FAKE_RUN = """#!/usr/bin/env bash
set -euo pipefail
IFS=: read -r name arch form extra <<< "$SYSTEMS"
PACKED_RUNS="$(dirname "$0")/../../fairseq_syntax/evaluation/packed_runs.py"
if [ -n "${SEEDS_ONLY:-}" ]; then  # the record names the decodes it read, its own and Sequence's, and its test
  echo "$name.seeds $SEEDS_ONLY" >> "$1/asked"
  systems=$name tests='{}'
  [ "$name" = sequence ] || systems="$name sequence" tests='{"sequence": {}}'
  read=()
  for system in $systems; do
    for seed in $SEEDS_ONLY; do
      python3 "$PACKED_RUNS" has "$RUNS/$system.seed$seed.gen" && read+=("$RUNS/$system.seed$seed.gen.gz")
    done
  done
  printf '{"significance": %s, "score_command": "fairseq-syntax-score %s"}' "$tests" "${read[*]}" \\
    > "$RUNS/$name.seeds.run.json"
  exit 0
fi
echo "$name$RUN_SUFFIX $form $SEED $PRECISION" >> "$1/asked"
sleep 0.2
for kept in train.log gen gen.log; do  # what run_system keeps of a run, gzipped
  echo "$name$RUN_SUFFIX $kept" | gzip -n > "$RUNS/$name$RUN_SUFFIX.$kept.gz"
done
# the record last, and whole, as score_system writes it: the other lane's packer takes a run with a record for
# finished, and packs what it has of it then
record="$RUNS/$name$RUN_SUFFIX.run.json"
echo '{}' > "$record.partial.$$" && mv "$record.partial.$$" "$record"
echo "<!-- $name$RUN_SUFFIX -->" >> "$(dirname "$0")/RESULTS.md"  # as run.sh regenerates the table
"""


@functools.cache
def study_listing() -> tuple[str, ...]:
    """``python3 -m fairseq_syntax.methods systems --study``, the study's specs, run in this process (once: the
    package is imported here already, where a new interpreter takes seconds to import it)."""
    from fairseq_syntax.methods.__main__ import main

    listing = io.StringIO()
    with contextlib.redirect_stdout(listing):
        main(["systems", "--study"])
    return tuple(listing.getvalue().split())


def study_specs(*names):
    by_name = {spec.split(":")[0]: spec for spec in study_listing()}
    return " ".join(by_name[name] for name in names)


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def study_repo(tmp_path):
    """A repository holding study.sh beside the stand-in run.sh, and the packer study.sh runs, with a seeds table
    already in RESULTS.json."""
    from fairseq_syntax.evaluation.results import render_json, render_markdown

    seeds = [{"dataset": "multi30k-10k", "system": "sequence", "arch": "transformer", "seed": seed,
              "command": f"fairseq-train --seed {seed}", "updates": 10, "epochs": 1, "wall_time_s": 1.0,
              "train_log": "log", "metrics": {"BLEU": bleu, "chrF": 50.0}, "significance": {}}
             for seed, bleu in ((1, 30.0), (2, 31.0))]
    repo = tmp_path / "repo"
    recipe = repo / "examples" / "multi30k"
    recipe.mkdir(parents=True)
    shutil.copy(Path(REPO) / "examples" / "multi30k" / "study.sh", recipe / "study.sh")
    (repo / "fairseq_syntax" / "evaluation").mkdir(parents=True)
    shutil.copy(Path(REPO) / "fairseq_syntax" / "evaluation" / "packed_runs.py", repo / "fairseq_syntax" / "evaluation")
    shutil.copy(Path(REPO) / "examples" / "pack_runs.py", repo / "examples")  # the packer study.sh runs
    (recipe / "run.sh").write_text(FAKE_RUN)
    (recipe / "runs").mkdir()
    (recipe / "RESULTS.md").write_text(render_markdown(seeds))
    (recipe / "RESULTS.json").write_text(json.dumps(render_json(seeds)))
    from fairseq_syntax.evaluation.study_answer import README_BEGIN, README_END
    (repo / "README.md").write_text(f"# Project\n\n{README_BEGIN} old`\nan old answer\n{README_END}\n")
    git(repo, "init", "-q")
    git(repo, "add", "README.md")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start")
    from fairseq_syntax.core.side_inputs import SIDE_INPUTS

    out = tmp_path / "work"
    for form in ("sequence", "preorder"):  # no sequence.random: udp_random's data is not made
        (out / "data-bin" / form).mkdir(parents=True)
    # Mask reads the parents side input: its data directory is made when the side input's index is there
    (out / "data-bin" / "preorder" / f"train.en-de.{SIDE_INPUTS['src_parents'].suffix}.idx").write_bytes(b"")
    return repo, recipe, out


def start_lane(repo, out, lane, systems, seeds="1 2"):
    """study.sh OUT LANE over SYSTEMS and SEEDS (one seed where a test needs no second run of a system: each run
    is a commit, and each commit draws the figure and writes the README's answer, a package import each)."""
    env = dict(os.environ, SYSTEMS=systems, SEEDS=seeds, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t", PYTHONPATH=str(REPO))
    # a session of its own, as the README starts it: study.sh sets its session's scheduling priority
    return subprocess.Popen(["bash", str(repo / "examples" / "multi30k" / "study.sh"), str(out), lane], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def hold_lock(path: Path) -> subprocess.Popen:
    """A process that holds ``path``'s lock (as a lane's training holds its run's claim) until its process group is
    killed (``release_lock``)."""
    holder = subprocess.Popen(["flock", str(path), "sleep", "600"], start_new_session=True)
    tries = 0
    while subprocess.run(["flock", "-n", str(path), "true"]).returncode == 0:  # until the holder has its lock
        tries += 1
        assert tries < 1000
    return holder


def release_lock(holder: subprocess.Popen) -> None:
    os.killpg(holder.pid, signal.SIGKILL)  # flock and the command it runs, which holds the lock too
    holder.wait()


def test_two_lanes_take_each_run_once_in_the_study_order_and_commit_it_with_the_table_and_figure(study_repo):
    repo, recipe, out = study_repo
    systems = study_specs("sequence", "mask", "udp_random")
    # a claim left by a lane that is gone (its lock file, locked by no one) is taken over
    (out / "claims").mkdir(parents=True)
    (out / "claims" / "mask.seed2.lock").write_text("")
    lanes = [start_lane(repo, out, lane, systems) for lane in ("a", "b")]
    logs = [lane.communicate(timeout=600)[0] for lane in lanes]
    assert [lane.returncode for lane in lanes] == [0, 0], logs

    asked = (out / "asked").read_text().splitlines()
    runs = [line.split()[0] for line in asked]
    assert sorted(runs) == sorted(["sequence.seed1", "sequence.seed2", "sequence.seeds",
                                   "mask.seed1", "mask.seed2", "mask.seeds"])  # each exactly once
    # all seeds of Sequence are asked for before any of Mask; each run on its system's data, fp32 by default
    assert max(runs.index(f"sequence.seed{k}") for k in (1, 2)) < min(runs.index(f"mask.seed{k}") for k in (1, 2))
    assert "sequence.seed2 sequence 2 fp32" in asked and "mask.seed1 preorder 1 fp32" in asked
    assert runs.index("mask.seeds") > max(runs.index(f"mask.seed{k}") for k in (1, 2))
    for log in logs:  # each seed's run on the control structures of its own seed: seed 1 sequence.random, 2 -s2
        assert f"udp_random.seed1 passed over, not made yet: {out}/data-bin/sequence.random" in log
        assert f"udp_random.seed2 passed over, not made yet: {out}/data-bin/sequence.random-s2" in log

    # each run a commit of its own: the runs' archive (its record, log and decode packed into it, with those of any
    # other run finished by then), the table and the figure drawn from RESULTS.json; no kept file is committed
    # outside it. A run that finishes while the other lane packs is packed and committed with that lane's run, and
    # the commit names both.
    subjects = git(repo, "log", "--format=%s").splitlines()
    assert all(subject.startswith("Multi30k study: ") and subject.endswith(" (device not recorded)")
               for subject in subjects[:-1]), subjects
    named = [subject[len("Multi30k study: "):-len(" (device not recorded)")].split(", ") for subject in subjects[:-1]]
    assert sorted(run for runs_named in named for run in runs_named) == sorted(runs), "\n".join(logs)
    assert set(git(repo, "show", "--name-only", "--format=", f"HEAD~{len(subjects) - 2}").split()) == {
        "examples/multi30k/runs/packed.tar.xz", "examples/multi30k/runs/SHA256SUMS", "examples/multi30k/RESULTS.md",
        "examples/multi30k/RESULTS.json", "examples/multi30k/seeds.png", "README.md"}
    # the README's study answer, rewritten from RESULTS.json (its path as the README reaches it) and committed
    readme = (repo / "README.md").read_text()
    assert "an old answer" not in readme and "examples/multi30k/RESULTS.json` from the study's table" in readme
    assert "| sequence | none (words only) | 2 of 5 | 30.50 ± 0.71 |" in readme and str(repo) not in readme
    # each run in its own commit (the table that changed with it goes into the next commit of either lane): the
    # archive that commit holds has the run's record and files; a record over seeds is a file of its own
    for back, runs_named in enumerate(named):
        changes = git(repo, "show", "--name-status", "--format=", f"HEAD~{back}").splitlines()
        assert not [change for change in changes if change.endswith(".gz")], changes
        if runs_named[0].endswith(".seeds"):
            assert runs_named == runs_named[:1] and f"A\texamples/multi30k/runs/{runs_named[0]}.run.json" in changes
            continue
        assert not [change for change in changes if change.endswith(".run.json")], changes
        archive = subprocess.run(["git", "show", f"HEAD~{back}:examples/multi30k/runs/packed.tar.xz"], cwd=repo,
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:xz") as tar:
            assert {f"{run}.{suffix}" for run in runs_named
                    for suffix in ("gen", "gen.log", "train.log", "run.json")} <= set(tar.getnames())
    assert sorted(path.name for path in (recipe / "runs").iterdir()) == [
        "SHA256SUMS", "mask.seeds.run.json", "packed.tar.xz", "sequence.seeds.run.json"]
    # both systems in the one archive, whichever lane packed which, and its checksum the one listed (read before any
    # member is)
    from fairseq_syntax.evaluation.packed_runs import archive_members
    assert sorted(archive_members(recipe / "runs" / "packed.tar.xz")) == sorted(
        f"{name}.seed{seed}.{suffix}" for name in ("mask", "sequence") for seed in (1, 2)
        for suffix in ("gen", "gen.log", "train.log", "run.json"))
    digest = hashlib.sha256((recipe / "runs" / "packed.tar.xz").read_bytes()).hexdigest()
    assert (recipe / "runs" / "SHA256SUMS").read_text() == f"{digest}  packed.tar.xz\n"
    from fairseq_syntax.evaluation.results import read_text
    assert read_text(recipe / "runs" / "mask.seed2.gen.gz") == "mask.seed2 gen\n"  # read from the archive
    assert (recipe / "seeds.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert git(repo, "status", "--porcelain", "--", "examples/multi30k/runs", "examples/multi30k/RESULTS.md",
               "README.md") == ""


@pytest.mark.parametrize("staged", [False, True], ids=["edited", "edited-and-staged"])
def test_a_readme_being_edited_is_not_taken_into_a_runs_commit(study_repo, staged):
    repo, recipe, out = study_repo
    edited = (repo / "README.md").read_text() + "a paragraph being written\n"
    (repo / "README.md").write_text(edited)
    if staged:  # git add'ed, not committed: still someone's edit
        git(repo, "add", "README.md")
    lane = start_lane(repo, out, "a", study_specs("sequence"), seeds="1")
    log = lane.communicate(timeout=600)[0]
    assert lane.returncode == 0, log
    assert ("== README.md has changes not committed: its study answer is not rewritten (python3 -m "
            "fairseq_syntax.evaluation.study_answer --readme README.md examples/multi30k/RESULTS.json)") in log
    assert (repo / "README.md").read_text() == edited  # the edit left as it was, and in no commit
    # the lane's commits (its run's, then its record over seeds'): none holds the README
    assert git(repo, "log", "--format=%s").splitlines() == [
        "Multi30k study: sequence.seeds (device not recorded)", "Multi30k study: sequence.seed1 (device not recorded)",
        "start"]
    assert "README.md" not in git(repo, "log", "--name-only", "--format=", "HEAD~2..HEAD")


def test_a_table_without_seeds_yet_is_committed_without_a_figure_and_says_why(study_repo):
    repo, recipe, out = study_repo
    (recipe / "RESULTS.json").write_text(json.dumps({"datasets": {"multi30k-10k": {"table": {"rows": []}}}}))
    lane = start_lane(repo, out, "a", study_specs("sequence"), seeds="1")
    log = lane.communicate(timeout=600)[0]
    assert lane.returncode == 0, log
    assert "== seeds figure not drawn: fairseq-syntax-plot: error: " in log
    assert "no dataset of several seeds in these results" in log
    assert not (recipe / "seeds.png").exists()
    assert git(repo, "log", "--format=%s").splitlines() == [  # each commit of the lane, made without the figure
        "Multi30k study: sequence.seeds (device not recorded)", "Multi30k study: sequence.seed1 (device not recorded)",
        "start"]
    assert log.count("== seeds figure not drawn: ") == 2


def test_a_run_committed_gzipped_before_is_packed_by_the_next_run_and_its_files_leave_git(study_repo):
    """A run that a lane of an earlier study.sh committed as gzipped files and a record (packed then only with its
    system, and without its record): the next run a lane finishes packs it too, and that run's commit removes its
    files from git."""
    repo, recipe, out = study_repo
    runs = recipe / "runs"
    (runs / "sequence.seed1.run.json").write_text("{}")
    for kept in ("train.log", "gen", "gen.log"):
        (runs / f"sequence.seed1.{kept}.gz").write_bytes(gzip.compress(f"sequence.seed1 {kept}\n".encode(), mtime=0))
    git(repo, "add", "examples/multi30k/runs")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "sequence.seed1, gzipped")
    lane = start_lane(repo, out, "a", study_specs("sequence"))
    log = lane.communicate(timeout=600)[0]
    assert lane.returncode == 0, log
    assert (out / "asked").read_text().split("\n")[0].split()[0] == "sequence.seed2"  # seed 1 has its record
    changes = git(repo, "show", "--name-status", "--format=", "HEAD~1").splitlines()  # sequence.seed2's commit
    assert sorted(change for change in changes if "sequence.seed1" in change) == [
        f"D\texamples/multi30k/runs/sequence.seed1.{kept}" for kept in ("gen.gz", "gen.log.gz", "run.json",
                                                                         "train.log.gz")]
    from fairseq_syntax.evaluation.results import read_text
    assert read_text(runs / "sequence.seed1.gen.gz") == "sequence.seed1 gen\n"  # from the archive now
    assert git(repo, "ls-files", "examples/multi30k/runs").split() == [
        f"examples/multi30k/runs/{name}" for name in ("SHA256SUMS", "packed.tar.xz", "sequence.seeds.run.json")]
    assert git(repo, "status", "--porcelain", "--", "examples/multi30k/runs") == ""


def test_a_run_another_lane_holds_is_left_to_it(study_repo):
    """A run whose claim is locked by a live process (the other lane, or the training it started) is not taken:
    the lane goes on with the next run, and the system is not scored over its seeds without it; nor is the next
    system, whose seeds are tested against Sequence's."""
    repo, recipe, out = study_repo
    (out / "claims").mkdir(parents=True)
    holder = hold_lock(out / "claims" / "sequence.seed1.lock")
    try:
        lane = start_lane(repo, out, "a", study_specs("sequence", "mask"))
        log = lane.communicate(timeout=600)[0]
    finally:
        release_lock(holder)
    assert lane.returncode == 0, log
    assert [line.split()[0] for line in (out / "asked").read_text().splitlines()] == [
        "sequence.seed2", "mask.seed1", "mask.seed2"]
    assert "== lane a: mask's seeds are scored once sequence's are (a later lane does it)" in log


def test_a_record_over_seeds_that_missed_a_run_finished_since_is_scored_again_over_every_seed(study_repo):
    """Sequence's seed 2 lands after Sequence and Mask were scored over seed 1: Sequence's record (which did not
    read its seed 2) and Mask's (tested against Sequence's seed 1 only) are scored again over seeds 1 and 2, Mask's
    only once no run of Mask or Sequence is in training; an up-to-date record is not scored again."""
    repo, recipe, out = study_repo
    first = start_lane(repo, out, "a", study_specs("sequence", "mask"), seeds="1")
    log = first.communicate(timeout=600)[0]
    assert first.returncode == 0, log
    asked = (out / "asked").read_text().splitlines()
    assert asked == ["sequence.seed1 sequence 1 fp32", "sequence.seeds 1", "mask.seed1 preorder 1 fp32",
                     "mask.seeds 1"]
    (out / "claims").mkdir(exist_ok=True)
    holder = hold_lock(out / "claims" / "mask.seed3.lock")  # another lane trains Mask's seed 3
    try:
        second = start_lane(repo, out, "b", study_specs("sequence"), seeds="1 2")
        log = second.communicate(timeout=600)[0]
    finally:
        release_lock(holder)
    assert second.returncode == 0, log
    assert (out / "asked").read_text().splitlines()[len(asked):] == [
        "sequence.seed2 sequence 2 fp32", "sequence.seeds 1 2"]
    assert ("== lane b: mask's record over seeds did not read sequence.seed2; scored again once the runs in "
            "training are in") in log
    assert "== lane b: sequence's record over seeds did not read sequence.seed2: scored again over seeds 1 2" in log
    # the next lane, Mask's seed 3 no longer in training: Mask's record is scored again first, and nothing else
    third = start_lane(repo, out, "c", study_specs("sequence"), seeds="1 2")
    log = third.communicate(timeout=600)[0]
    assert third.returncode == 0, log
    assert (out / "asked").read_text().splitlines()[len(asked) + 2:] == ["mask.seeds 1 2"], log
    records = {name: json.loads((recipe / "runs" / f"{name}.seeds.run.json").read_text())
               for name in ("sequence", "mask")}
    from fairseq_syntax.evaluation.seed_records import runs_read
    assert runs_read(records["mask"]) == {("mask", 1), ("sequence", 1), ("sequence", 2)}
    assert git(repo, "log", "-1", "--format=%s").strip() == "Multi30k study: mask.seeds (device not recorded)"
