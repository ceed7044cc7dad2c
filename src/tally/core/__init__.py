"""Pure code shared by every layer: types, grammar, errors. No I/O, no imports of ours."""
