"""manage.py import PATH… [--format auto|claude-code|…] [--namespace N] [--subject S] [--dry-run] [--allow-empty]

Imports transcript files (a folder: every transcript under it; a session file brings its
subagents/ folder; a subagent links to its session whichever comes first), with a progress bar
on a terminal (by file, and by line within a new Claude Code session) and a summary at the end.
A zip, an OpenCode storage folder or database, a Cline task folder are taken apart as the
upload page takes them (imports/containers.py). Importing a file again creates nothing; a
session file that has grown appends only its new lines. Problems are listed with file and
line number.
"""

import sys
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from conversations.errors import StoreError
from conversations.formats import CHOICES
from conversations.imports import archives, containers, importer


def _zip_pieces(path: Path) -> list[containers.Piece]:
    with path.open("rb") as f:
        archive, members = archives.open_archive(f, max_bytes=archives.NO_LIMIT)
        with archive:
            budget = archives.Budget(archives.NO_LIMIT)
            out = []
            for name, body, sidecar in containers.pieces_of_archive(
                    archive, members, lambda m: archives.read_member(archive, m, budget)):
                data = body if isinstance(body, bytes) else b"".join(body)
                if sidecar and sidecar.get("database"):
                    out.extend(containers.Piece(name=f"{name}/{n}", data=doc)
                               for n, doc in enumerate(_database_docs(data)))
                else:
                    out.append(containers.Piece(name=str(path.with_suffix("") / name), data=data, sidecar=sidecar))
            return out


def _database_docs(data: bytes) -> list[bytes]:
    with tempfile.NamedTemporaryFile(suffix=".db") as f:
        f.write(data)
        f.flush()
        return containers.opencode_database(Path(f.name))


def _files(paths: list[str]) -> list[containers.Piece]:
    """The transcripts to import, each once, in the order given: folders walked (a session's
    file sorts before its <session>/ folder), and a session file given alone brings its
    subagents (<session>/subagents/ beside it). A subagent links to its session in any
    order (imports/subagents.py)."""
    out, seen = [], set()

    def add(pieces) -> None:
        for piece in pieces:
            key = str(piece.path.resolve()) if piece.path is not None else piece.name
            if key not in seen:
                seen.add(key)
                out.append(piece)

    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            add(containers.pieces_of_folder(p))
        elif p.is_file() and p.suffix.lower() == ".zip":
            add(_zip_pieces(p))
        elif p.is_file():
            add(containers.pieces_of_file(p))
            beside = p.with_suffix("") / "subagents"
            if p.suffix == ".jsonl" and beside.is_dir():
                add(containers.pieces_of_folder(beside))
        else:
            raise CommandError(f"{raw}: no such file or folder")
    return out


class Command(BaseCommand):
    help = "Import transcripts (Claude Code, Codex, OpenAI, Anthropic, journals, memoryui exports)."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument("--format", default="auto", choices=CHOICES)
        parser.add_argument("--namespace", default=None,
                            help="where external ids live (default: the Claude Code project folder, or the format)")
        parser.add_argument("--subject", default="", help="whom the conversations are about")
        parser.add_argument("--dry-run", action="store_true", help="parse and check everything, write nothing")
        parser.add_argument("--allow-empty", action="store_true",
                            help="keep a file that holds no message as an empty conversation (default: report it, "
                                 "create nothing)")

    def handle(self, *args, paths, format, namespace, subject, dry_run, allow_empty=False, **options):
        try:
            files = _files(paths)
        except StoreError as exc:
            raise CommandError(exc.message) from None
        if not files:
            raise CommandError("no transcript found (.jsonl, .json, .aider.chat.history.md, an OpenCode database)")
        tty = hasattr(self.stdout, "isatty") and self.stdout.isatty()
        totals = {"files": 0, "unchanged": 0, "empty": 0, "skipped": 0, "failed": 0, "conversations": 0, "messages": 0,
                  "checkpoints": 0, "problems": 0}
        for n, path in enumerate(files, 1):
            piece, path = path, Path(path.name)

            def bar(lines_done: int = 0, lines: int = 0, n=n, path=path) -> None:
                share = (n - 1 + (lines_done / lines if lines else 0)) / len(files)
                done = int(30 * share)
                within = f" {lines_done:,}/{lines:,} lines" if lines else ""
                self.stdout.write(f"\r[{'#' * done}{'.' * (30 - done)}] {n}/{len(files)} {path.name[:40]:40}"
                                  f"{within:24}", ending="")
                self.stdout.flush()

            if piece.skipped:
                totals["skipped"] += 1
                self.stdout.write(("\n" if tty else "") + f"{path}: skipped, {piece.skipped}")
                continue
            if tty:
                bar()
            kw = dict(format=format, namespace=namespace, subject=subject, actor="system:import", dry_run=dry_run,
                      progress=bar if tty else None, allow_empty=allow_empty, sidecar=piece.sidecar)
            try:
                if piece.path is not None:
                    result = importer.import_path(str(piece.path), **kw)
                else:
                    result = importer.import_text(piece.data, path=piece.name, **kw)
            except StoreError as exc:
                totals["failed"] += 1
                self.stderr.write(("\n" if tty else "") + f"{path}: not imported: {exc.message}")
                continue
            except OSError as exc:
                totals["failed"] += 1
                self.stderr.write(f"{path}: cannot read: {exc}")
                continue
            totals["files"] += 1
            totals["unchanged"] += result.unchanged
            totals["empty"] += result.empty
            totals["conversations"] += len(result.created)
            totals["messages"] += result.messages
            totals["checkpoints"] += result.checkpoints
            totals["problems"] += len(result.problems)
            if not tty or result.problems or result.failed:
                verb = "unchanged" if result.unchanged else "empty, not imported" if result.empty else (
                    "would import" if dry_run else "imported")
                line = (f"{path}: {verb} ({result.format}) {len(result.created)} new conversation(s), "
                        f"{len(result.appended)} continued, {result.messages} message(s), "
                        f"{result.checkpoints} checkpoint(s)")
                self.stdout.write(("\n" if tty else "") + line)
            for problem in result.problems:
                self.stdout.write(f"  {path}:{problem.line or '-'}: {problem.reason}")
            for fail in result.failed:
                totals["failed"] += 1
                self.stderr.write(f"  {path}: conversation {fail['title'] or fail['key']!r} not imported: "
                                  f"{fail['reason']}")
        if tty:
            self.stdout.write(f"\r[{'#' * 30}] {len(files)}/{len(files)}" + " " * 64)
        self.stdout.write(
            f"{'Dry run: nothing written. ' if dry_run else ''}{totals['files']} file(s) read, "
            f"{totals['unchanged']} unchanged, {totals['empty']} with no message"
            f"{', ' + str(totals['skipped']) + ' skipped' if totals['skipped'] else ''}; "
            f"{totals['conversations']} conversation(s) created, "
            f"{totals['messages']} message(s), {totals['checkpoints']} checkpoint(s); "
            f"{totals['problems']} problem(s), {totals['failed']} failure(s).")
        if totals["failed"] and not totals["files"]:
            sys.exit(1)
