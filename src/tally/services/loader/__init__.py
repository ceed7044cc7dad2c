"""The CSV loader: read a file as published, infer its types, load it all or nothing."""
