"""Where the Data API's queries run: `runner` picks the threads of the API process or a
pool of query processes (`processes`, over `pool`, with `page_parts` for large pages);
`query_process` is what runs inside each of those processes."""
