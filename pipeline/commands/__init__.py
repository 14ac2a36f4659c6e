"""One module per ``baton`` subcommand, named after it, each with its ``NAME_command`` handler
(:mod:`pipeline.cli` only parses). What the handlers share is in :mod:`pipeline.cmdline`, what they show in
:mod:`pipeline.views`."""
