"""Each typed operation of a transformation's SQL written for one backend (`forms` the
interface and what both write alike, `sqlite`, `postgresql`). Storage picks the
backend's forms (`forms_of`); services translate with whatever forms they are given and
never name a backend."""

from __future__ import annotations

from sqlalchemy import Connection

from tally.storage.engine import backend_of
from tally.storage.sql_forms.forms import Forms
from tally.storage.sql_forms.postgresql import PostgresForms
from tally.storage.sql_forms.sqlite import SqliteForms


def forms_of(conn: Connection) -> Forms:
    """The forms of the backend `conn` reads."""
    return PostgresForms() if backend_of(conn).is_postgresql else SqliteForms()


def checking_forms() -> Forms:
    """The forms a check translates with to learn the output's types and the rejections
    only types tell. These do not depend on the forms; one backend's, the same wherever
    the check runs, so a definition is accepted or refused alike on both."""
    return SqliteForms()
