"""What the tests share: the parts they are built from (a private tmux server, the demo agent, ``baton run``
as a subprocess, stand-in agents, fake files) and the one way they wait (:mod:`tests.support.polling`).

The modules that define fixtures are registered as pytest plugins in ``tests/conftest.py``; helpers are
imported from here. No test module imports another (tests/test_lint.py checks it).
"""
