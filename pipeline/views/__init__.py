"""What the commands show, apart from the handlers that parse and decide (:mod:`pipeline.commands`): the
tiles' rows, the live board (this host's and every host's), the hand-off tables, ``history --follow`` and
the cross-host views read from the bus."""
