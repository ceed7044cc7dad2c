"""A source's files as the ingestion API reports them: listed in pages, or one by id."""

from __future__ import annotations

from sqlalchemy import Engine

from tally.core.errors import FileNotFoundInSourceError
from tally.core.files import FileRecord
from tally.services.catalogue import get_owned_source
from tally.storage import files
from tally.storage.schema import is_storable_id


class FileService:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def list_source_files(
        self, *, workspace_id: int, source_id: int, after_id: int, limit: int
    ) -> list[FileRecord]:
        """The source's files with ids above `after_id`, oldest first; 404 unless this
        workspace owns the source."""
        with self._engine.connect() as conn:
            get_owned_source(conn, workspace_id, source_id)
            return files.list_files(conn, source_id, limit=limit, after_id=after_id)

    def get_source_file(self, *, workspace_id: int, source_id: int, file_id: int) -> FileRecord:
        with self._engine.connect() as conn:
            get_owned_source(conn, workspace_id, source_id)
            record = files.get_file(conn, file_id) if is_storable_id(file_id) else None
        if record is None or record.resource_id != source_id:
            raise FileNotFoundInSourceError()
        return record
