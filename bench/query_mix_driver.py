"""The query mix: random combinations of 1-3 filters over every column type of the
kit's transactions CSV, with and without ordering, from a fixed seed; every answer's
count (and, when ordered, its page of ids) checked against a plain reference computed
from the CSV.

Runs in the kit's venv (numpy, orjson, httpx) and drives one target through the kit's
adapters (`data_api_bench.py`), so tally and the peers that can answer a query get the
same logical queries:

    python bench/query_mix_driver.py --target tally --base-url http://127.0.0.1:8000 \\
        --api-key KEY --workspace-id 1 --resource-id 3 --csv transactions.csv --out mix-tally
    python bench/query_mix_driver.py --target datasette --base-url ... --db transactions \\
        --table transactions --csv ... --out mix-datasette

Every filter set of the timed stream is new to the server: the stream holds no filter
set twice and the warm-up draws from another seed, so neither a response cache nor
tally's memo of exact counts per filter set answers a timed request. Requests are sent
by `--concurrency` workers, each taking the next query of the stream, for
`--duration` seconds; latency is send to last body byte. Bodies are kept (compressed)
and checked after the window, so checking costs the timed phase nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime as dt
import gzip
import json
import os
import random
import sys
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

KIT = Path(os.environ.get("BENCH_KIT", Path(__file__).resolve().parents[2] / "shared" / "bench"))
sys.dont_write_bytecode = True  # the kit's folder is shared
sys.path.insert(0, str(KIT))
import data_api_bench as kit  # noqa: E402

TEXT = ("currency", "status", "channel", "counterparty", "reference")
DECIMAL = ("amount", "fee")
PAGE_SIZES = (10, 100, None)  # None: the API's default (1000)
ORDERED_SHARE = 0.5
REQUEST_TIMEOUT_S = 120


# --- the reference: the CSV as numpy columns --------------------------------------------


def _cents(text: str) -> int:
    """'-12.30' -> -1230: the generator writes exactly two fractional digits."""
    whole, _, frac = text.partition(".")
    return int(whole + frac.ljust(2, "0"))


@dataclass
class Reference:
    """The CSV's columns as numpy arrays: numbers as integers (cents, days, seconds),
    text as codes into its sorted distinct values (byte order, as tally and SQLite sort
    it). `key(column, value)` maps a query value to the same integer scale."""

    ids: np.ndarray
    numbers: dict[str, np.ndarray]
    codes: dict[str, np.ndarray]
    values: dict[str, np.ndarray]  # distinct texts per text column, sorted
    raw: dict[str, list[str]]  # texts as written, to draw query values from

    @classmethod
    def load(cls, path: Path) -> Reference:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader)
            cols: list[list[str]] = [[] for _ in header]
            for row in reader:
                for i, v in enumerate(row):
                    cols[i].append(v)
        by = dict(zip(header, cols, strict=True))
        numbers = {
            "id": np.array(by["id"], dtype=np.int64),
            "txn_date": np.array(by["txn_date"], dtype="datetime64[D]").astype(np.int64),
            "booked_at": np.array(
                [t.rstrip("Z") for t in by["booked_at"]], dtype="datetime64[s]"
            ).astype(np.int64),
            **{c: np.array([_cents(v) for v in by[c]], dtype=np.int64) for c in DECIMAL},
        }
        codes, values = {}, {}
        for c in TEXT:
            # Code point order is UTF-8's byte order: the order tally sorts text in.
            values[c], codes[c] = np.unique(np.array(by[c]), return_inverse=True)
        raw = {c: by[c] for c in ("txn_date", "booked_at", *DECIMAL, *TEXT)}
        return cls(numbers["id"], numbers, codes, values, raw)

    def key(self, column: str, value: Any) -> int:
        if column in self.codes:
            texts = self.values[column]
            i = int(np.searchsorted(texts, str(value)))
            return i if i < len(texts) and texts[i] == value else -1 - i
        if column in DECIMAL:
            return _cents(f"{value:.2f}")
        if column == "txn_date":
            return int(np.datetime64(value, "D").astype(np.int64))
        if column == "booked_at":
            return int(np.datetime64(value.rstrip("Z"), "s").astype(np.int64))
        return int(value)

    def column(self, name: str) -> np.ndarray:
        return self.codes[name] if name in self.codes else self.numbers[name]

    def mask(self, q: kit.LogicalQuery) -> np.ndarray:
        m = np.ones(len(self.ids), dtype=bool)
        for f in q.filters:
            col = self.column(f.column)
            if f.op == "in":
                keys = [k for k in (self.key(f.column, v) for v in f.value) if k >= 0]
                m &= np.isin(col, keys)
                continue
            k = self.key(f.column, f.value)
            if f.column in self.codes and k < 0:  # a text absent from the column
                k = -1 - k  # where it would sit among the column's values
                after = f.op in ("gt", "gte")
                m &= (col >= k) if after else (col < k) if f.op != "eq" else False
                continue
            m &= {
                "eq": col == k,
                "gt": col > k,
                "gte": col >= k,
                "lt": col < k,
                "lte": col <= k,
            }[f.op]
        return m

    def first_ids(self, q: kit.LogicalQuery, m: np.ndarray) -> list[int] | None:
        """The ids of the page in the API's order (ties by row id, which is file order
        and so id order here); None without an ordering (any order is right)."""
        if not q.ordering:
            return None
        name = q.ordering.lstrip("-")
        idx = np.flatnonzero(m)
        n = len(self.ids) + 1
        composite = self.column(name)[idx] * n + self.ids[idx]
        if q.ordering.startswith("-"):
            composite = -composite
        size = q.effective_page_size
        if len(idx) > size:
            part = np.argpartition(composite, size - 1)[:size]
        else:
            part = np.arange(len(idx))
        chosen = part[np.argsort(composite[part], kind="stable")]
        return [int(i) for i in self.ids[idx[chosen]]]


# --- the mix --------------------------------------------------------------------------


def _pick(rng: random.Random, ref: Reference, column: str) -> str:
    return ref.raw[column][rng.randrange(len(ref.raw[column]))]


def _decimal(rng: random.Random, ref: Reference, column: str) -> float:
    """A threshold: mostly a value the column holds (so selectivity spans the column's
    distribution), sometimes a round or a huge one (the issue's 500000.00)."""
    r = rng.random()
    if r < 0.1:
        return 500000.0
    if r < 0.3:
        return float(rng.choice((1, 5, 10, 50, 100, 500, 1000, 5000)))
    return float(_pick(rng, ref, column))


def _range(rng: random.Random, column: str, low: Any, high: Any) -> list[kit.Filter]:
    """One bound (either side) or both: a filter on one column, one or two conditions."""
    if low > high:
        low, high = high, low
    shape = rng.choice(("gte", "gt", "lt", "lte", "between"))
    if shape == "between":
        return [kit.Filter(column, "gte", low), kit.Filter(column, "lt", high)]
    return [kit.Filter(column, shape, low if shape.startswith("g") else high)]


def _text(rng: random.Random, ref: Reference, column: str) -> list[kit.Filter]:
    if column == "reference" or rng.random() < 0.6:
        return [kit.Filter(column, "eq", _pick(rng, ref, column))]
    # `in` splits its values on commas: a value with a comma can only be matched by `eq`.
    choices = {_pick(rng, ref, column) for _ in range(rng.randint(2, 3))}
    values = tuple(sorted(v for v in choices if "," not in v))
    return [kit.Filter(column, "in", values)] if values else [kit.Filter(column, "eq", "none")]


def _filter(rng: random.Random, ref: Reference, column: str) -> list[kit.Filter]:
    if column in TEXT:
        return _text(rng, ref, column)
    if column in DECIMAL:
        return _range(rng, column, _decimal(rng, ref, column), _decimal(rng, ref, column))
    if column == "id":
        n = len(ref.ids)
        return _range(rng, column, rng.randint(1, n), rng.randint(1, n))
    if column == "txn_date" and rng.random() < 0.3:
        return [kit.Filter(column, "eq", _pick(rng, ref, column))]
    return _range(rng, column, _pick(rng, ref, column), _pick(rng, ref, column))


FILTER_COLUMNS = ("id", "txn_date", "booked_at", *DECIMAL, *TEXT)
ORDER_COLUMNS = ("id", "txn_date", "booked_at", *DECIMAL, "currency", "status", "counterparty")


def mix(ref: Reference, seed: int, n: int) -> list[kit.LogicalQuery]:
    """`n` queries, no filter set twice (whatever their ordering and page size)."""
    rng = random.Random(seed)
    seen: set[tuple[Any, ...]] = set()
    out: list[kit.LogicalQuery] = []
    while len(out) < n:
        columns = rng.sample(FILTER_COLUMNS, rng.choice((1, 1, 2, 2, 2, 3)))
        filters = tuple(f for c in columns for f in _filter(rng, ref, c))
        signature = tuple(sorted((f.column, f.op, str(f.value)) for f in filters))
        if signature in seen:
            continue
        seen.add(signature)
        ordering = None
        if rng.random() < ORDERED_SHARE:
            ordering = ("-" if rng.random() < 0.5 else "") + rng.choice(ORDER_COLUMNS)
        title = " & ".join(f"{f.column} {f.op} {f.value}" for f in filters)
        out.append(
            kit.LogicalQuery(
                f"M{len(out)}",
                title,
                filters=filters,
                ordering=ordering,
                page_size=rng.choice(PAGE_SIZES),
            )
        )
    return out


# --- driving a target -------------------------------------------------------------------


class BodyConnection(kit.RawHttpConnection):
    """The kit's raw keep-alive client, keeping the body (as sent, maybe gzipped)."""

    async def fetch(self, raw: bytes) -> tuple[int, bytes, bool]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(
                self.host, self.port, limit=1 << 20
            )
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip().lower()
        if b"chunked" in fields.get(b"transfer-encoding", b""):
            parts = []
            while size := int((await self.reader.readline()).split(b";")[0], 16):
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            while (await self.reader.readline()) not in (b"\r\n", b""):
                pass
            body = b"".join(parts)
        elif b"content-length" in fields:
            body = await self.reader.readexactly(int(fields[b"content-length"]))
        else:
            body = await self.reader.read()
            fields[b"connection"] = b"close"
        if b"close" in fields.get(b"connection", b""):
            await self.close()
        return status, body, fields.get(b"content-encoding") == b"gzip"


@dataclass
class Answer:
    query: int
    status: int
    seconds: float
    body: bytes
    gzipped: bool
    sent_at: float


async def drive(
    adapter: kit.Adapter,
    reqs: list[kit.Req],
    headers: dict[str, str],
    concurrency: int,
    seconds: float,
) -> tuple[list[Answer], dict[str, int], float]:
    """Each worker takes the next request of the stream until the time is up or the
    stream ends; the requests in flight at the deadline are awaited and counted."""
    host_port = urllib.parse.urlsplit(adapter.base_url)
    answers: list[Answer] = []
    errors: dict[str, int] = {}
    nxt = [0]
    t0 = time.perf_counter()
    deadline = t0 + seconds

    async def worker() -> None:
        conn = BodyConnection(host_port.hostname, host_port.port)
        try:
            while time.perf_counter() < deadline and nxt[0] < len(reqs):
                i = nxt[0]
                nxt[0] += 1
                _, _, payload = kit.raw_request_bytes(adapter.base_url, reqs[i], headers)
                t = time.perf_counter()
                try:
                    status, body, gz = await asyncio.wait_for(
                        conn.fetch(payload), REQUEST_TIMEOUT_S
                    )
                except Exception as e:  # record, reconnect, go on
                    errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
                    await conn.close()
                    continue
                answers.append(Answer(i, status, time.perf_counter() - t, body, gz, t - t0))
        finally:
            await conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return answers, errors, time.perf_counter() - t0


# --- checking ---------------------------------------------------------------------------


def check(
    ref: Reference, adapter: kit.Adapter, q: kit.LogicalQuery, a: Answer
) -> tuple[str, str | None]:
    """('ok' | 'no count' | 'FAIL', why): the count is exact and the page right (its
    size; its ids in order when ordered, matching rows when not)."""
    if a.status != 200:
        return "FAIL", f"HTTP {a.status}: {a.body[:200]!r}"
    page = adapter.parse(orjson.loads(gzip.decompress(a.body) if a.gzipped else a.body))
    m = ref.mask(q)
    total = int(m.sum())
    if page.total_count is not None and page.total_count != total:
        return "FAIL", f"total_count {page.total_count}, expected {total}"
    size = q.effective_page_size
    ids = [int(r["id"]) for r in page.rows]
    if len(ids) != min(size, total):
        return "FAIL", f"{len(ids)} rows, expected {min(size, total)}"
    want = ref.first_ids(q, m)
    if want is not None and ids != want:
        return "FAIL", f"ids {ids[:5]}..., expected {want[:5]}..."
    if want is None and not m[np.searchsorted(ref.ids, ids)].all():
        return "FAIL", "a row that does not match the filters"
    return ("ok" if page.total_count is not None else "no count"), None


# --- summary ----------------------------------------------------------------------------


def _pct(sorted_s: list[float], p: float) -> float | None:
    v = kit.percentile(sorted_s, p)
    return None if v is None else round(v * 1000, 2)


def latency(seconds: list[float]) -> dict[str, Any]:
    s = sorted(seconds)
    return {
        "n": len(s),
        "p50": _pct(s, 50),
        "p95": _pct(s, 95),
        "p99": _pct(s, 99),
        "max": round(s[-1] * 1000, 2) if s else None,
    }


def kind_of(q: kit.LogicalQuery) -> str:
    columns = len({f.column for f in q.filters})
    return f"{columns} filter{'s' if columns > 1 else ''}, " + (
        "ordered" if q.ordering else "unordered"
    )


def summarise(
    queries: list[kit.LogicalQuery],
    reqs: list[kit.Req],
    answers: list[Answer],
    verdicts: list[tuple[str, str | None]],
    errors: dict[str, int],
    elapsed: float,
) -> dict[str, Any]:
    ok = [a for a, v in zip(answers, verdicts, strict=True) if a.status == 200]
    by_kind: dict[str, list[float]] = {}
    for a in ok:
        by_kind.setdefault(kind_of(queries[a.query]), []).append(a.seconds)
    slowest = sorted(ok, key=lambda a: -a.seconds)[:15]
    failures = [
        {"query": reqs[a.query].display, "why": why}
        for a, (verdict, why) in zip(answers, verdicts, strict=True)
        if verdict == "FAIL"
    ]
    return {
        "requests": len(answers),
        "ok": len(ok),
        "errors": errors,
        "statuses": {
            str(s): sum(a.status == s for a in answers) for s in sorted({a.status for a in answers})
        },
        "elapsed_s": round(elapsed, 3),
        "rps": round(len(ok) / elapsed, 2) if elapsed else None,
        "latency_ms": latency([a.seconds for a in ok]),
        "by_kind": {k: latency(v) for k, v in sorted(by_kind.items())},
        "checks": {v: sum(x[0] == v for x in verdicts) for v in ("ok", "no count", "FAIL")},
        "failures": failures[:20],
        "slowest": [
            {"ms": round(a.seconds * 1000, 1), "query": reqs[a.query].display} for a in slowest
        ],
    }


def markdown(res: dict[str, Any]) -> str:
    s = res["summary"]
    lat = s["latency_ms"]
    lines = [
        f"# query mix: {res['label']}",
        "",
        f"{res['settings']}",
        "",
        f"requests {s['requests']} (ok {s['ok']}), {s['rps']} req/s, "
        f"p50 {lat['p50']} / p95 {lat['p95']} / p99 {lat['p99']} / max {lat['max']} ms; "
        f"checks {s['checks']}; errors {s['errors']}",
        "",
        "| kind | n | p50 | p95 | p99 | max |",
        "|---|---|---|---|---|---|",
    ]
    for k, v in s["by_kind"].items():
        lines.append(f"| {k} | {v['n']} | {v['p50']} | {v['p95']} | {v['p99']} | {v['max']} |")
    lines += ["", "slowest:", ""]
    lines += [f"- {x['ms']} ms `{x['query']}`" for x in s["slowest"]]
    if s["failures"]:
        lines += ["", "failures:", ""]
        lines += [f"- `{x['query']}`: {x['why']}" for x in s["failures"]]
    return "\n".join(lines) + "\n"


# --- main -------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    t = time.perf_counter()
    ref = Reference.load(Path(args.csv))
    print(f"[mix] reference loaded in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    adapter = kit.make_adapter(args)
    timed = mix(ref, args.seed, args.queries)
    warm = mix(ref, args.seed + 1_000_003, args.queries)
    warm_sigs = {q.title for q in warm}
    timed = [q for q in timed if q.title not in warm_sigs]
    headers = {"Accept": "application/json", "Accept-Encoding": "gzip", **adapter.client_headers()}
    reqs = [await adapter.build(None, q) for q in timed]
    warm_reqs = [await adapter.build(None, q) for q in warm]
    watch = kit.ProcWatch(args.server_pid or [])
    if args.warmup > 0:
        await drive(adapter, warm_reqs, headers, args.concurrency, args.warmup)
    before, host0, cpu_c0 = watch.sample(), kit.host_cpu_sample(), kit._client_cpu()
    load0 = os.getloadavg()
    answers, errors, elapsed = await drive(adapter, reqs, headers, args.concurrency, args.duration)
    after, host1, cpu_c1 = watch.sample(), kit.host_cpu_sample(), kit._client_cpu()
    t = time.perf_counter()
    verdicts = [check(ref, adapter, timed[a.query], a) for a in answers]
    print(
        f"[mix] {len(answers)} answers checked in {time.perf_counter() - t:.1f} s", file=sys.stderr
    )
    summary = summarise(timed, reqs, answers, verdicts, errors, elapsed)
    summary.update(kit.host_cpu_delta(host0, host1))
    summary["client_cpu_ms_per_request"] = (
        round((cpu_c1 - cpu_c0) * 1000 / len(answers), 2) if answers else None
    )
    if before and after and answers:
        summary["server_cpu_ms_per_request"] = round(
            (after["cpu_s"] - before["cpu_s"]) * 1000 / len(answers), 2
        )
    return {
        "label": args.label or adapter.kind,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "settings": {
            "seed": args.seed,
            "stream": len(timed),
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "csv": args.csv,
            "rows": len(ref.ids),
            "loadavg_at_start": [round(x, 2) for x in load0],
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
            "target_version": args.target_version,
            "note": args.note,
        },
        "summary": summary,
        "requests": [
            {
                "url": reqs[a.query].display,
                "ms": round(a.seconds * 1000, 2),
                "status": a.status,
                "check": v[0],
            }
            for a, v in zip(answers, verdicts, strict=True)
        ],
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--target", required=True, choices=("tally", "datasette", "roapi"))
    p.add_argument("--base-url", required=True)
    p.add_argument("--api-key")
    p.add_argument("--workspace-id", type=int)
    p.add_argument("--resource-id", type=int)
    p.add_argument("--db", default="transactions")
    p.add_argument("--table", default="transactions")
    p.add_argument("--csv", required=True)
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--queries", type=int, default=20000, help="length of the query stream")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--duration", type=float, default=30)
    p.add_argument("--warmup", type=float, default=3)
    p.add_argument("--server-pid", type=int, action="append")
    p.add_argument("--label")
    p.add_argument("--target-version")
    p.add_argument("--note")
    p.add_argument("--out", required=True, help="writes OUT.json and OUT.md")
    args = p.parse_args(argv)
    args.datasette_paging, args.datasette_nocount = "keyset", False
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    res = asyncio.run(run(args))
    Path(f"{args.out}.json").write_text(json.dumps(res, indent=1))
    Path(f"{args.out}.md").write_text(markdown(res))
    print(markdown(res))
    return 0 if res["summary"]["checks"]["FAIL"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
