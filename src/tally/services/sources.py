"""Sources defined through the ingestion API (POST /api/v2/sources): declared columns or
a placeholder, and a status-callback endpoint, created in one transaction."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.encodings import DEFAULT_ENCODING
from tally.core.formats import PLAIN_LAYOUT, FileLayout
from tally.core.sealing import SecretBox
from tally.services.callback_endpoints import CallbackConfig, add_callback_endpoint
from tally.services.catalogue import create_source_in
from tally.storage.engine import write_connection
from tally.storage.resources import APPEND, Resource


@dataclass(frozen=True)
class SourceDefinition:
    name: str
    folder_id: int | None = None
    columns: tuple[Column, ...] | None = None  # None: a placeholder source
    callback: CallbackConfig | None = None
    encoding: str = DEFAULT_ENCODING  # of the source's files (decision 0015)
    layout: FileLayout = PLAIN_LAYOUT  # lines skipped, declared formats (issue 32)
    mode: str = APPEND  # files append rows, or replace them all (issue 32)


class SourceService:
    def __init__(self, engine: Engine, box: SecretBox) -> None:
        self._engine = engine
        self._box = box

    def create_source(self, *, workspace_id: int, definition: SourceDefinition) -> Resource:
        """The source, its table and its status-callback endpoint, in one transaction.

        Without columns it is a placeholder that takes its columns from the first file;
        with columns every file must bring exactly those (in any order).
        """
        now = utc_now()
        with write_connection(self._engine) as conn, conn.begin():
            source = create_source_in(
                conn,
                workspace_id=workspace_id,
                name=definition.name,
                folder_id=definition.folder_id,
                encoding=definition.encoding,
                columns=definition.columns,
                layout=definition.layout,
                mode=definition.mode,
            )
            add_callback_endpoint(conn, self._box, source.id, definition.callback, now)
        return source
