"""The engine: routes.yaml, the four stages and what joins them (tiles, hops, the journal, the file watcher).

Knows no particular agent: adapters and transforms reach it only through :mod:`pipeline.plugin`."""
