"""How tally's processes run, set where a process starts or a phase begins: process-wide
switches, kept out of `core` (pure code).

- `allocator`: freed C heap handed back to the system after a column snapshot's build
- `collector`: the garbage collector settled at start, paused through a derived run's
  build (decision 0007), frozen at exit
- `priority`: `tally worker`'s niceness (decision 0018)
"""
