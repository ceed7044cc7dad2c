"""Rows with every type and awkward value (quotes, backslashes, control characters,
astral characters, a name longer than a PostgreSQL identifier), and the Data API
queries that read them: what a row's stored JSON text is checked against."""

from __future__ import annotations

LONG_NAME = "a column name longer than any PostgreSQL identifier may be: " + "x" * 20
AWKWARD = (
    f'id,amount,big,flag,on_day,at,local,"bank.memo","{LONG_NAME}"\n'
    "1,-0.05,12345678901234567.89,true,2024-02-29,2024-01-05T10:30:00.25+02:00,"
    '2024-01-05 10:30:00,"quote "" and \\\\ back",é\n'
    "2,0,0.10,false,0999-01-01,2024-01-05T23:00:00Z,2024-01-05T10:30:00.000001,"
    '"tab\there, new\nline",\u2028\n'
    "3,,,,,,,,\n"
    "4,1000000.5,-92233720368547758.07,TRUE,9999-12-31,9999-12-31T23:59:59Z,"
    "0001-01-01T00:00:00,\x01 control,\U0001f600\n"
)
QUERIES = (
    {},
    {"ordering": "-amount"},
    {"ordering": "at", "page": 2, "page_size": 2},
    {"filters": [("flag", "true")]},
    {"fields": "id,amount"},
)
