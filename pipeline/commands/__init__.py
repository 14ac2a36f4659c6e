"""What the `baton` subcommands do beyond parsing arguments (:mod:`pipeline.cli` stays thin)."""
