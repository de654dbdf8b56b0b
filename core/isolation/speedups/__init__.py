"""The worker's speed-ups, plugged into the isolation core: which are on, and how.

The core (pool, zygote loop, job, supervision) exports without any of them. Each one
here makes a save faster on some Python and platform; each has a switch and is off
where it gains nothing (``switches``, shown by ``exportlens version`` and the worker's
log); each is measured by a row of ``bench/bench_speedups.py`` and has a decision
record in ``docs/decisions/``:

- ``standby``: the next job process forked and warmed before its request
  (``ForkStandby`` wraps the core's ``forking.Forker``);
- ``hotpages``: the standby warmed by writing the pages an export writes;
- ``fakecache``: fake-tensor calls answered in the worker for later jobs (``AnswerSpeedUp``);
- ``preload`` (with ``preload_record`` and ``observable``): the libraries jobs import,
  imported in the worker while idle (``PreloadSpeedUp``);
- ``framestack``: the workers' frames in one chunk of CPython's frame stack.

``EXPORTLENS_SPEEDUPS=off`` turns every one off: the core alone. ``plugins`` gives the
zygote those that are on.
"""
