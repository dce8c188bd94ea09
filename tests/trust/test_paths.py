"""Symbolic links in a log root are never followed out of it (`rlrun.trust.paths`).

Each crafted case goes through `rlrun.main` with the leak detector on (tests/conftest.py) and asserts exit 2 and
one stderr line naming the path (or the safe outcome, stated), and that nothing outside the log root changed:
the file a link points to is neither read into a call nor written.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

import rlrun
from rlrun.runs import experiment_name, new_run_dir
from rlrun.trust import paths
from support import MEDDLING_TASK, SMALL_RSL_RL

EXPERIMENT = experiment_name(MEDDLING_TASK)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One small RSL-RL run of the meddling task: its run folder and its checkpoint's name."""
    root = tmp_path_factory.mktemp("trained") / "logs"
    result = rlrun.train(
        rlrun.TrainRequest(task=MEDDLING_TASK, num_envs=2, max_iterations=1, log_root=str(root), overrides=SMALL_RSL_RL)
    )
    return result.run_dir, result.checkpoint.name


@pytest.fixture
def place(tmp_path):
    """A log root and a folder outside it, both empty."""
    root, outside = tmp_path / "logs", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    return root, outside


def copy_run(trained, folder, name="2026-01-01_00-00-00"):
    """A copy of the trained run at `folder/name`."""
    source, _ = trained
    target = folder / name
    shutil.copytree(source, target)
    return target


def state(folder):
    """Every path under `folder` with its bytes (files) or its link target: what a write would change."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[path] = ("link", os.readlink(path))
        elif path.is_file():
            found[path] = ("file", path.read_bytes())
        else:
            found[path] = ("folder", None)
    return found


def refused(capsys, argv, *fragments):
    """Run the command line; assert exit 2 and one `rlrun: error:` line holding every fragment; return it."""
    code = rlrun.main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlrun: error: "), captured.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def play(root, *words):
    return ["play", "--task", MEDDLING_TASK, "--log_root", str(root), "--num_episodes", "1", "--num_envs", "2", *words]


def export(root, *words):
    return ["export", "--task", MEDDLING_TASK, "--log_root", str(root), "--validation_steps", "2", *words]


# --- reading: a checkpoint, or a folder in its path, that links outside ---------------------------------------


@pytest.mark.parametrize("selector", ["latest", "best", "path"])
def test_a_checkpoint_linked_outside_its_run_is_refused(capsys, trained, place, selector):
    root, outside = place
    run = copy_run(trained, root / "rsl_rl" / EXPERIMENT)
    name = trained[1]
    (run / name).replace(outside / name)  # a loadable checkpoint: it would play, were it followed
    (run / name).symlink_to(outside / name)
    before = state(outside)
    chosen = str(run / name) if selector == "path" else selector
    refused(capsys, play(root, "--checkpoint", chosen), f"checkpoint {str(run / name)!r} points to", "outside")
    assert state(outside) == before


def test_a_linked_folder_in_a_listed_checkpoints_path_is_refused(capsys, trained, place):
    root, outside = place
    run = copy_run(trained, root / "rsl_rl" / EXPERIMENT)
    name = trained[1]
    (outside / "sub").mkdir()
    (run / name).replace(outside / "sub" / name)
    (run / "sub").symlink_to(outside / "sub")
    manifest = json.loads((run / "run.json").read_text())
    manifest["checkpoints"] = [{**entry, "file": f"sub/{name}"} for entry in manifest["checkpoints"]]
    (run / "run.json").write_text(json.dumps(manifest))
    before = state(outside)
    refused(capsys, play(root, "--checkpoint", "latest"), str(run / "sub" / name), str(outside / "sub" / name))
    assert state(outside) == before


@pytest.mark.parametrize("command", [play, export])
def test_a_run_folder_swapped_for_a_link_after_planning_is_not_read(capsys, trained, place, monkeypatch, command):
    """The race between the check and the read: planning found the run inside the log root, then, before the
    library opens the checkpoint, the run folder is moved outside and a link put in its place. The file opened
    is checked, not its name: refused, and the checkpoint outside (loadable: it would play) is not used."""
    import rlrun.api.session

    root, outside = place
    run = copy_run(trained, root / "rsl_rl" / EXPERIMENT)
    moved = outside / run.name
    make_env = rlrun.api.session._make_env

    def swap_then_make_env(plan):
        run.rename(moved)
        run.symlink_to(moved)
        return make_env(plan)

    monkeypatch.setattr(rlrun.api.session, "_make_env", swap_then_make_env)
    code = rlrun.main(command(root, "--checkpoint", "latest"))
    line = capsys.readouterr().err.strip().splitlines()[-1]  # export says what it is doing before it
    assert code == 2 and line.startswith("rlrun: error: checkpoint "), line
    assert f"points to {str(moved / trained[1])!r}, outside {str(run)!r}" in line
    assert not (moved / "exported").exists()


def test_reads_of_a_run_s_files_are_confined_to_the_folder_resolved_before(place):
    """`confined` + `check_opened`: a file opened inside the folder passes; one that a link (in its path or as the
    file itself) takes outside is refused; outside the block, and with None, nothing is confined."""
    from rlrun.trust.checkpoints import read_bytes
    from rlrun.trust.limits import read_text

    root, outside = place
    (root / "run").mkdir()
    (root / "run" / "model.pt").write_bytes(b"inside")
    (outside / "model.pt").write_bytes(b"outside")
    (root / "run" / "linked.pt").symlink_to(outside / "model.pt")
    (root / "run" / "same.pt").symlink_to(root / "run" / "model.pt")  # a link that stays inside: fine
    home = paths.real(root / "run")
    with paths.confined(home):
        assert read_bytes(root / "run" / "model.pt", "a test checkpoint") == b"inside"
        assert read_bytes(root / "run" / "same.pt", "a test checkpoint") == b"inside"
        with pytest.raises(paths.OutsidePath, match=f"points to {str(outside / 'model.pt')!r}, outside"):
            read_bytes(root / "run" / "linked.pt", "a test checkpoint")
        with pytest.raises(paths.OutsidePath, match="points to"):
            read_text(root / "run" / "linked.pt", "configuration", max_bytes=100)
        with paths.confined(None):
            assert read_bytes(root / "run" / "linked.pt", "a test checkpoint") == b"outside"
        (root / "run").rename(root / "moved")  # the folder itself swapped for a link to elsewhere
        (root / "run").symlink_to(outside)
        with pytest.raises(paths.OutsidePath):
            read_bytes(root / "run" / "model.pt", "a test checkpoint")
    assert read_bytes(root / "run" / "model.pt", "a test checkpoint") == b"outside"  # the block is over
    with pytest.raises(KeyError), paths.confined(home):
        raise KeyError("the confinement ends however the block does")
    assert read_bytes(root / "moved" / "linked.pt", "a test checkpoint") == b"outside"


def test_the_path_of_an_open_file_is_known_here():
    """Confinement needs the system to name an open file's path (Linux's /proc, macOS's F_GETPATH)."""
    with open(__file__, "rb") as file:
        assert paths.opened_path(file.fileno()) == paths.real(__file__)


def test_a_run_folder_linked_outside_the_log_root_is_never_read(capsys, trained, place):
    root, outside = place
    real = copy_run(trained, outside, "planted")
    linked = root / "rsl_rl" / EXPERIMENT / "2026-01-01_00-00-00"
    linked.parent.mkdir(parents=True)
    linked.symlink_to(real)
    before = state(outside)
    for selector in ("latest", "best"):
        refused(capsys, play(root, "--checkpoint", selector), f"run folder {str(linked)!r} points to {str(real)!r}")
    assert state(outside) == before


def test_run_json_linked_outside_its_run_is_not_read(capsys, trained, place):
    root, outside = place
    run = copy_run(trained, root / "rsl_rl" / EXPERIMENT)
    (run / "run.json").replace(outside / "run.json")
    (run / "run.json").symlink_to(outside / "run.json")
    refused(capsys, play(root, "--checkpoint", "latest"), "is a link to", "outside the run folder")


def test_a_log_root_that_is_a_link_the_user_chose_is_followed(capsys, trained, place, tmp_path):
    """The safe outcome: the log root is the user's choice, so a linked root plays as a real one."""
    root, _ = place
    copy_run(trained, root / "rsl_rl" / EXPERIMENT)
    chosen = tmp_path / "my-logs"
    chosen.symlink_to(root)
    assert rlrun.main(play(chosen, "--checkpoint", "latest")) == 0, capsys.readouterr().err
    assert "played 1 episodes" in capsys.readouterr().out


# --- writing: export through a linked run folder or `exported/`, train through a linked experiment folder ----


def test_export_through_a_run_folder_linked_outside_is_refused(capsys, trained, place):
    root, outside = place
    real = copy_run(trained, outside, "run")
    linked = root / "rsl_rl" / EXPERIMENT / "2026-01-01_00-00-00"
    linked.parent.mkdir(parents=True)
    linked.symlink_to(real)
    before = state(outside)
    refused(capsys, export(root, "--checkpoint", str(linked / trained[1])), f"run folder {str(linked)!r} is a link")
    refused(capsys, export(root, "--checkpoint", "latest"), f"run folder {str(linked)!r} points to")
    assert state(outside) == before and not (real / "exported").exists()


def test_export_of_a_run_outside_the_log_root_refuses_a_linked_run_folder(capsys, trained, place, tmp_path):
    """A checkpoint the user names outside the log root: its run folder itself must not be a link."""
    root, outside = place
    real = copy_run(trained, outside, "run")
    elsewhere = tmp_path / "shared"
    elsewhere.mkdir()
    (elsewhere / "run").symlink_to(real)
    before = state(outside)
    refused(capsys, export(root, "--checkpoint", str(elsewhere / "run" / trained[1])), "is a link")
    assert state(outside) == before


def test_export_into_a_linked_exported_folder_is_refused(capsys, trained, place):
    root, outside = place
    run = copy_run(trained, root / "rsl_rl" / EXPERIMENT)
    (run / "exported").symlink_to(outside)
    before = state(outside)
    refused(capsys, export(root, "--checkpoint", "latest"), f"folder {str(run / 'exported')!r} is a link")
    assert state(outside) == before == {}


@pytest.mark.parametrize("linked", ["experiment", "library"])
def test_train_through_a_linked_experiment_or_library_folder_is_refused(capsys, place, linked):
    root, outside = place
    if linked == "experiment":
        (root / "rsl_rl").mkdir()
        (root / "rsl_rl" / EXPERIMENT).symlink_to(outside)
        where = root / "rsl_rl" / EXPERIMENT
    else:
        (root / "rsl_rl").symlink_to(outside)
        where = root / "rsl_rl"
    before = state(root)
    argv = ["train", "--task", MEDDLING_TASK, "--log_root", str(root), "--num_envs", "2", "--max_iterations", "1"]
    refused(capsys, [*argv, *SMALL_RSL_RL], f"folder {str(where)!r} is a link")
    assert state(outside) == {} and state(root) == before


# --- the rules themselves ------------------------------------------------------------------------------------


def test_new_run_dir_takes_a_planted_link_for_a_taken_name(place):
    root, outside = place
    import datetime

    now = datetime.datetime(2026, 1, 1)
    base = root / "rsl_rl" / "exp"
    base.mkdir(parents=True)
    (base / "2026-01-01_00-00-00").symlink_to(outside)
    claimed = new_run_dir(root, "rsl_rl", "exp", now=now)
    assert claimed == base / "2026-01-01_00-00-00_2" and claimed.is_dir() and not claimed.is_symlink()
    assert state(outside) == {}


def test_create_file_never_follows_a_link_nor_takes_an_existing_file(place):
    root, outside = place
    (root / "link").symlink_to(outside / "target")
    with pytest.raises(FileExistsError):
        paths.create_file(root / "link")
    assert not (outside / "target").exists()
    descriptor = paths.create_file(root / "new")
    os.close(descriptor)
    with pytest.raises(FileExistsError):
        paths.create_file(root / "new")


def test_replace_file_replaces_a_link_instead_of_writing_through_it(place):
    root, outside = place
    (outside / "precious").write_text("mine")
    (root / "report.md").symlink_to(outside / "precious")
    (root / f".report.md.{os.getpid()}.tmp").symlink_to(outside / "precious")  # the partial file's name
    paths.replace_file(root / "report.md", "# report\n")
    assert (outside / "precious").read_text() == "mine"
    assert not (root / "report.md").is_symlink() and (root / "report.md").read_text() == "# report\n"


def test_inside_resolves_links_and_dotdot(place):
    root, outside = place
    (root / "run").mkdir()
    assert paths.inside(root / "run" / "model.pt", root / "run", "checkpoint") == root / "run" / "model.pt"
    with pytest.raises(paths.OutsidePath, match="points to"):
        paths.inside(root / "run" / ".." / ".." / "outside" / "x", root / "run", "checkpoint")
    (root / "run" / "up").symlink_to(outside)
    with pytest.raises(paths.OutsidePath, match=f"outside {str(root / 'run')!r}"):
        paths.inside(root / "run" / "up" / "x", root / "run", "checkpoint")


def test_check_folders_refuses_what_real_folders_would_and_makes_nothing(tmp_path):
    from rlrun.errors import UserError
    from rlrun.trust.paths import OutsidePath, check_folders

    root = tmp_path / "logs"
    check_folders(root, "rsl_rl", "experiment")  # nothing there yet: nothing to refuse, and nothing made
    assert not root.exists()
    (root / "rsl_rl").mkdir(parents=True)
    (root / "rsl_rl" / "experiment").write_text("a file", encoding="utf-8")
    with pytest.raises(UserError, match="is a file, not a folder"):
        check_folders(root, "rsl_rl", "experiment", what="run folder")
    (root / "rsl_rl" / "experiment").unlink()
    (root / "rsl_rl" / "experiment").symlink_to(tmp_path)
    with pytest.raises(OutsidePath, match=r"run folder .* is a link"):
        check_folders(root, "rsl_rl", "experiment", what="run folder")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["logs"]
