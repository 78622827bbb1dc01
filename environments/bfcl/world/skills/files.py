"""The file system's actions (GorillaFileSystem, and MathAPI over a data file): notes,
folders tidied, copies, renames, counts, sorted text, listings and statistics."""

from __future__ import annotations

from environments.bfcl.world.generator import EXTENSIONS, STEMS, SUBFOLDERS, WORDS
from environments.bfcl.world.skills.session import Act, Session, sentence
from rods_env.domain import SkillUnavailable


def fs_note(s: Session, items: int) -> Act:
    folder, _ = s.folder_with_files(0)
    name = s.new_name(folder, STEMS, s.rng.choice(EXTENSIONS[:2]))
    text = sentence(s.rng)
    s.go(folder)
    s.save(name, text)
    request = s.pick((
        f"In {folder}, create {name} and write '{text}' in it.",
        f"Please go into {folder}, make a new file {name} and put '{text}' inside.",
        f"I need a note called {name} in {folder} saying '{text}'.",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "file": name, "text": text})


def fs_organize(s: Session, items: int) -> Act:
    """Move every file of one kind in a folder (found by listing it) into a new folder."""
    options = [
        (name, ext, hits)
        for name, ext, hits, total in s.kinds()
        if len(hits) == items and total > len(hits)
    ]
    if not options:
        raise SkillUnavailable(f"no folder with exactly {items} files of one kind")
    folder, ext, moved = s.rng.choice(options)
    new = s.new_name(folder, [*SUBFOLDERS, *WORDS])
    s.go(folder)
    s.call("ls")
    s.call("mkdir", dir_name=new)
    for f in moved:
        s.call("mv", source=f, destination=new)
    kind = ext[1:]  # "csv": a word, where ".csv" would read as stray punctuation
    request = s.pick((
        f"Inside {folder}, make a folder called {new} and move all the {kind} files into it.",
        f"Tidy up {folder}: create a subfolder {new} and put every {kind} file in there.",
        f"Could you gather the {kind} files of {folder} into a new folder named {new}?",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "new folder": new})


def fs_copy(s: Session, items: int) -> Act:
    folder, file = s.file_in_folder(1)
    stem, _, ext = file.rpartition(".")
    copy = s.new_name(folder, [f"{stem}_{w}" for w in ("copy", "backup", "v2", "old")], "." + ext)
    s.go(folder)
    s.call("cp", source=file, destination=copy)
    request = s.pick((
        f"Make a copy of {file} in {folder} and call it {copy}.",
        f"Duplicate {file} (it's in {folder}) as {copy}.",
        f"In {folder}, copy {file} to {copy}, please.",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "file": file, "copy name": copy})


def fs_rename(s: Session, items: int) -> Act:
    folder, file = s.file_in_folder(1)
    ext = "." + file.rpartition(".")[2]
    new = s.new_name(folder, [f"{w}_{st}" for w in WORDS[:6] for st in STEMS[:4]], ext)
    s.go(folder)
    s.call("mv", source=file, destination=new)
    request = s.pick((
        f"Rename {file} in {folder} to {new}.",
        f"Over in {folder}, {file} should be called {new} from now on.",
        f"Change the name of {file} ({folder} folder) to {new}.",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "file": file, "new name": new})


def fs_remove(s: Session, items: int) -> Act:
    folder, file = s.file_in_folder(2)
    s.go(folder)
    s.call("rm", file_name=file)
    request = s.pick((
        f"Delete {file} from {folder}; I don't need it anymore.",
        f"Please remove {file} in {folder}.",
        f"Get rid of {file}, it's in {folder}.",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "file": file})


def fs_count(s: Session, items: int) -> Act:
    folder, file = s.file_in_folder(1)
    mode, unit = s.rng.choice((("l", "lines"), ("w", "words"), ("c", "characters")))
    out = s.new_name(folder, [f"{w}_count" for w in ("line", "word", "char", "total")], ".txt")
    s.go(folder)
    count = s.call("wc", file_name=file, mode=mode)["count"]
    s.save(out, str(count))
    request = s.pick((
        f"How many {unit} does {file} in {folder} have? Save just the number in a new file "
        f"{out} and tell me.",
        f"Count the {unit} of {file} (in {folder}), write the count alone into {out} there, "
        "and let me know what it is.",
    ))  # fmt: skip
    return Act(request, outputs=(str(count),), facts={"folder": folder, "file": file})


def fs_sorted(s: Session, items: int) -> Act:
    folder, file = s.file_in_folder(1, (".txt", ".md"))
    out = s.new_name(
        folder, [f"{file.rpartition('.')[0]}_{w}" for w in ("sorted", "ordered")], ".txt"
    )
    s.go(folder)
    content = s.call("sort", file_name=file)["sorted_content"]
    s.save(out, content)
    request = s.pick((
        f"Sort the lines of {file} in {folder} and save the sorted text as {out}.",
        f"In {folder}, put the lines of {file} in order and store them in a new file {out}.",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "file": file, "new file": out})


def fs_list(s: Session, items: int) -> Act:
    """A read turn: the files of a folder with one extension (others compete)."""
    options = [
        (name, ext, hits) for name, ext, hits, total in s.kinds() if hits and total - len(hits) >= 2
    ]
    if not options:
        raise SkillUnavailable("no folder mixes file kinds")
    folder, ext, hits = s.rng.choice(options)
    s.go(folder)
    s.call("ls")
    request = s.pick((
        f"Which {ext[1:]} files are in {folder}? Just name them.",
        f"List the {ext[1:]} files I have in {folder}.",
    ))  # fmt: skip
    return Act(request, outputs=tuple(hits), facts={"folder": folder})


def fs_stats(s: Session, items: int) -> Act:
    """Mean of a CSV column, saved to a file (MathAPI)."""
    folder, file = s.file_in_folder(1, ".csv")
    rows = [r.split(", ") for r in s.content(folder, file).splitlines()[1:]]
    column, label = s.rng.choice(((1, "qty"), (2, "price")))
    numbers = [float(r[column]) for r in rows]
    out = s.new_name(folder, [f"{label}_{w}" for w in ("mean", "average", "avg")], ".txt")
    s.go(folder)
    s.call("cat", file_name=file)
    mean = s.call("mean", numbers=numbers)["result"]
    s.save(out, str(mean))
    request = s.pick((
        f"What's the average {label} in {file} in {folder}? Write it into a new file {out} "
        "there and tell me the value.",
        f"Work out the mean of the {label} column of {file} ({folder}), save it as {out}, "
        "and tell me what it is.",
    ))  # fmt: skip
    return Act(request, outputs=(str(mean),), facts={"folder": folder, "file": file})


def file_text(s: Session) -> tuple[str, str, str]:
    """Read a short text file (folder, file, content) for a cross-class action."""
    folder, file = s.file_in_folder(1, (".txt", ".md"))
    s.go(folder)
    content = s.call("cat", file_name=file)["file_content"]
    return folder, file, content
