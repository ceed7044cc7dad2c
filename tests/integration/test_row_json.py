"""Each row's stored JSON text (decision 0011): byte for byte what a page renders, on
both backends, for every type and awkward value; used where present, rendered where
not; cleared when a load changes stored values; filled by the workers' job."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine

from support.awkward import AWKWARD, QUERIES
from support.factories import Tenant, make_source, read_body, read_data, write_file
from tally.runtime import Runtime
from tally.services.catalogue import SourceCatalogue
from tally.services.loader.load import load_into
from tally.storage import resources
from tally.storage.engine import write_connection
from tally.storage.resources import Resource


def pages(runtime: Runtime, tenant: Tenant, resource_id: int) -> list[bytes]:
    return [read_body(runtime, tenant, resource_id, **q) for q in QUERIES]  # type: ignore[arg-type]


def stored(engine: Engine, resource: Resource) -> list[str | None]:
    with engine.connect() as conn:
        sql = f"SELECT _json FROM {resource.table_name} ORDER BY _row_id"
        return list(conn.exec_driver_sql(sql).scalars())


def load_unfinished(engine: Engine, resource: Resource, content: str) -> None:
    """A file's rows added as a load leaves them: no worker has run since."""
    path = write_file(content)
    try:
        with write_connection(engine) as conn, conn.begin():
            load_into(conn, resource.id, path)
    finally:
        path.unlink()


def forget(engine: Engine, resource: Resource) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE {resource.table_name} SET _json = NULL")


def test_stored_text_is_what_a_page_renders_byte_for_byte(runtime: Runtime, tenant: Tenant) -> None:
    resource = make_source(runtime.engine, tenant, AWKWARD)  # finished as a worker does
    assert None not in stored(runtime.engine, resource)
    with_text = pages(runtime, tenant, resource.id)
    forget(runtime.engine, resource)
    rendered = pages(runtime, tenant, resource.id)
    assert with_text == rendered
    # and half of each: the first two rows stored again, the others rendered
    with write_connection(runtime.engine) as conn, conn.begin():
        conn.exec_driver_sql(f"UPDATE resources SET rendered_version = 0 WHERE id = {resource.id}")
    runtime.catalogue.finish_resource(resource.id)
    with runtime.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE {resource.table_name} SET _json = NULL WHERE _row_id > 2")
    assert pages(runtime, tenant, resource.id) == rendered


def test_a_page_of_whole_rows_reads_the_stored_text(runtime: Runtime, tenant: Tenant) -> None:
    """Only whole rows (no `fields`, or every field in order) are read from the text."""
    resource = make_source(runtime.engine, tenant, "id,memo\n1,a\n2,b\n")
    with runtime.engine.begin() as conn:
        conn.exec_driver_sql(
            f'UPDATE {resource.table_name} SET _json = \'{{"id":1,"memo":"stored"}}\''
            " WHERE _row_id = 1"
        )
    assert b'"memo":"stored"' in read_body(runtime, tenant, resource.id)
    assert b'"memo":"stored"' in read_body(runtime, tenant, resource.id, fields="id,memo")
    assert b'"memo":"a"' in read_body(runtime, tenant, resource.id, fields="memo,id")
    assert b'"memo":"a"' in read_body(runtime, tenant, resource.id, fields="memo")


@pytest.mark.parametrize("ordering", [None, "-id", "memo"])
def test_a_page_chosen_by_another_column_has_exactly_its_rows(
    runtime: Runtime, tenant: Tenant, ordering: str | None
) -> None:
    """A filter on a column other than the ordering reads the rows to choose them; on
    PostgreSQL the page's values are carried out of that choice (pages.
    _rendered_after_choosing). Whole rows (stored text or rendered) and chosen fields,
    system columns among them, are the filter's rows in order, on every page."""
    rows = "".join(f"{n},{n % 3},m{n:02}\n" for n in range(1, 41))
    resource = make_source(runtime.engine, tenant, "id,kind,memo\n" + rows)
    with runtime.engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE {resource.table_name} SET _json = NULL WHERE _row_id IN (2, 4, 7, 9, 12, 30)"
        )
    everything = read_data(runtime, tenant, resource.id, ordering=ordering)
    kept = [row for row in everything if row["kind"] == 1]
    with_system = read_data(runtime, tenant, resource.id, fields="kind,memo,_row,_file_id")
    system = {row["memo"]: row for row in with_system}
    for page in (1, 2, 3):
        query = {"filters": [("kind", "1")], "ordering": ordering, "page": page, "page_size": 5}
        expected = kept[(page - 1) * 5 : page * 5]
        assert read_data(runtime, tenant, resource.id, **query) == expected
        chosen = read_data(runtime, tenant, resource.id, fields="memo,_row,_file_id", **query)
        assert chosen == [
            {name: system[row["memo"]][name] for name in ("memo", "_row", "_file_id")}
            for row in expected
        ]


def test_a_load_leaves_its_rows_to_the_workers_job(runtime: Runtime, tenant: Tenant) -> None:
    resource = make_source(runtime.engine, tenant, "id,memo\n1,a\n")
    load_unfinished(runtime.engine, resource, "id,memo\n2,b\n3,c\n")
    assert stored(runtime.engine, resource) == ['{"id":1,"memo":"a"}', None, None]
    before = read_body(runtime, tenant, resource.id)
    assert runtime.catalogue.finish_one_unfinished() is True
    assert stored(runtime.engine, resource) == [
        '{"id":1,"memo":"a"}',
        '{"id":2,"memo":"b"}',
        '{"id":3,"memo":"c"}',
    ]
    with runtime.engine.connect() as conn:
        finished = resources.get_resource(conn, resource.id)
    assert finished.rendered_version == finished.data_version
    assert runtime.catalogue.finish_one_unfinished() is False
    assert read_body(runtime, tenant, resource.id) == before


class _HeldFinish:
    """Storing a resource's row text, through the public storage call the catalogue
    makes, held on its first call until the test lets it go on: a second thread's job
    runs while the first is inside a finish."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.inside, self.go_on = threading.Event(), threading.Event()
        self.finished: list[int] = []
        store = resources.store_missing_text

        def held(engine: Engine, resource: Resource) -> int:
            if not self.inside.is_set():
                self.inside.set()
                assert self.go_on.wait(30)
            try:
                return store(engine, resource)
            finally:
                self.finished.append(resource.id)

        monkeypatch.setattr(resources, "store_missing_text", held)


def test_threads_of_one_process_finish_different_resources(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker thread does not wait behind another finishing the same rows: it takes the
    next resource, or finds nothing to do, and goes on to its other jobs."""
    first = make_source(runtime.engine, tenant, "id,memo\n1,a\n", name="first")
    second = make_source(runtime.engine, tenant, "id,memo\n1,a\n", name="second")
    load_unfinished(runtime.engine, first, "id,memo\n2,b\n")
    load_unfinished(runtime.engine, second, "id,memo\n2,b\n")
    catalogue, hold = SourceCatalogue(runtime.engine), _HeldFinish(monkeypatch)
    held = threading.Thread(target=catalogue.finish_one_unfinished)
    held.start()
    try:
        assert hold.inside.wait(30)
        assert catalogue.finish_one_unfinished() is True  # the other one, at once
        assert hold.finished == [second.id]
        assert catalogue.finish_one_unfinished() is False  # the first is in hand
    finally:
        hold.go_on.set()
        held.join()
    assert hold.finished == [second.id, first.id]
    assert catalogue.finish_one_unfinished() is False
    assert stored(runtime.engine, first)[-1] == '{"id":2,"memo":"b"}'


def test_the_job_skips_a_resource_finished_after_its_delivery(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread that delivered a file finishes its rows itself (`finish_resource`);
    meanwhile another thread's job finds nothing to do instead of waiting for them."""
    source = make_source(runtime.engine, tenant, "id,memo\n1,a\n")
    load_unfinished(runtime.engine, source, "id,memo\n2,b\n")
    catalogue, hold = SourceCatalogue(runtime.engine), _HeldFinish(monkeypatch)
    delivering = threading.Thread(target=catalogue.finish_resource, args=(source.id,))
    delivering.start()
    try:
        assert hold.inside.wait(30)
        assert catalogue.finish_one_unfinished() is False
    finally:
        hold.go_on.set()
        delivering.join()
    assert hold.finished == [source.id]
    assert stored(runtime.engine, source)[-1] == '{"id":2,"memo":"b"}'


def test_a_widened_column_clears_every_stored_text(runtime: Runtime, tenant: Tenant) -> None:
    """A file with more fractional digits rescales the stored numbers: the texts made
    with the old digits must go in the same transaction, or pages would show 2.5."""
    resource = make_source(runtime.engine, tenant, "id,amount\n1,2.5\n")
    assert stored(runtime.engine, resource) == ['{"id":1,"amount":2.5}']
    load_unfinished(runtime.engine, resource, "id,amount\n2,0.125\n")
    assert stored(runtime.engine, resource) == [None, None]
    assert b'"amount":2.500}' in read_body(runtime, tenant, resource.id)
    runtime.catalogue.finish_resource(resource.id)
    assert stored(runtime.engine, resource) == [
        '{"id":1,"amount":2.500}',
        '{"id":2,"amount":0.125}',
    ]


def test_rows_are_stored_in_batches_of_any_size(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tally.storage.resource_tables import row_json

    monkeypatch.setattr(row_json, "ROW_JSON_BATCH_ROWS", 3)
    content = "id,memo\n" + "".join(f"{n},m{n}\n" for n in range(1, 11))
    resource = make_source(runtime.engine, tenant, content)
    texts = stored(runtime.engine, resource)
    assert texts == [f'{{"id":{n},"memo":"m{n}"}}' for n in range(1, 11)]
