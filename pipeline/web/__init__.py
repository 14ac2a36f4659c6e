"""``baton web``: the live board in a browser (:mod:`pipeline.web.feed`, :mod:`pipeline.web.app`, the page in
``static/``), started by :mod:`pipeline.commands.web`; docs/web.md."""
