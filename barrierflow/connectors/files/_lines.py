"""Reading a file as raw lines from a byte offset, in large chunks, never losing its place.

The position is always the byte offset of the next line not yet handed out, so a
checkpointed position restores by seeking: no line is read twice and none is skipped.
"""

from __future__ import annotations

from typing import Any

from barrierflow import _fs
from barrierflow.errors import SourceError

DEFAULT_CHUNK_SIZE = 1 << 20
"""How many bytes one read asks the filesystem for (1 MiB)."""


class LineFileReader:
    """Hands out the lines of one file, from a byte offset on. Mailbox thread only.

    A line is the bytes up to a `\\n` (excluded); a last line without `\\n` counts too.
    Assumes the file does not change while it is read.
    """

    def __init__(
        self, file: _fs.Location, offset: int = 0, chunk_size: int = DEFAULT_CHUNK_SIZE
    ) -> None:
        self.file = file
        self.position = offset
        """Byte offset of the next line not yet handed out."""
        self._chunk_size = chunk_size
        self._stream: Any = None
        self._lines: list[bytes] = []
        """Lines read ahead; `_lines[_next]` is the one starting at `position`."""
        self._next = 0
        self._unterminated = False
        """`_lines` holds the file's last line, which has no `\\n`."""
        self._partial: list[bytes] = []
        """Pieces read after the last `\\n` so far: the start of a line not yet complete."""
        self._at_eof = False
        self._line: int | None = 1 if offset == 0 else None
        """The 1-based line number of the line at `position`; None until it is needed after
        a start in the middle of the file (then counted once, see `first_line_number`)."""
        self._last_start = offset
        self._last_count = 0
        self._last_first_line: int | None = self._line

    def read_lines(self, max_lines: int) -> tuple[int, list[bytes]]:
        """Up to `max_lines` lines (without `\\n`) and the byte offset of the first one.

        Returns fewer only at the end of the file; an empty list once the file is finished.
        """
        start = position = self.position
        out: list[bytes] = []
        while len(out) < max_lines:
            if self._next >= len(self._lines) and not self._fill():
                break
            take = self._lines[self._next : self._next + max_lines - len(out)]
            self._next += len(take)
            position += sum(map(len, take)) + len(take)
            if self._unterminated and self._next == len(self._lines):
                position -= 1  # the file's last line has no newline
            out.extend(take)
        self.position = position
        self._last_start, self._last_count, self._last_first_line = start, len(out), self._line
        if self._line is not None:
            self._line += len(out)
        return start, out

    def first_line_number(self) -> int:
        """The 1-based line number of the first line the last `read_lines` returned (for
        messages about bad lines). Counted from the file's start once, after a start in
        the middle of the file; followed cheaply from then on."""
        if self._last_first_line is None:
            self._last_first_line = line_number_at(self.file, self._last_start, self._chunk_size)
            self._line = self._last_first_line + self._last_count
        return self._last_first_line

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    # ---- internals -----------------------------------------------------------------------------

    def _fill(self) -> bool:
        """Read ahead into `_lines`; False when there is nothing more to hand out."""
        self._lines, self._next, self._unterminated = [], 0, False
        while not self._lines:
            if self._at_eof:
                if not self._partial:
                    return False
                self._lines = [b"".join(self._partial)]
                self._partial, self._unterminated = [], True
                return True
            chunk = self._read_chunk()
            if not chunk:
                self._at_eof = True
                self.close()
            elif b"\n" not in chunk:
                self._partial.append(chunk)  # a long line: join once, when it ends
            else:
                parts = b"".join([*self._partial, chunk]).split(b"\n")
                tail = parts.pop()
                self._partial = [tail] if tail else []
                self._lines = parts
        return True

    def _read_chunk(self) -> bytes:
        if self._stream is None:
            self._stream = _fs.open_input_file(self.file)
            size = self._stream.size()
            if self.position > size:
                raise SourceError(
                    f"cannot resume {self.file} at byte {self.position}: the file has only "
                    f"{size} bytes (it changed since the checkpoint)"
                )
            self._stream.seek(self.position)
        return self._stream.read(self._chunk_size)


def line_number_at(file: _fs.Location, offset: int, chunk_size: int = DEFAULT_CHUNK_SIZE) -> int:
    """The 1-based number of the line starting at byte `offset` (for error messages only)."""
    newlines = 0
    with _fs.open_input_file(file) as stream:
        remaining = offset
        while remaining > 0:
            chunk = stream.read(min(chunk_size, remaining))
            if not chunk:
                break
            newlines += chunk.count(b"\n")
            remaining -= len(chunk)
    return newlines + 1
