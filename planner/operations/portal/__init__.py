"""The self-service portal (``gpuplan portal``): team leads submit training requests and see their queue,
plan, use and cost; platform admins manage teams, users and replans. A FastAPI app on the daemon's
database (``planner.operations.portal.app.create_app``).

Nothing is imported here: the daemon's replan takes ``planner.operations.portal.queue.feed_scenario``
(SQLAlchemy only, handed to it by the command that starts it), which must work without the ``portal``
extra (FastAPI, uvicorn, argon2) installed.
"""
