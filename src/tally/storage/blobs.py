"""The file store: every file's bytes as received, kept for audit under TALLY_HOME/files.

The one writer of files: uploads and downloads both arrive as chunks (an upload's body,
`net.fetch`'s download) and `BlobStore.write` alone puts them on disk. With workers on
several machines the folder must be shared (e.g. NFS) for uploads; downloads are
written by the worker that fetches them.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tally.storage.home import make_private_dir, open_private


@dataclass(frozen=True)
class StoredBlob:
    path: Path
    size: int
    sha256: str


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, resource_id: int, file_id: int) -> Path:
        folder = make_private_dir(self.root / str(resource_id))
        return folder / f"{file_id}.data"

    def incoming_path(self, name: str) -> Path:
        folder = make_private_dir(self.root / "incoming")
        return folder / name

    @property
    def staging_dir(self) -> Path:
        """Where loads stage their rows (scratch databases, decision 0013)."""
        return self.root / "staging"

    def write(self, path: Path, chunks: Iterable[bytes]) -> StoredBlob:
        """Write `chunks` to `path` (replacing it), hashing and counting on the way.

        Atomic: a temp file beside `path`, fsynced, then renamed into place, so `path` is
        either complete or untouched. Whatever the chunks raise (a download over its limit,
        an upload too large) propagates and leaves no file behind. The temp file's name is
        unique: two writers of one path (a worker whose lease ran out and the one that took
        the file over) cannot mix their bytes; the last rename wins, whole.
        """
        digest = hashlib.sha256()
        size = 0
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
        try:
            with os.fdopen(open_private(temporary, exclusive=True), "wb") as handle:
                for chunk in chunks:
                    digest.update(chunk)
                    size += len(chunk)
                    handle.write(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            temporary.replace(path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return StoredBlob(path, size, digest.hexdigest())
