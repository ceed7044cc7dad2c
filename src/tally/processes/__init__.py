"""How tally's processes run: their garbage collector and CPU priority, set where a
process starts or a phase begins. Process-wide switches, kept out of `core` (pure code)."""
