"""manage.py import PATH… [--format auto|claude-code|…] [--namespace N] [--subject S] [--dry-run]

Imports transcript files (a folder: every .jsonl/.json file under it; a session file
brings its subagents/ folder; a subagent links to its session whichever comes first), with a
progress bar on a terminal (by file, and by line within a new Claude Code session) and a summary
at the end. Importing a file again creates nothing; a session file that has grown appends only
its new lines. Problems are listed with file and line number.
"""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from conversations.errors import StoreError
from conversations.formats import CHOICES
from conversations.imports import importer


def _transcripts(folder: Path) -> list[Path]:
    # A subagent's .meta.json sidecar is no transcript (the SessionStore door gets it as an entry).
    return sorted(f for f in folder.rglob("*") if f.is_file() and f.suffix in (".jsonl", ".json")
                  and not f.name.endswith(".meta.json"))


def _files(paths: list[str]) -> list[Path]:
    """The files to import, each once, in the order given: folders walked (a session's
    file sorts before its <session>/ folder), and a session file given alone brings its
    subagents (<session>/subagents/ beside it). A subagent links to its session in any
    order (imports/subagents.py)."""
    out, seen = [], set()

    def add(f: Path) -> None:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            out.append(f)

    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in _transcripts(p):
                add(f)
        elif p.is_file():
            add(p)
            beside = p.with_suffix("") / "subagents"
            if p.suffix == ".jsonl" and beside.is_dir():
                for f in _transcripts(beside):
                    add(f)
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
        files = _files(paths)
        if not files:
            raise CommandError("no .jsonl or .json files found")
        tty = hasattr(self.stdout, "isatty") and self.stdout.isatty()
        totals = {"files": 0, "unchanged": 0, "empty": 0, "failed": 0, "conversations": 0, "messages": 0,
                  "checkpoints": 0, "problems": 0}
        for n, path in enumerate(files, 1):
            def bar(lines_done: int = 0, lines: int = 0, n=n, path=path) -> None:
                share = (n - 1 + (lines_done / lines if lines else 0)) / len(files)
                done = int(30 * share)
                within = f" {lines_done:,}/{lines:,} lines" if lines else ""
                self.stdout.write(f"\r[{'#' * done}{'.' * (30 - done)}] {n}/{len(files)} {path.name[:40]:40}"
                                  f"{within:24}", ending="")
                self.stdout.flush()

            if tty:
                bar()
            try:
                result = importer.import_path(str(path), format=format, namespace=namespace, subject=subject,
                                              actor="system:import", dry_run=dry_run, progress=bar if tty else None,
                                              allow_empty=allow_empty)
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
            f"{totals['unchanged']} unchanged, {totals['empty']} with no message; "
            f"{totals['conversations']} conversation(s) created, "
            f"{totals['messages']} message(s), {totals['checkpoints']} checkpoint(s); "
            f"{totals['problems']} problem(s), {totals['failed']} failure(s).")
        if totals["failed"] and not totals["files"]:
            sys.exit(1)
